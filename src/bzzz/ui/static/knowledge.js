// The Knowledge tab: a project's facts (search), an entity's facts as a small graph (plain SVG:
// nodes are entities, edges relations), and a fact's history (the versions it superseded, with
// valid from/until and sources). Every value goes in as text, never as markup.
import { api } from "./api.js";
import { badge, el, replace, table, when } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const GRAPH_NODES = 24;  // entities drawn at most (the nearest first)
const state = { project: "", about: "", q: "", report: null, projects: [] };

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = String(text);
  return node;
}

function source(fact) {
  const s = fact.source || {};
  const parts = [];
  if (s.thread) parts.push(`thread ${s.thread}`);
  if (s.message) parts.push(`message ${s.message}`);
  if ((s.agents || []).length) parts.push(`agreed by ${s.agents.join(", ")}`);
  else if (fact.author) parts.push(`stated by ${fact.author}`);
  return parts.join(" · ") || "—";
}

function entityButton(name) {
  return el("button", { type: "button", class: "link", dataset: { entity: name },
    onclick: () => search({ about: name, q: "" }) }, name);
}

// The facts a search answered, and the graph of the entity asked about.
export function renderKnowledge(found) {
  const facts = found.facts || [];
  const rows = table([
    { label: "Subject", cell: (f) => entityButton(f.subject) },
    { label: "Relation", class: "text", cell: (f) => f.relation },
    { label: "Object", cell: (f) => entityButton(f.object) },
    { label: "Statement", class: "text", cell: (f) => f.statement || "—" },
    { label: "Status", cell: (f) => (f.status === "proposed"
      ? el("span", { class: "stack" }, badge(f.status), el("button", { type: "button",
        class: "small ghost", dataset: { agree: f.id }, onclick: () => agree(f.id) }, "Agree"))
      : badge(f.status)) },
    { label: "Valid from", cell: (f) => when(f.valid_from) },
    { label: "Source", class: "text", cell: (f) => source(f) },
    { label: "Id", cell: (f) => el("button", { type: "button", class: "link mono id",
      dataset: { fact: f.id }, onclick: () => showHistory(f.id) }, f.id) },
  ], facts, state.project ? "No fact of this project matches." : "Name a project to read its facts.");
  const related = [...facts, ...(found.neighbourhood || []).filter((f) => f && f.subject)];
  replace("knowledge-result",
    state.about ? el("h3", {}, `Facts about ${state.about}`) : null,
    state.about ? graph(state.about, related) : null,
    rows);
}

// An entity's facts as a graph: the entity in the middle, its neighbours around it.
export function graph(center, facts) {
  const names = [center];
  for (const f of facts) {
    for (const name of [f.subject, f.object]) {
      if (!names.includes(name) && names.length < GRAPH_NODES) names.push(name);
    }
  }
  const width = 640, height = 360, radius = 140;
  const at = new Map(names.map((name, i) => {
    if (i === 0) return [name, { x: width / 2, y: height / 2 }];
    const angle = (2 * Math.PI * (i - 1)) / Math.max(names.length - 1, 1) - Math.PI / 2;
    return [name, { x: width / 2 + radius * 1.6 * Math.cos(angle), y: height / 2 + radius * Math.sin(angle) }];
  }));
  const picture = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "knowledge-graph",
    role: "img", "aria-label": `facts about ${center}` });
  picture.append(svg("title", {}, `Facts about ${center}`));
  for (const f of facts) {
    const a = at.get(f.subject), b = at.get(f.object);
    if (!a || !b) continue;
    const edge = svg("g", { class: `edge ${f.status === "proposed" ? "proposed" : ""}`, "data-fact": f.id });
    edge.append(svg("line", { x1: a.x, y1: a.y, x2: b.x, y2: b.y }));
    edge.append(svg("text", { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 - 4, "text-anchor": "middle" },
      f.relation));
    picture.append(edge);
  }
  for (const name of names) {
    const p = at.get(name);
    const node = svg("g", { class: `node ${name === center ? "center" : ""}`, "data-entity": name,
      transform: `translate(${p.x},${p.y})` });
    node.append(svg("circle", { r: name === center ? 10 : 7 }));
    node.append(svg("text", { y: -13, "text-anchor": "middle" }, name));
    node.addEventListener("click", () => search({ about: name, q: "" }));
    picture.append(node);
  }
  return el("div", { class: "graph-wrap" }, picture);
}

