// The dashboard: signs in, loads each section from /api/v1 and keeps it current from the
// event stream (no reload). It shows what the token's grants let the routes answer.
import { api, ApiError, auth, EventStream } from "./api.js";
import { el, replace, tick } from "./dom.js";
import { renderConsole, renderThread } from "./console.js";
import { initKnowledge, loadKnowledge } from "./knowledge.js";
import { renderReservations } from "./reservations.js";
import { loadAgentPage } from "./agent.js";
import { mountFilter, readHash, remember, view } from "./filter.js";
import { loadMap } from "./map.js";
import {
  eventLine, renderAgents, renderCosts, renderPeers, renderSearch, renderTasks, renderThreads,
  renderWebhooks,
} from "./views.js";

const state = { who: null, stream: null, metrics: null, escalations: [], threads: [],
  openThread: null, timer: null, loading: false, pending: new Set(), periodic: null,
  open: false };
const $ = (id) => document.getElementById(id);

function report(error) {
  if (error instanceof ApiError && error.status === 401) {
    signOut("The token was refused; sign in again.");
    return;
  }
  const banner = $("error");
  banner.textContent = error instanceof Error ? error.message : String(error);
  banner.hidden = false;
}

function clearError() { $("error").hidden = true; }

const loaders = {
  async metrics() { state.metrics = await api("/api/v1/metrics"); },
  async agents() {
    const found = await api("/api/v1/agents", { query: { address: "bzzz://*", limit: 1000 } });
    renderAgents(found.matches, state.metrics);
  },
  async threads() {
    state.threads = (await api("/api/v1/overview/threads", { query: { limit: 200 } })).threads;
    renderThreads(state.threads, openThread);
  },
  async tasks() { renderTasks((await api("/api/v1/overview/tasks", { query: { limit: 200 } })).tasks); },
  async reservations() {
    renderReservations((await api("/api/v1/reservations")).reservations);
  },
  async knowledge() { await loadKnowledge(); },
  async costs() { renderCosts(await api("/api/v1/costs", { query: { days: 30 } })); },
  async peers() {
    const listed = await api("/api/v1/peers");
    renderPeers(listed.peers, state.metrics, state.nodeId);
  },
  async webhooks() {
    const listed = await api("/api/v1/webhooks", { query: { status: "dead" } });
    renderWebhooks(listed.deliveries, listed.subscriptions || [], state.who.admin, redrive);
  },
  async console() {
    state.escalations = (await api("/api/v1/escalations", { query: { limit: 200 } })).escalations;
    renderConsole(state.escalations, state.threads, openThread, mayAnswerPages(state.who.principal));
    await loaders.thread();
  },
  async thread() {
    if (state.openThread) await renderThread(state.openThread, state.who, state.escalations, report);
  },
  // The map and an agent's page are read while they are shown (filter.js, map.js, agent.js).
  async map() { if (!$("tab-map").hidden) await loadMap(report); },
  async agent() { if (view.agent && !$("tab-agent").hidden) await loadAgentPage(view.agent, openThread); },
};
const ORDER = ["metrics", "agents", "threads", "tasks", "reservations", "knowledge", "costs", "peers", "webhooks",
  "console", "thread", "map", "agent"];

// Which sections an event changes.
const AFFECTS = {
  agent_announcement: ["metrics", "agents", "reservations"],
  network_status: ["agents", "peers"],
  task_assignment: ["agents", "tasks"],
  thread_created: ["threads", "console"],
  thread_escalated: ["threads", "console"],
  thread_status: ["threads", "console", "agents"],
  thread_consensus: ["threads", "console"],
  human_notification: ["console"],
  slurp_context: ["threads"],
  cost_warning: ["costs"],
  limit_exceeded: ["costs"],
  reservation_conflict: ["reservations"],
  reservation_expiring: ["reservations"],
  reservation_refused: ["reservations"],
};

// Sections to reload are gathered for 80 ms, then loaded one batch at a time: two loads of a
// section never overlap, so an older answer is never drawn over a newer one.
function refresh(sections) {
  for (const section of sections) state.pending.add(section);
  if (state.timer || state.loading) return;
  state.timer = setTimeout(loadPending, 80);
}

async function loadPending() {
  state.timer = null;
  state.loading = true;
  try {
    while (state.pending.size) {
      const due = ORDER.filter((s) => state.pending.has(s));
      state.pending.clear();
      for (const section of due) {
        try { await loaders[section](); } catch (error) { report(error); }
      }
    }
  } finally {
    state.loading = false;
  }
}

function onEvent(type, payload) {
  if (type === "stream_open") return;
  const list = $("events");
  list.prepend(eventLine(type, payload));
  while (list.children.length > 40) list.lastElementChild.remove();
  refresh([...(AFFECTS[type] || ["agents", "threads"]), ...(type.startsWith("task") ? ["tasks"] : []),
    "map", "agent", ...(/fact|knowledge|consensus/.test(type) ? ["knowledge"] : [])]);
}

function onStreamState(stateName) {
  const live = $("live");
  live.textContent = stateName === "live" ? "live" : "reconnecting";
  live.className = `live ${stateName === "live" ? "on" : "off"}`;
  if (stateName === "live") refresh(ORDER);  // whatever changed while the stream was down
  if (stateName === "unauthorized") signOut("The token was refused; sign in again.");
}

async function redrive(ids) {
  try {
    await api("/api/v1/webhooks/redrive", { method: "POST", body: ids ? { delivery_ids: ids } : {} });
    refresh(["webhooks"]);
  } catch (error) { report(error); }
}

