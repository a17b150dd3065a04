// One function per section: data in (from /api/v1), DOM out.
import { badge, card, el, percent, replace, table, text, usd, when } from "./dom.js";
import { meter, spendChart } from "./chart.js";
import { agentLink } from "./agent.js";

export function renderAgents(agents, metrics) {
  const availability = metrics && metrics.agent_availability;
  const cards = [
    card("Agents", String(agents.length), `${agents.filter((a) => a.status !== "offline").length} online`),
    card("Available", availability ? percent(availability.ratio) : "—", "of the network"),
    card("Task completion", metrics ? percent(metrics.task_completion_rate?.ratio) : "—"),
    card("Escalation rate", metrics ? percent(metrics.thread_escalation_rate?.ratio) : "—"),
    card("Consensus", metrics ? percent(metrics.consensus_success_rate?.ratio) : "—"),
  ];
  replace("agent-cards", cards);
  replace("agents", el("h2", {}, "Agents"), table([
    { label: "Agent", cell: (a) => agentLink(a.id, { agent: a.id }) },
    { label: "Role", cell: (a) => a.role },
    { label: "Project", cell: (a) => a.project || "—" },
    { label: "Status", cell: (a) => badge(a.status) },
    { label: "Tasks", class: "num", cell: (a) => el("span", { class: "nowrap" },
      `${a.active_tasks ?? 0} / ${a.max_tasks}`) },
    { label: "Performance", class: "num", cell: (a) => percent(a.performance) },
    { label: "Capabilities", class: "text", cell: (a) => (a.capabilities || []).join(", ") || "—" },
    { label: "Last activity", cell: (a) => when(a.last_activity) },
  ], agents, "No agent this token may see is on the network."));
}

function consensusCell(thread) {
  if (thread.consensus) {
    return el("span", { class: "consensus" }, badge("agreed"), " ",
      (thread.consensus.decisions || []).join("; "));
  }
  const proposed = (thread.decision_log || []).filter((d) => d.status === "proposed");
  return proposed.length ? el("span", {}, badge("proposed"), ` ${proposed.length}`) : "—";
}

// Agent ids side by side: each whole on its line, the list free to wrap between them.
function ids(list) {
  return el("span", { class: "ids" }, list.map((id) => agentLink(id)));
}

export function renderThreads(threads, onOpen) {
  replace("threads", el("h2", {}, "Threads"), table([
    { label: "Topic", class: "text", cell: (t) => el("button", { type: "button", class: "link",
      dataset: { thread: t.id }, onclick: () => onOpen(t.id) }, t.topic) },
    { label: "Status", cell: (t) => badge(t.status) },
    { label: "Participants", cell: (t) => ids(t.participants) },
    { label: "Messages", class: "num", cell: (t) => String(t.message_count) },
    { label: "Escalations", class: "num", cell: (t) => t.open_escalations
      ? el("span", { class: "warn" }, `${t.open_escalations} open`)
      : String((t.escalation_history || []).length) },
    { label: "Consensus", cell: consensusCell },
    { label: "SLURP", cell: (t) => t.slurp_events.length
      ? t.slurp_events.map((s) => badge(s.status)) : "—" },
    { label: "Last activity", cell: (t) => when(t.last_activity) },
  ], threads, "No thread this token reads."));
}

export function renderTasks(tasks) {
  replace("tasks", el("h2", {}, "Tasks"), table([
    // The task's id over its agent's: two whole ids in one column leave room for the rest.
    { label: "Task · agent", cell: (t) => el("span", { class: "stack" },
      el("span", { class: "mono id", dataset: { task: t.id } }, t.id),
      agentLink(t.agent_id, {}, "muted")) },
    { label: "Type · priority", cell: (t) => el("span", { class: "stack nowrap" },
      t.type, el("span", { class: "muted" }, t.priority)) },
    { label: "Description", class: "text", cell: (t) => t.description },
    { label: "Status", cell: (t) => badge(t.status) },
    { label: "Assigned by · started", cell: (t) => el("span", { class: "stack" },
      agentLink(t.assigner), el("span", { dataset: { started: t.id } },
        when(t.startTime))) },
  ], tasks, "No task of an agent this token reads."));
}

function spendCard(label, usage, limit, warning) {
  const spent = Number(usage.totalCost || 0);
  return el("div", { class: "card wide" },
    el("div", { class: "card-label" }, label),
    el("div", { class: "card-value", dataset: { spend: label.toLowerCase() } }, usd(spent)),
    el("div", { class: "card-note" }, limit ? `of ${usd(limit)} limit · ${usage.apiCalls} calls`
      : `no limit · ${usage.apiCalls} calls`),
    meter(spent, limit, warning));
}

export function renderCosts(costs) {
  const limits = costs.limits || {};
  const models = Object.entries(costs.monthly.models || {}).map(([model, m]) => ({ model, ...m }));
  const access = costs.model_access || {};
  replace("costs",
    el("h2", {}, "Costs"),
    el("div", { class: "cards" },
      spendCard("Today", costs.daily, limits.dailyLimit, limits.warningThreshold),
      spendCard("This month", costs.monthly, limits.monthlyLimit, limits.warningThreshold),
      card("Model access", access.enabled ? "enabled" : "off", access.default_model || access.reason)),
    el("h3", {}, `Spend per day (last ${costs.history.length} days)`),
    spendChart(costs.history, limits.dailyLimit),
    el("h3", {}, "This month by model"),
    table([
      { label: "Model", cell: (m) => m.model },
      { label: "Calls", class: "num", cell: (m) => String(m.calls) },
      { label: "Tokens", class: "num", cell: (m) => String(m.tokens) },
      { label: "Cost", class: "num", cell: (m) => usd(m.cost) },
    ], models, "No model call this month."));
}