// A fact and its versions: what it superseded and what superseded it.
export function renderHistory(shown) {
  const fact = shown.fact || {};
  // The versions it superseded (oldest first), the fact, and those that superseded it.
  const versions = [...(shown.superseded || []), fact, ...(shown.superseded_by || [])];
  replace("knowledge-history",
    el("h3", {}, `History of ${fact.subject} ${fact.relation}`),
    table([
      { label: "Object", class: "text", cell: (f) => f.object },
      { label: "Statement", class: "text", cell: (f) => f.statement || "—" },
      { label: "Status", cell: (f) => (f.id === fact.id ? badge(f.status) : badge(f.valid_until ? "superseded" : f.status)) },
      { label: "Valid from", cell: (f) => when(f.valid_from) },
      { label: "Valid until", cell: (f) => (f.valid_until ? when(f.valid_until) : "now") },
      { label: "Source", class: "text", cell: (f) => source(f) },
      { label: "Id", cell: (f) => el("span", { class: "mono id", dataset: { version: f.id } }, f.id) },
    ], versions, "No history."));
}

async function showHistory(factId) {
  try {
    renderHistory(await api(`/api/v1/knowledge/${encodeURIComponent(factId)}`,
      { query: { project: state.project } }));
  } catch (error) { state.report(error); }
}

// A proposed fact agreed by whoever signed in (not its author): it becomes agreed.
async function agree(factId) {
  try {
    await api(`/api/v1/knowledge/${encodeURIComponent(factId)}/agree`, { method: "POST", body: {} });
    await loadKnowledge();
  } catch (error) { state.report(error); }
}

async function search(change = {}) {
  Object.assign(state, change);
  const form = document.getElementById("knowledge-form");
  if (form) {
    form.elements.about.value = state.about;
    form.elements.q.value = state.q;
  }
  try { await loadKnowledge(); } catch (error) { state.report(error); }
}

// Read the chosen project's facts again (the tab's loader; events call it too).
export async function loadKnowledge() {
  if (!state.project) {
    renderKnowledge({ facts: [] });
    return;
  }
  const query = { project: state.project, limit: 50 };
  if (state.about) query.about = state.about;
  if (state.q) query.q = state.q;
  renderKnowledge(await api("/api/v1/knowledge", { query }));
}

// The tab's search form, once: the project defaults to the token's first project.
export function initKnowledge(who, report) {
  state.report = report;
  const projects = (who.principal.projects || []).filter((p) => p !== "*");
  if (!state.project) state.project = projects[0] || "";
  const form = el("form", { id: "knowledge-form", class: "knowledge-form", role: "search",
    onsubmit: (event) => {
      event.preventDefault();
      const data = new FormData(event.target);
      search({ project: String(data.get("project") || "").trim(),
        about: String(data.get("about") || "").trim(), q: String(data.get("q") || "").trim() });
    } },
  el("label", { for: "knowledge-project" }, "Project"),
  el("input", { id: "knowledge-project", name: "project", value: state.project, placeholder: "project",
    autocomplete: "off", spellcheck: "false" }),
  el("label", { for: "knowledge-about" }, "About"),
  el("input", { id: "knowledge-about", name: "about", placeholder: "an entity", autocomplete: "off" }),
  el("label", { for: "knowledge-q" }, "Words"),
  el("input", { id: "knowledge-q", name: "q", placeholder: "words", autocomplete: "off" }),
  el("button", { type: "submit" }, "Search"));
  replace("knowledge", el("h2", {}, "Knowledge"), form,
    el("div", { id: "knowledge-result" }), el("div", { id: "knowledge-history" }));
}
