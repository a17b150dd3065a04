// The Reservations tab: who holds which paths of which project, until when, with which
// fencing token (refusals of enforced checks arrive as reservation_refused live events).
import { badge, el, replace, table, when } from "./dom.js";
import { agentLink } from "./agent.js";

export function renderReservations(reservations) {
  replace("reservations", el("h2", {}, "Path reservations"), table([
    { label: "Paths", class: "text", cell: (r) => el("span", { class: "stack" },
      r.paths.map((p) => el("span", { class: "mono", dataset: { path: p } }, p))) },
    { label: "Agent", cell: (r) => agentLink(r.agent_id, { holder: r.agent_id }) },
    { label: "Project", cell: (r) => r.project || "—" },
    { label: "Mode", cell: (r) => badge(r.mode) },
    { label: "Reason", class: "text", cell: (r) => r.reason || "—" },
    { label: "Expires", cell: (r) => when(r.expires_at) },
    // The fencing token: a later grant of a path always carries a larger one.
    { label: "Token", cell: (r) => el("span", { class: "mono", dataset: { token: r.fencing_token } },
      String(r.fencing_token ?? "—")) },
    { label: "Id", cell: (r) => el("span", { class: "mono id" }, r.id) },
  ], reservations, "No agent of this token's projects holds a path."));
}
