// Paging of an escalation: who was paged (each rota step, then the project's admins), when, how
// the page went, and who answered; an "Acknowledge" button stops the paging from the console.
import { api } from "./api.js";
import { badge, el, replace, when } from "./dom.js";

const CHANNELS = { webhook: "webhook", console: "console", admins: "admins" };

function pageItem(page) {
  return el("li", { class: "page", dataset: { step: String(page.step), pageStatus: page.status } },
    el("strong", {}, page.name), ` (${CHANNELS[page.channel] || page.channel}) `,
    when(page.paged_at), " ", badge(page.status),
    page.attempts > 1 ? ` ${page.attempts} attempts` : "",
    page.last_error && page.status !== "delivered" ? el("span", { class: "hint" }, ` ${page.last_error}`) : null);
}

function answered(ack) {
  return el("p", { class: "ack", dataset: { ackBy: ack.by } },
    "Acknowledged by ", el("strong", {}, ack.by), ` (${ack.via}) `, when(ack.at));
}

// The cell of one escalation: its pages, and its acknowledgement or the button that gives it.
export function pagingCell(escalation, canAnswer) {
  const paging = escalation.paging || { pages: [], ack: null };
  const cell = el("div", { class: "paging", dataset: { paging: escalation.id } });
  const parts = [];
  if (paging.pages.length) parts.push(el("ol", { class: "pages" }, paging.pages.map(pageItem)));
  if (paging.ack) parts.push(answered(paging.ack));
  if (paging.resolved_by) {
    parts.push(el("p", { class: "ack", dataset: { resolvedBy: paging.resolved_by } },
      "Resolved by ", el("strong", {}, paging.resolved_by), " ", when(escalation.resolvedAt)));
  }
  if (!paging.ack && !escalation.resolved && canAnswer && paging.pages.length) {
    const button = el("button", { type: "button", class: "small", dataset: { ack: escalation.id } },
      "Acknowledge");
    button.addEventListener("click", () => {
      button.disabled = true;
      api(`/api/v1/escalations/${encodeURIComponent(escalation.id)}/ack`,
        { method: "POST", body: { via: "console" } })
        .then((done) => {
          paging.ack = done.ack;
          replace(cell, ...pagingCell(escalation, canAnswer).childNodes);
        })
        .catch((error) => {
          button.disabled = false;
          replace(cell, ...pagingCell(escalation, canAnswer).childNodes,
            el("p", { class: "error", role: "alert" }, error.message));
        });
    });
    parts.push(button);
  }
  if (!parts.length) parts.push("—");
  replace(cell, ...parts);
  return cell;
}