function latencyOf(peer, metrics) {
  for (const key of ["latency_ms", "latencyMs", "rtt_ms"]) {
    if (typeof peer[key] === "number") return `${peer[key].toFixed(1)} ms`;
  }
  if (typeof peer.latency === "number") return `${(peer.latency * 1000).toFixed(1)} ms`;
  const latency = logRoundTrip(metrics);
  if (peer.self && latency && latency.last_seconds !== null && latency.last_seconds !== undefined) {
    return `${(latency.last_seconds * 1000).toFixed(1)} ms (log)`;
  }
  return "—";
}

function logRoundTrip(metrics) {
  const latency = metrics && metrics.network_latency;
  return latency ? latency.log_round_trip || latency : null;
}

export function renderPeers(peers, metrics, nodeId) {
  const latency = logRoundTrip(metrics);
  const shown = peers.map((p) => ({ ...p, self: p.id === nodeId }));
  replace("peers", el("h2", {}, "Peers"),
    el("div", { class: "cards" },
      card("Peers", String(peers.length), `${peers.filter((p) => p.status === "online").length} online`),
      card("Latency to the log", latency && latency.mean_seconds != null
        ? `${(latency.mean_seconds * 1000).toFixed(1)} ms` : "—",
        latency ? `${latency.samples} samples` : null)),
    table([
      // The id alone is the unbreakable box; "this node" may go to the next line.
      { label: "Node", cell: (p) => [el("span", { class: "mono id" }, p.id),
        p.self ? el("span", { class: "muted" }, " (this node)") : null] },
      { label: "Address", cell: (p) => p.address || "—" },
      { label: "Status", cell: (p) => badge(p.status) },
      { label: "Latency", class: "num", cell: (p) => latencyOf(p, metrics) },
      { label: "Last seen", cell: (p) => when(p.lastSeen) },
    ], shown, "No peer heard yet."));
}

// This node's webhook subscriptions (a dead one's URL failed for webhooks.max_age), then the
// dead letters, which node admins redrive.
export function renderWebhooks(deliveries, subscriptions, admin, onRedrive) {
  const dead = subscriptions.filter((s) => s.status === "dead").length;
  const hooks = el("div", { id: "webhook-subscriptions" },
    el("h2", {}, "Webhook subscriptions"),
    dead ? el("p", { class: "warn" }, `${dead} dead: the URL failed for webhooks.max_age; `
      + "no event goes to it until the subscription is removed and made again.") : null,
    table([
      { label: "Subscription", cell: (s) => el("span", { class: "mono id",
        dataset: { subscription: s.subscription_id } }, s.subscription_id) },
      { label: "Status", cell: (s) => badge(s.status) },
      { label: "URL", cell: (s) => el("span", { class: "mono id" }, s.callback_webhook) },
      { label: "Events", class: "text", cell: (s) => s.event_types.join(", ") },
      { label: "Created", cell: (s) => when(s.created_at) },
    ], subscriptions, "No webhook subscription on this node."));
  const action = admin && deliveries.length
    ? el("button", { type: "button", onclick: () => onRedrive(null) }, "Redrive all") : null;
  const letters = el("div", { id: "dead-letters" },
    el("div", { class: "section-head" }, el("h2", {}, "Webhook dead letters"), action),
    table([
      { label: "Id", class: "num", cell: (d) => String(d.id) },
      { label: "Subscription", cell: (d) => el("span", { class: "mono id" }, d.subscription_id) },
      { label: "URL", cell: (d) => el("span", { class: "mono id" }, d.url || "—") },
      { label: "Status", cell: (d) => badge(d.status) },
      { label: "Attempts", class: "num", cell: (d) => String(d.attempts) },
      { label: "Last error", class: "text", cell: (d) => d.last_error || "—" },
      { label: "Created", cell: (d) => when(d.created_at) },
      { label: "", cell: (d) => admin ? el("button", { type: "button", class: "small",
        onclick: () => onRedrive([d.id]) }, "Redrive") : "" },
    ], deliveries, "No dead letter."));
  replace("webhooks", hooks, letters);
}

export function renderSearch(address, result) {
  const content = result.content || {};
  const parts = [el("h2", {}, "Search"), el("p", { class: "mono" }, address)];
  if (result.matches) {
    parts.push(table([
      { label: "Agent", cell: (a) => agentLink(a.id) },
      { label: "Role", cell: (a) => a.role },
      { label: "Project", cell: (a) => a.project || "—" },
      { label: "Status", cell: (a) => badge(a.status) },
      { label: "Score", class: "num", cell: (a) => String(a.score) },
    ], result.matches, "No agent matches."));
  } else {
    parts.push(el("pre", { class: "json" }, JSON.stringify(content, null, 2)));
  }
  replace("search-result", parts);
}

export function eventLine(type, payload) {
  const data = (payload && payload.data) || {};
  const agent = data.agent && typeof data.agent === "object" ? data.agent.id : data.agent_id;
  const what = [data.action, data.topic || data.thread_id, data.status]
    .filter((part) => typeof part === "string" && part).join(" · ") || data.reason || "";
  return el("li", {}, el("span", { class: "event-type" }, type), " ",
    typeof agent === "string" && agent ? [el("span", { class: "mono id" }, agent), " "] : null,
    String(what), " ", when(payload && payload.timestamp));
}

export { text };
