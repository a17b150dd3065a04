// A thread as it happened: its messages interleaved, in log order, with what happened to it
// (created, joined, left, paused, resumed, escalated and resolved — by whom and why —, what the
// escalation's actions did, decisions, stances, consensus). The entries come from
// GET /api/v1/threads/{id}/timeline (the thread's readers only); the history slider stops at them.
import { api } from "./api.js";
import { el, when } from "./dom.js";

// The last timeline read of each thread, and what the thread looked like then: reading it
// reads the node's log, so the view's refresh every 2 s reads it again only when the thread
// changed (a message, a member, a status, an escalation or one of its actions).
const read = new Map();

function looks(thread) {
  return JSON.stringify([thread.status, thread.message_count, thread.last_activity,
    thread.participants, thread.former_participants, thread.escalation_history,
    thread.summary, thread.consensus && thread.consensus.reached_at]);
}

// The thread's timeline, or null when the node cannot give it (the messages still show).
export async function readTimeline(threadId, thread) {
  const seen = thread ? looks(thread) : null;
  const last = read.get(threadId);
  if (last && (seen === null || last.seen === seen)) return last.entries;
  try {
    const got = await api(`/api/v1/threads/${encodeURIComponent(threadId)}/timeline`);
    read.set(threadId, { seen, entries: got.entries });
    if (read.size > 20) read.delete(read.keys().next().value);
    return got.entries;
  } catch {
    return last ? last.entries : null;
  }
}

const MESSAGE_KINDS = new Set(["message", "decision", "stance"]);
const SKIPPED = new Set(["refused", "other", "slurp"]);
const list = (names) => (names && names.length ? names.join(", ") : "");
const others = (entry) => (entry.agents || []).filter((a) => a !== entry.by);
const because = (reason) => (reason ? [" — ", el("q", {}, reason)] : []);

// What one entry says, as text pieces (every value goes in as text).
function said(entry) {
  const by = entry.by ? el("strong", {}, entry.by) : "someone";
  switch (entry.kind) {
    case "created":
      return [by, " opened the thread", others(entry).length ? ` with ${list(others(entry))}` : "",
        entry.parent_thread_id ? ` (a decision of ${entry.parent_thread_id})` : ""];
    case "joined":
      return [el("strong", {}, entry.agent), " joined",
        entry.invited_by ? ` (invited by ${entry.invited_by})` : ""];
    case "left":
      return [el("strong", {}, entry.agent), " left"];
    case "paused": return [by, " paused the thread", ...because(entry.reason)];
    case "resumed": return [by, " resumed the thread", ...because(entry.reason)];
    case "resolved":
      return [by, " resolved ", escalations(entry.escalations), ...because(entry.reason)];
    case "closed":
      return [entry.idle ? "The thread closed after being idle" : [by, " closed the thread"],
        entry.escalations && entry.escalations.length
          ? [" and ended ", escalations(entry.escalations)] : "", ...because(entry.reason)];
    case "escalated":
      return [el("strong", {}, "Escalated"), ` by rule ${entry.rule} · priority `,
        el("span", { class: "priority", dataset: { priority: String(entry.priority) } },
          String(entry.priority)),
        entry.actions && entry.actions.length ? ` · ${list(entry.actions)}` : "",
        ...because(entry.reason)];
    case "escalation_action":
      return [`${entry.action || "action"}: ${entry.status || "?"}`,
        entry.agent ? [" · invited ", el("strong", {}, entry.agent)] : "",
        entry.escalated_to ? ` · turned to ${entry.escalated_to}` : "",
        entry.delivered === false ? " · listed for people (no channel)" : "",
        entry.error ? [" — ", el("span", { class: "warn" }, entry.error)] : ""];
    case "consensus":
      return [el("strong", {}, "Consensus"), " reached", entry.agents && entry.agents.length
        ? ` (${list(entry.agents)} agree)` : "",
        entry.escalations && entry.escalations.length
          ? [" · ended ", escalations(entry.escalations)] : ""];
    case "summarized": return [by, " summarized the thread"];
    case "unreadable": return [el("span", { class: "warn" }, "an entry that does not verify"),
      entry.problem ? ` (${entry.problem})` : ""];
    default: return [entry.kind];
  }
}

function escalations(ids) {
  if (!ids || !ids.length) return "the escalation";
  return [ids.length > 1 ? "escalations " : "escalation ",
    ids.map((id, i) => [i ? ", " : "", el("span", { class: "mono id" }, id)])];
}

function actionItem(entry) {
  return el("li", { class: `action k-${entry.kind}`,
    dataset: { kind: entry.kind, seq: String(entry.seq) } },
    el("span", { class: "action-text" }, said(entry).flat(Infinity)), " ", when(entry.time));
}

// The transcript's items in order: each timeline entry (up to the sequence shown) as an action
// line or as its message; a message the timeline does not name (none read, or past its page)
// goes before the first entry stamped after it.
export function transcript(messages, entries, shownSeq, messageItem) {
  const byId = new Map(messages.map((m) => [m.id, m]));
  const placed = new Set();
  const items = [];
  for (const entry of entries || []) {
    if (shownSeq !== undefined && entry.seq > shownSeq) break;
    if (SKIPPED.has(entry.kind)) continue;
    if (MESSAGE_KINDS.has(entry.kind)) {
      const message = byId.get(entry.message_id);
      if (!message || placed.has(message.id)) continue;
      placed.add(message.id);
      const item = messageItem(message);
      item.dataset.kind = entry.kind;
      item.dataset.seq = String(entry.seq);
      items.push({ time: entry.time, node: item });
    } else {
      items.push({ time: entry.time, node: actionItem(entry) });
    }
  }
  for (const message of messages) {
    if (placed.has(message.id)) continue;
    const posted = Date.parse(message.timestamp);
    const at = items.findIndex((i) => Date.parse(i.time) > posted);
    const node = messageItem(message);
    node.dataset.kind = "message";
    items.splice(at < 0 ? items.length : at, 0, { time: message.timestamp, node });
  }
  return items.map((i) => i.node);
}
