// An agent's page (#tab=agent&agent=<id>): who it is, its lease, how it has done day by day,
// its inbox (for its owner and its project's admins; others see that it is private), its
// tasks, reservations and threads. One read: GET /api/v1/agents/{id}/page, again on the
// page's live events. Every place that names an agent links here (agentLink).
import { api } from "./api.js";
import { badge, card, el, percent, replace, table, text, when } from "./dom.js";
import { hrefOf } from "./filter.js";

const SVG = "http://www.w3.org/2000/svg";

export function svg(tag, attrs = {}, label) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value !== null && value !== undefined) node.setAttribute(key, String(value));
  }
  if (label !== undefined) node.textContent = label;
  return node;
}

/** A link to an agent's page (a name with ':' is a principal acting itself: plain text). */
export function agentLink(id, dataset = {}, extraClass = "") {
  const name = String(id ?? "");
  const cls = `mono id${extraClass ? ` ${extraClass}` : ""}`;
  if (!name || name.includes(":")) return el("span", { class: cls, dataset }, name || "—");
  return el("a", { class: `${cls} agent-link`, href: hrefOf({ tab: "agent", agent: name }), dataset,
    title: `${name}: open its page` }, name);
}

// "in 4 min" (a time to come), set once per render: the page re-reads it on its refreshes.
function until(iso) {
  if (!iso) return "—";
  const at = new Date(iso);
  const seconds = Math.round((at.getTime() - Date.now()) / 1000);
  const left = seconds <= 0 ? "now" : seconds < 60 ? `in ${seconds} s`
    : seconds < 3600 ? `in ${Math.round(seconds / 60)} min` : `in ${Math.round(seconds / 3600)} h`;
  return el("time", { datetime: at.toISOString(), title: at.toISOString() }, left);
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  const s = Number(seconds);
  return s < 1 ? `${Math.round(s * 1000)} ms` : s < 120 ? `${s.toFixed(s < 10 ? 1 : 0)} s`
    : s < 7200 ? `${Math.round(s / 60)} min` : `${(s / 3600).toFixed(1)} h`;
}

function leaseText(lease) {
  if (!lease.online) return "offline";
  if (!lease.held_here) return `held by node ${lease.node_id.slice(0, 12)}`;
  if (!lease.lease_bound) return "lives with its session";
  return `${Math.round(lease.seconds_left)} s of ${Math.round(lease.lease_seconds)} s left`;
}

function valueText(value) {
  if (value === null || value === undefined) return "—";
  return typeof value === "string" ? value : text(value) || JSON.stringify(value);
}

// Completed and failed tasks per day, stacked; the ratio in each bar's title.
function performanceChart(days, width) {
  const height = 140, left = 30, bottom = 24, top = 10, right = 6;
  const most = Math.max(1, ...days.map((d) => d.completed + d.failed));
  const plotH = height - top - bottom;
  const step = (width - left - right) / Math.max(days.length, 1);
  const y = (v) => top + plotH - (v / most) * plotH;
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height,
    class: "chart perf-chart", role: "img", "aria-label": "finished tasks per day" });
  chart.append(svg("title", {}, "Finished tasks per day: completed (green) and failed (red)"));
  chart.append(svg("text", { x: left - 6, y: y(most) + 4, class: "axis", "text-anchor": "end" }, most));
  chart.append(svg("text", { x: left - 6, y: y(0), class: "axis", "text-anchor": "end" }, 0));
  days.forEach((day, i) => {
    const x = left + i * step + step * 0.15, w = Math.max(step * 0.7, 1);
    const bar = svg("g", { class: "perf-day", "data-day": day.day });
    const ratio = day.ratio === null ? "no finished task" : `${Math.round(day.ratio * 100)} % completed`;
    bar.append(svg("title", {}, `${day.day}: ${day.completed} completed, ${day.failed} failed (${ratio})`));
    bar.append(svg("rect", { x, y: y(day.completed), width: w, height: top + plotH - y(day.completed),
      class: "done" }));
    bar.append(svg("rect", { x, y: y(day.completed + day.failed), width: w,
      height: y(day.completed) - y(day.completed + day.failed), class: "failed" }));
    chart.append(bar);
    const every = Math.ceil(days.length / 4);
    if ((i % every === 0 && days.length - 1 - i >= every / 2) || i === days.length - 1) {
      chart.append(svg("text", { x: x + w / 2, y: height - 6, class: "axis", "text-anchor": "middle" },
        day.day.slice(5)));
    }
  });
  return chart;
}

function inboxPart(inbox) {
  if (!inbox.readable) {
    return el("p", { class: "empty private", id: "agent-inbox-private" },
      "This inbox is private: only the agent's owner and its project's admins read it.");
  }
  return table([
    { label: "From", cell: (m) => agentLink(m.sender) },
    { label: "Type", cell: (m) => el("span", { class: "mono" }, m.message_type) },
    { label: "Message", class: "text", cell: (m) => valueText(m.content) },
    { label: "When", cell: (m) => when(m.timestamp) },
  ], inbox.messages, "No message in its inbox.");
}

