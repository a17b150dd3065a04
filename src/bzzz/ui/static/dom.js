// Building the page from data: every value goes in as text (textContent), never as markup.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function replace(target, ...children) {
  const node = typeof target === "string" ? document.getElementById(target) : target;
  node.replaceChildren();
  append(node, children);
  return node;
}

// A status word in its colour (the class comes from a fixed list, never from the data).
const STATUS_CLASSES = new Set([
  "idle", "busy", "offline", "error", "active", "paused", "completed", "escalated",
  "pending", "in_progress", "failed", "delivered", "dead", "online", "agreed", "proposed",
  "submitted", "stored", "remote", "open", "resolved",
]);

export function badge(status) {
  const word = String(status ?? "—");
  const known = STATUS_CLASSES.has(word) ? ` s-${word}` : "";
  return el("span", { class: `badge${known}` }, word);
}

export function table(columns, rows, empty = "Nothing to show.") {
  if (!rows.length) return el("p", { class: "empty" }, empty);
  const head = el("tr", {}, columns.map((c) => el("th", { scope: "col" }, c.label)));
  // Each cell carries its label (shown on a phone, where a row is a card of "LABEL value"
  // lines) as an element of its own beside the value's: the two are laid out as boxes, never
  // run together. The label's text is drawn from its data-label (CSS), so a cell's text is its
  // value's alone.
  const body = rows.map((row) =>
    el("tr", {}, columns.map((c) =>
      el("td", { class: c.class || null, dataset: { label: c.label } },
        c.label ? el("span", { class: "cell-label", "aria-hidden": "true",
          dataset: { label: c.label } }) : null,
        el("span", { class: "cell-value" }, c.cell(row))))));
  return el("div", { class: "table-wrap" },
    el("table", {}, el("thead", {}, head), el("tbody", {}, body)));
}

// A time as "<n> s ago" (minutes, hours; a date past a day), kept current by tick().
function ago(at) {
  const seconds = Math.round((Date.now() - at.getTime()) / 1000);
  return seconds < 60 ? `${Math.max(seconds, 0)} s ago`
    : seconds < 3600 ? `${Math.round(seconds / 60)} min ago`
    : seconds < 86400 ? `${Math.round(seconds / 3600)} h ago`
    : at.toISOString().slice(0, 10);
}

export function when(iso) {
  if (!iso) return "—";
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return String(iso);
  return el("time", { datetime: at.toISOString(), title: at.toISOString(), class: "ago" }, ago(at));
}

// Every relative time on the page, read again from its datetime (a timer calls it).
export function tick(root = document) {
  for (const node of root.querySelectorAll("time.ago")) {
    const text = ago(new Date(node.dateTime));
    if (node.textContent !== text) node.textContent = text;
  }
}

export function usd(value) {
  const n = Number(value || 0);
  return `$${n < 1 ? n.toFixed(4) : n.toFixed(2)}`;
}

export function percent(ratio) {
  return ratio === null || ratio === undefined ? "—" : `${Math.round(ratio * 100)} %`;
}

export function card(label, value, note) {
  return el("div", { class: "card" },
    el("div", { class: "card-label" }, label),
    el("div", { class: "card-value" }, value),
    note ? el("div", { class: "card-note" }, note) : null);
}

export function text(content) {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  if (typeof content === "object") {
    for (const key of ["text", "decision", "content", "message", "body", "description"]) {
      if (typeof content[key] === "string") return content[key];
    }
  }
  return JSON.stringify(content);
}
