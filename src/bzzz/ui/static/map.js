// The Map tab: who talks to whom in the chosen window (15 min, 1 h, 24 h), drawn as plain SVG
// so that tests and screen readers read it: agents are nodes (on a circle, by project), the
// messages and task assignments between two agents an edge with its counts, the threads
// active in the window groups around their members. A click (or Enter) on an edge lists its
// messages that this token may read. Data: GET /api/v1/map and /api/v1/map/edge.
import { api } from "./api.js";
import { agentLink, svg } from "./agent.js";
import { el, replace, table, text, when } from "./dom.js";
import { hrefOf, navigate, view, WINDOWS } from "./filter.js";

let selected = null;  // the edge listed: "a|b"

const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

export function edgeLabel(e) {
  return `${e.source} and ${e.target}: ${plural(e.messages, "message")}, `
    + `${plural(e.tasks, "task assignment")}`;
}

// A label cut to the room it has inside the drawing (12 px monospace: ~7.3 px a character);
// the whole id is in the node's title and aria-label.
function fitted(id, room) {
  const most = Math.max(4, Math.floor(room / 7.3));
  return id.length > most ? `${id.slice(0, most - 1)}…` : id;
}

function controls(data) {
  const select = el("select", { id: "map-window", "aria-label": "time window" },
    Object.entries(WINDOWS).map(([value, label]) => el("option", { value }, `last ${label}`)));
  select.value = data.window;
  select.addEventListener("change", () => navigate({ window: select.value }));
  const note = `${plural(data.nodes.length, "agent")} · ${plural(data.edges.length, "pair")} · `
    + `${plural(data.groups.length, "thread")}`;
  return el("div", { class: "map-controls" },
    el("label", { for: "map-window" }, "Window"), select,
    el("span", { class: "meta", id: "map-summary" }, note,
      data.truncated ? el("span", { class: "warn" },
        ` · counted from the first ${data.limits.deliveries} deliveries only`) : null));
}

function positions(nodes, width, height) {
  const margin = width < 520 ? 64 : 110;
  const radius = Math.max(Math.min(width / 2, height / 2) - margin, 36);
  const at = new Map();
  nodes.forEach((node, i) => {
    const angle = -Math.PI / 2 + (2 * Math.PI * i) / Math.max(nodes.length, 1);
    at.set(node.id, { x: width / 2 + radius * Math.cos(angle), y: height / 2 + radius * Math.sin(angle),
      angle });
  });
  return at;
}

function groupShape(group, at, index) {
  const points = group.members.map((m) => at.get(m)).filter(Boolean);
  const label = `thread “${group.topic}” (${group.status}): ${group.members.join(", ")}`;
  const g = svg("g", { class: `map-group grp-${index % 6}`, "data-thread": group.thread_id,
    "aria-label": label });
  g.append(svg("title", {}, label));
  if (points.length >= 3) {
    g.append(svg("polygon", { points: points.map((p) => `${p.x},${p.y}`).join(" ") }));
  } else if (points.length === 2) {
    g.append(svg("line", { x1: points[0].x, y1: points[0].y, x2: points[1].x, y2: points[1].y }));
  } else if (points.length === 1) {
    g.append(svg("circle", { cx: points[0].x, cy: points[0].y, r: 4 }));
  }
  return g;
}

function edgeShape(e, at, onPick) {
  const a = at.get(e.source), b = at.get(e.target);
  if (!a || !b) return null;
  const label = edgeLabel(e);
  const key = `${e.source}|${e.target}`;
  const g = svg("g", { class: `map-edge${selected === key ? " selected" : ""}`, role: "button",
    tabindex: 0, "aria-label": label, "data-source": e.source, "data-target": e.target,
    "data-messages": e.messages, "data-tasks": e.tasks });
  g.append(svg("title", {}, label));
  const width = Math.min(1.5 + Math.log2(1 + e.messages + e.tasks) * 1.5, 8);
  g.append(svg("line", { x1: a.x, y1: a.y, x2: b.x, y2: b.y, class: "hit" }));
  g.append(svg("line", { x1: a.x, y1: a.y, x2: b.x, y2: b.y, class: e.messages ? "wire" : "wire task",
    "stroke-width": width }));
  const count = !e.tasks ? String(e.messages) : e.messages ? `${e.messages} + ${e.tasks}t` : `${e.tasks}t`;
  const mx = (a.x + b.x) / 2, my = (a.y + b.y) / 2;
  g.append(svg("rect", { x: mx - 5 - count.length * 3.6, y: my - 10, width: 10 + count.length * 7.2,
    height: 20, rx: 9, class: "count-back" }));
  g.append(svg("text", { x: mx, y: my + 4, "text-anchor": "middle", class: "count" }, count));
  const pick = () => onPick(e);
  g.addEventListener("click", pick);
  g.addEventListener("keydown", (event) => {
    if (event.key === "Enter" || event.key === " ") { event.preventDefault(); pick(); }
  });
  return g;
}

