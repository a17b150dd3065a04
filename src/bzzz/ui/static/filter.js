// Where the page is, kept in the location hash so that it can be linked and survives a
// reload: #tab=agents&project=alpha (&agent=<id> on an agent's page, &window=1h on the map).
// The project filter narrows every request that has a project (agents, threads, tasks,
// escalations, reservations, the map, an agent's page); costs, peers and webhooks are the
// node's own. A viewer picks among the projects its token grants (GET /api/v1/projects).
import { api, scope } from "./api.js";
import { el, replace } from "./dom.js";

export const view = { tab: null, project: null, agent: null, window: "1h" };
const KEYS = ["tab", "project", "agent", "window"];
export const WINDOWS = { "15m": "15 min", "1h": "1 h", "24h": "24 h" };

// The requests the filter narrows (a GET of one of these paths gets ?project=).
const NARROWED = [/^\/api\/v1\/agents$/, /^\/api\/v1\/agents\/[^/]+\/page$/,
  /^\/api\/v1\/overview\/(threads|tasks)$/, /^\/api\/v1\/escalations$/,
  /^\/api\/v1\/reservations$/, /^\/api\/v1\/map(\/edge)?$/];
scope.extra = (path) =>
  view.project && NARROWED.some((re) => re.test(path)) ? { project: view.project } : {};

/** Reads the hash into `view`; returns the names of the parts that changed. */
export function readHash() {
  const given = new URLSearchParams(location.hash.replace(/^#/, ""));
  const changed = [];
  for (const key of KEYS) {
    let value = given.get(key) || null;
    if (key === "window" && !(value in WINDOWS)) value = "1h";
    if (view[key] !== value) { view[key] = value; changed.push(key); }
  }
  return changed;
}

/** The hash of `view` with `changes` applied. */
export function hrefOf(changes = {}) {
  const next = { ...view, ...changes };
  const params = new URLSearchParams();
  for (const key of KEYS) {
    if (next[key] && !(key === "window" && next[key] === "1h")) params.set(key, next[key]);
    if (key === "agent" && next.tab !== "agent") params.delete("agent");
  }
  return `#${params}`;
}

/** Go to `changes` (a new history entry; the page follows on hashchange). */
export function navigate(changes) {
  const target = hrefOf(changes);
  if (target !== location.hash) location.hash = target;
}

/** Note `changes` in the hash without a new history entry or a hashchange. */
export function remember(changes) {
  Object.assign(view, changes);
  history.replaceState(null, "", hrefOf());
}

/** The project select, filled with the projects the token grants; a project in the hash
 * that it does not grant is dropped (the views would show nothing of it). */
export async function mountFilter(report) {
  const listed = await api("/api/v1/projects");
  const select = el("select", { id: "project-filter", "aria-label": "project filter" },
    el("option", { value: "" }, listed.every ? "All projects" : "All my projects"),
    listed.projects.map((p) => el("option", { value: p }, p)));
  if (view.project && !listed.projects.includes(view.project) && !listed.every) {
    report(new Error(`This token is not granted the project '${view.project}': showing all its projects.`));
    remember({ project: null });
  }
  if (view.project && !listed.projects.includes(view.project)) {
    select.append(el("option", { value: view.project }, view.project));
  }
  select.value = view.project || "";
  select.addEventListener("change", () => navigate({ project: select.value || null }));
  replace("project-filter-slot", el("label", { for: "project-filter", class: "filter-label" }, "Project"),
    select);
}
