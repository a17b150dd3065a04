// The human console: escalations addressed to humans, a thread with its history, and what a
// person does in it (post, decide, agree or disagree, resolve) as the agent human-<name>.
import { agentLink } from "./agent.js";
import { api } from "./api.js";
import { readTimeline, transcript } from "./timeline.js";
import { badge, el, replace, table, text, when } from "./dom.js";
import { asOf, threadAt, timeSlider } from "./replay.js";
import { pagingCell } from "./paging.js";

const asksHuman = (e) => (e.actions || []).some((a) => a && a.type === "notify_human");

export function renderConsole(escalations, threads, onOpen, canAnswer = false) {
  const topics = new Map(threads.map((t) => [t.id, t.topic]));
  const mine = escalations.filter(asksHuman);
  replace("console", el("h2", {}, "Escalations addressed to humans"), table([
    { label: "Thread", cell: (e) => el("button", { type: "button", class: "link",
      dataset: { escalation: e.id }, onclick: () => onOpen(e.threadId) },
      topics.get(e.threadId) || e.threadId) },
    { label: "Rule", cell: (e) => e.rule },
    { label: "Reason", cell: (e) => e.reason },
    { label: "Priority", class: "num", cell: (e) => String(e.priority) },
    { label: "Status", cell: (e) => badge(e.resolved ? "resolved" : "open") },
    { label: "Raised", cell: (e) => when(e.triggeredAt) },
    { label: "Paging", cell: (e) => pagingCell(e, canAnswer) },
  ], mine, "No escalation is waiting for a person."));
}

function messageItem(message, person, onStance) {
  const stances = (message.reactions || []).map((r) =>
    el("span", { class: `stance st-${r.stance === "agree" ? "agree" : "disagree"}` },
      `${r.agent_id} ${r.stance}s`));
  const canStance = person && message.sender !== person && message.messageType === "decision";
  return el("li", { class: `message${message.sender.startsWith("human-") ? " human" : ""}`,
    dataset: { message: message.id } },
    el("div", { class: "message-head" },
      el("strong", {}, agentLink(message.sender)), " ", el("span", { class: "type" }, message.messageType),
      message.stance ? el("span", { class: "stance" }, ` (${message.stance})`) : null,
      " ", when(message.timestamp)),
    el("div", { class: "message-text" }, text(message.content)),
    stances.length ? el("div", { class: "stances" }, stances) : null,
    canStance ? el("div", { class: "actions" },
      el("button", { type: "button", class: "small", onclick: () => onStance(message.id, "agree") }, "Agree"),
      el("button", { type: "button", class: "small ghost",
        onclick: () => onStance(message.id, "disagree") }, "Disagree")) : null);
}

export async function renderThread(threadId, who, escalations, report) {
  const past = asOf(threadId);
  const thread = (await threadAt(threadId, 200)).content.thread;
  // What happened to it, in log order (read again when the thread changed; in the past,
  // the thread as it stood then is not what it is now, so the last read is kept).
  const entries = await readTimeline(threadId, past === undefined ? thread : null);
  // In the past the view only shows: nobody acts on a thread as it was.
  const person = who.human && past === undefined ? who.human.agent_id : null;
  const open = escalations.filter((e) => e.threadId === threadId && !e.resolved && asksHuman(e));
  const rerender = () => renderThread(threadId, who, escalations, report).catch(report);
  const post = async (body) => {
    await api(`/api/v1/threads/${encodeURIComponent(threadId)}/messages`, { method: "POST", body });
    await rerender();
  };
  const onStance = (messageId, stance) =>
    post({ message_type: "text", text: stance === "agree" ? "Agreed." : "I disagree.",
      reply_to: messageId, stance }).catch(report);

  const parts = [
    el("div", { class: "section-head" }, el("h2", {}, thread.topic), badge(thread.status)),
    el("p", { class: "meta" }, `Participants: ${thread.participants.join(", ")}`,
      thread.consensus ? ` · consensus: ${(thread.consensus.decisions || []).join("; ")}` : ""),
    await timeSlider(threadId, rerender, entries),
    el("ol", { class: "messages", id: "messages" },
      transcript(thread.messages, entries, past, (m) => messageItem(m, person, onStance))),
  ];
  if (person && who.principal.scope !== "read" && thread.status !== "completed") {
    const form = el("form", { class: "compose", id: "compose" },
      el("label", { for: "compose-text" }, `Reply as ${person}`),
      el("textarea", { id: "compose-text", name: "text", rows: 3, required: true, maxlength: 4000 }),
      el("div", { class: "row" },
        el("select", { name: "message_type", id: "compose-type" },
          el("option", { value: "text" }, "Message"),
          el("option", { value: "decision" }, "Decision (others agree or disagree)"),
          el("option", { value: "question" }, "Question")),
        el("button", { type: "submit" }, "Post")));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const data = new FormData(form);
      post({ message_type: data.get("message_type"), text: data.get("text") })
        .then(() => { const box = document.getElementById("compose-text"); if (box) box.value = ""; })
        .catch(report);
    });
    parts.push(form);
    for (const escalation of open) {
      const resolve = el("form", { class: "resolve", dataset: { resolve: escalation.id } },
        el("label", { for: `reason-${escalation.id}` }, `Resolve “${escalation.reason}”`),
        el("div", { class: "row" },
          el("input", { id: `reason-${escalation.id}`, name: "reason", required: true,
            maxlength: 2000, placeholder: "what was decided" }),
          el("button", { type: "submit" }, "Resolve escalation")));
      resolve.addEventListener("submit", (event) => {
        event.preventDefault();
        const reason = new FormData(resolve).get("reason");
        api(`/api/v1/escalations/${encodeURIComponent(escalation.id)}/resolve`,
          { method: "POST", body: { reason, as_human: true } })
          .then(() => { escalation.resolved = true; return rerender(); })
          .catch(report);
      });
      parts.push(resolve);
    }
  }
  const view = document.getElementById("thread-view");
  const kept = keepInputs(view);
  replace(view, el("article", { class: "thread", dataset: { threadView: threadId } }, parts));
  kept();
}

// What the person is typing survives a refresh of the thread (new messages, a new status).
function keepInputs(view) {
  const values = new Map();
  for (const input of view.querySelectorAll("textarea[id], input[id], select[id]")) {
    values.set(input.id, input.value);
  }
  const focused = document.activeElement && view.contains(document.activeElement)
    ? document.activeElement.id : null;
  return () => {
    for (const [id, value] of values) {
      const input = document.getElementById(id);
      if (input) input.value = value;
    }
    if (focused && document.getElementById(focused)) document.getElementById(focused).focus();
  };
}