function nodeShape(node, at, projects, width) {
  const p = at.get(node.id);
  const label = `agent ${node.id}, ${node.role}, project ${node.project || "none"}, ${node.status}`;
  const link = svg("a", { href: hrefOf({ tab: "agent", agent: node.id }), class: "map-node-link",
    "aria-label": label });
  const g = svg("g", { class: `map-node proj-${projects.indexOf(node.project || "") % 6} st-${node.status}`,
    "data-node": node.id, "data-project": node.project || "" });
  g.append(svg("title", {}, label));
  g.append(svg("circle", { cx: p.x, cy: p.y, r: 13 }));
  const cos = Math.cos(p.angle), sin = Math.sin(p.angle);
  const anchor = Math.abs(cos) < 0.3 ? "middle" : cos > 0 ? "start" : "end";
  const dx = anchor === "middle" ? 0 : cos > 0 ? 19 : -19;
  const dy = anchor === "middle" ? (sin > 0 ? 30 : -20) : 4;
  const x = p.x + dx;
  const room = anchor === "start" ? width - x - 4 : anchor === "end" ? x - 4
    : 2 * Math.min(x, width - x) - 8;
  g.append(svg("text", { x, y: p.y + dy, "text-anchor": anchor, class: "node-label" },
    fitted(node.id, room)));
  link.append(g);
  return link;
}

export function renderMap(data, report) {
  const host = document.getElementById("map");
  const width = Math.max(Math.min(host.clientWidth || 640, 900), 300);
  const height = Math.round(Math.min(Math.max(width * 0.8, 300), 620));
  const at = positions(data.nodes, width, height);
  // An edge listed that is no longer drawn (another window or project): its list goes too.
  if (selected && !data.edges.some((e) => `${e.source}|${e.target}` === selected)) {
    selected = null;
    replace("map-edge");
  }
  const projects = [...new Set(data.nodes.map((n) => n.project || ""))].sort();
  const drawing = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, class: "talk-map",
    role: "group", "aria-label": `who talks to whom in the last ${WINDOWS[data.window]}`,
    "data-window": data.window, "data-project": data.project || "" });
  drawing.append(svg("title", {}, `Who talks to whom (last ${WINDOWS[data.window]})`));
  const layers = ["groups", "edges", "nodes"].map((name) => svg("g", { class: `layer-${name}` }));
  data.groups.forEach((group, i) => layers[0].append(groupShape(group, at, i)));
  const pick = (e) => showEdge(e, report);
  for (const e of data.edges) {
    const shape = edgeShape(e, at, pick);
    if (shape) layers[1].append(shape);
  }
  for (const node of data.nodes) layers[2].append(nodeShape(node, at, projects, width));
  drawing.append(...layers);
  const legend = projects.length > 1 ? el("ul", { class: "map-legend" },
    projects.map((p, i) => el("li", { class: `proj-${i % 6}` }, el("span", { class: "swatch" }), p || "no project")))
    : null;
  replace(host, el("h2", {}, "Who talks to whom"), controls(data),
    data.nodes.length ? el("div", { class: "map-frame" }, drawing)
      : el("p", { class: "empty" }, "No agent of this token's projects was active in this window."),
    legend,
    data.nodes.length ? el("p", { class: "meta map-key" }, "An edge's label counts its messages, "
      + "and its task assignments with a t (dashed: task assignments only); a shaded area holds a "
      + "thread's members. Select an edge to read its messages.") : null);
}

async function showEdge(e, report) {
  selected = `${e.source}|${e.target}`;
  for (const shape of document.querySelectorAll(".map-edge")) {
    shape.classList.toggle("selected",
      `${shape.dataset.source}|${shape.dataset.target}` === selected);
  }
  try {
    const listed = await api("/api/v1/map/edge",
      { query: { a: e.source, b: e.target, window: view.window } });
    replace("map-edge", el("section", { class: "map-edge-list", dataset: { edge: selected } },
      el("h3", {}, `${e.source} ↔ ${e.target} · last ${WINDOWS[listed.window]}`),
      table([
        { label: "From", cell: (m) => agentLink(m.sender) },
        { label: "To", cell: (m) => agentLink(m.recipient) },
        { label: "Type", cell: (m) => el("span", { class: "mono" }, m.message_type) },
        { label: "Message", class: "text", cell: (m) => text(m.content) },
        { label: "When", cell: (m) => when(m.timestamp) },
      ], listed.messages, "None of these messages is one this token may read."),
      listed.hidden ? el("p", { class: "meta", id: "map-edge-hidden" },
        `${plural(listed.hidden, "message")} between them this token may not read.`) : null));
  } catch (error) { report(error); }
}

export async function loadMap(report) {
  const data = await api("/api/v1/map", { query: { window: view.window } });
  renderMap(data, report);
}