function tasksPart(tasks) {
  if (!tasks.readable) return el("p", { class: "empty private" }, "Its tasks are private.");
  return table([
    { label: "Task", cell: (t) => el("span", { class: "stack" },
      el("span", { class: "mono id", dataset: { task: t.id } }, t.id), el("span", { class: "muted" }, t.type)) },
    { label: "Status", cell: (t) => badge(t.status) },
    { label: "Progress", class: "text", cell: (t) => valueText(t.progress) },
    { label: "Result", class: "text", cell: (t) => el("span", { dataset: { result: t.id } },
      t.status === "failed" ? valueText(t.error) : valueText(t.result)) },
    { label: "Duration", class: "num", cell: (t) => el("span", { class: "nowrap" },
      t.finished ? duration(t.duration_seconds) : `${duration(t.duration_seconds)} so far`) },
    { label: "Assigned by", cell: (t) => agentLink(t.assigner) },
    { label: "Started", cell: (t) => when(t.startTime) },
  ], tasks.tasks, "No task.");
}

function reservationsPart(reservations) {
  return table([
    { label: "Paths", class: "text", cell: (r) => el("span", { class: "stack" },
      r.paths.map((p) => el("span", { class: "mono", dataset: { reservedPath: p } }, p))) },
    { label: "Mode", cell: (r) => badge(r.mode) },
    { label: "Reason", class: "text", cell: (r) => r.reason || "—" },
    { label: "Expires", cell: (r) => until(r.expires_at) },
  ], reservations, "It holds no path.");
}

function threadsPart(threads, hidden, onOpenThread) {
  const rows = table([
    { label: "Topic", class: "text", cell: (t) => el("button", { type: "button", class: "link",
      dataset: { agentThread: t.id }, onclick: () => onOpenThread(t.id) }, t.topic) },
    { label: "Status", cell: (t) => badge(t.status) },
    { label: "Participants", cell: (t) => el("span", { class: "ids" }, t.participants.map((p) => agentLink(p))) },
    { label: "Messages", class: "num", cell: (t) => String(t.message_count) },
    { label: "Last activity", cell: (t) => when(t.last_activity) },
  ], threads, "In no thread this token reads.");
  return [rows, hidden ? el("p", { class: "meta" }, `${hidden} more thread(s) this token does not read.`) : null];
}

export function renderAgentPage(page, onOpenThread) {
  const a = page.agent;
  const host = document.getElementById("agent-page");
  const width = Math.max(Math.min(host.clientWidth || 600, 720), 280);
  replace(host, el("article", { class: "agent-page", dataset: { agentPage: a.id } },
    el("p", { class: "meta" }, el("a", { href: hrefOf({ tab: "agents", agent: null }) }, "← Agents")),
    el("div", { class: "section-head" }, el("h2", {}, el("span", { class: "mono id" }, a.id)), badge(a.status)),
    el("p", { class: "meta mono" }, a.address),
    el("div", { class: "cards" },
      card("Role", a.role, a.specialization),
      card("Project", a.project || "—"),
      card("Lease", el("span", { class: "lease" }, leaseText(page.lease)),
        el("span", {}, "last active ", when(a.last_activity))),
      card("Performance", percent(page.performance.current),
        `${a.tasks_completed} completed · ${a.tasks_failed} failed`),
      card("Tasks", `${a.active_tasks} / ${a.max_tasks}`, "active / most")),
    el("p", { class: "capabilities" }, el("strong", {}, "Capabilities: "),
      (a.capabilities || []).join(", ") || "—"),
    el("h3", {}, "Performance over time"),
    page.performance.days.length ? performanceChart(page.performance.days, width)
      : el("p", { class: "empty" }, "Its tasks are private."),
    el("section", { id: "agent-inbox" }, el("h3", {}, "Inbox"), inboxPart(page.inbox)),
    el("section", { id: "agent-tasks" }, el("h3", {}, "Tasks"), tasksPart(page.tasks)),
    el("section", { id: "agent-reservations" }, el("h3", {}, "Reservations"),
      reservationsPart(page.reservations)),
    el("section", { id: "agent-threads" }, el("h3", {}, "Threads"),
      threadsPart(page.threads, page.hidden_threads, onOpenThread))));
}

export async function loadAgentPage(agentId, onOpenThread) {
  const host = document.getElementById("agent-page");
  const shown = host.querySelector("[data-agent-page]");
  // Another agent's page does not stay up while this one loads.
  if (shown && shown.dataset.agentPage !== agentId) replace(host, el("p", { class: "meta" }, "Loading…"));
  const page = await api(`/api/v1/agents/${encodeURIComponent(agentId)}/page`);
  renderAgentPage(page, onOpenThread);
}