function showTab(name) {
  for (const button of document.querySelectorAll(".tabs button")) {
    button.classList.toggle("active", button.dataset.tab === name);
  }
  for (const section of document.querySelectorAll(".tab")) {
    section.hidden = section.id !== `tab-${name}`;
  }
  remember({ tab: name, agent: name === "agent" ? view.agent : null });
}

// A link or the back button moved the hash: show where it points (a new project: every view).
function followHash() {
  const changed = readHash();
  if (changed.includes("project")) {
    const select = $("project-filter");
    if (select) select.value = view.project || "";
    refresh(ORDER);
  }
  if (view.tab && $(`tab-${view.tab}`)) showTab(view.tab);
  if (view.tab === "agent" || view.tab === "map") refresh([view.tab]);
}

async function openThread(threadId) {
  state.openThread = threadId;
  showTab("console");
  try {
    await loaders.console();
    $("thread-view").scrollIntoView({ block: "start" });
  } catch (error) { report(error); }
}

async function search(event) {
  event.preventDefault();
  const address = $("search-address").value.trim();
  if (!address) return;
  clearError();
  try {
    // One agent, or a path (inbox, tasks, a thread): bzzz_get; a wildcard: bzzz_lookup.
    const rest = address.replace(/^bzzz:\/\//i, "");
    const authority = rest.split(/[/?]/)[0];
    const agent = authority.split("@")[0].split(":")[0];
    const concrete = (agent && agent !== "*") || rest.slice(authority.length).startsWith("/");
    const result = concrete
      ? await api("/api/v1/content", { query: { address } })
      : await api("/api/v1/agents", { query: { address, limit: 100 } });
    $("search-tab").hidden = false;
    renderSearch(address, result);
    showTab("search");
  } catch (error) { report(error); }
}

function showWho(who) {
  const p = who.principal;
  replace("whoami", el("strong", {}, p.name || p.id), ` · ${p.scope} · `,
    p.projects.join(", ") || "no project", who.human ? ` · ${who.human.agent_id}` : "");
  $("console-tab").textContent = who.human ? "Human console" : "Escalations";
  $("console-tab").hidden = false;
  $("sign-out").hidden = !auth.token;
}

// Without a token the page opens straight on the network where the node takes callers
// without a credential, and shows the sign-in card where it needs one.
async function open() {
  try {
    const access = await api("/ui/access.json");
    state.open = !access.credential_required;
  } catch (error) {
    signOut(`Cannot reach the node: ${error.message}`);
    return;
  }
  if (auth.token || state.open) start();
  else signOut("This node needs a token.");
}

async function start() {
  $("signin").hidden = true;
  try {
    state.who = await api("/api/v1/whoami");
    state.nodeId = (await api("/healthz")).node_id;
  } catch (error) {
    const refused = auth.token ? "The token was refused." : "This node needs a token.";
    signOut(error instanceof ApiError && error.status === 401
      ? refused : `Cannot reach the node: ${error.message}`);
    return;
  }
  showWho(state.who);
  initKnowledge(state.who, report);
  $("main").hidden = false;
  try { await mountFilter(report); } catch (error) { report(error); }
  showTab(view.tab && $(`tab-${view.tab}`) ? view.tab : state.who.human ? "console" : "agents");
  state.stream = new EventStream(onEvent, onStreamState);
  state.stream.start();
  refresh(ORDER);
  // Figures no event announces (spend, peers' heartbeats, dead letters): every 15 s.
  state.periodic = setInterval(() => refresh(["metrics", "costs", "peers", "webhooks", "reservations"]), 15000);
  // A thread's messages are not among the stream's event types: the open thread is re-read.
  state.threadPoll = setInterval(() => {
    if (state.openThread && !$("tab-console").hidden) refresh(["thread"]);
    // Nor are direct messages: the map and an agent's page, when shown, too.
    if (!$("tab-map").hidden || !$("tab-agent").hidden) refresh(["map", "agent"]);
  }, 2000);
}

function signOut(message) {
  auth.token = null;
  if (state.stream) state.stream.stop();
  if (state.periodic) clearInterval(state.periodic);
  if (state.threadPoll) clearInterval(state.threadPoll);
  state.openThread = null;
  state.stream = null;
  $("main").hidden = true;
  $("sign-out").hidden = true;
  replace("whoami");
  $("signin").hidden = false;
  // "Continue without a token" only where the node was seen to take callers without one.
  $("anonymous-choice").hidden = !state.open;
  $("signin-error").textContent = message || "";
}

function wire() {
  for (const button of document.querySelectorAll(".tabs button")) {
    // A tab shows what is there now: some changes (a webhook subscription made or dead) send
    // no event, and the periodic refresh may be 15 s away.
    button.addEventListener("click", () => {
      showTab(button.dataset.tab);
      if (button.dataset.tab in loaders) refresh([button.dataset.tab]);
    });
  }
  $("search").addEventListener("submit", search);
  $("signin-form").addEventListener("submit", (event) => {
    event.preventDefault();
    auth.token = $("token").value.trim();
    $("token").value = "";
    start();
  });
  $("anonymous").addEventListener("click", () => { auth.token = null; start(); });
  $("sign-out").addEventListener("click", () => signOut("Signed out."));
  readHash();
  window.addEventListener("hashchange", () => { if (state.who) followHash(); });
  open();
  // "12 s ago" stays true: every relative time on the page is read again each second.
  setInterval(() => tick(), 1000);
}

wire();

// Who the Acknowledge button is for: a person (the role "human") who may write, or an admin
// (the node refuses any other credential, an agent's above all).
function mayAnswerPages(principal) {
  const human = (principal.roles || []).includes("human");
  return principal.scope === "admin" || (human && principal.scope !== "read");
}
