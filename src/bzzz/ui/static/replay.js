// The thread view's time slider: its stops are the thread's envelopes on the signed log (their
// times), the right end is now. Moving it reloads the thread as it stood at the chosen stop
// (GET /api/v1/threads/{id}?as_of=<sequence>); back at the right end the view is live again.
import { api } from "./api.js";
import { el, when } from "./dom.js";

const chosen = new Map();  // thread id -> the log sequence shown (none: now)

export function asOf(threadId) { return chosen.get(threadId); }

// The thread now, or as it stood at the chosen stop. The past does not change, and rebuilding
// it costs the node a replay: the view's periodic refresh reuses the last answer for it.
let then = null;
export async function threadAt(threadId, maxHistory) {
  const past = asOf(threadId);
  if (past !== undefined && then && then.threadId === threadId && then.seq === past) {
    return then.got;
  }
  const got = await api(`/api/v1/threads/${encodeURIComponent(threadId)}`,
    { query: { max_history: maxHistory, as_of: past } });
  then = past === undefined ? null : { threadId, seq: past, got };
  return got;
}

// ``entries``: the thread's timeline (timeline.js), whose entries are the stops; without it
// the stops are read from the envelopes route.
export async function timeSlider(threadId, onMove, entries) {
  let listed = entries ? { envelopes: entries } : null;
  if (!listed) {
    try {
      listed = await api(`/api/v1/threads/${encodeURIComponent(threadId)}/envelopes`);
    } catch {
      return null;  // the thread still shows, without its history
    }
  }
  const seen = new Set();
  const stops = listed.envelopes.filter((e) => e.verified && !seen.has(e.seq) && seen.add(e.seq));
  const unverified = listed.envelopes.filter((e) => !e.verified).length;
  if (!stops.length) return null;
  const last = stops.length - 1;
  const shown = asOf(threadId);
  let index = shown === undefined ? last : stops.findIndex((s) => s.seq >= shown);
  if (index < 0) index = last;
  const label = el("span", { class: "meta", id: "time-label" });
  const describe = (i) => {
    const stop = stops[i];
    label.replaceChildren(i === last ? "now · " : "as of ", when(stop.time),
      ` · ${stop.kind || stop.type}${stop.stand_in ? " (stand-in)" : ""} · #${stop.seq}`);
  };
  const slider = el("input", { type: "range", id: "time-slider", min: 0, max: last, step: 1,
    value: index, "aria-label": "the thread as it stood at" });
  slider.addEventListener("input", () => describe(Number(slider.value)));
  slider.addEventListener("change", () => {
    const i = Number(slider.value);
    if (i === last) chosen.delete(threadId);
    else chosen.set(threadId, stops[i].seq);
    onMove();
  });
  describe(index);
  return el("div", { class: "time-slider", dataset: { stops: String(stops.length) } },
    el("label", { for: "time-slider" }, "History"), slider, label,
    unverified ? el("span", { class: "meta warn" },
      ` · ${unverified} envelope(s) on the log do not verify`) : null);
}
