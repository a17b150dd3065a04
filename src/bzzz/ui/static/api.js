// The node's /api/v1, with the signed-in token in the Authorization header (never in a URL:
// the node refuses credentials in the query string).

const KEY = "bzzz.token";

export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error) || `HTTP ${status}`);
    this.status = status;
    this.code = body && body.code;
  }
}

export const auth = {
  get token() { return sessionStorage.getItem(KEY); },
  set token(value) {
    if (value) sessionStorage.setItem(KEY, value);
    else sessionStorage.removeItem(KEY);
  },
  headers() {
    const token = this.token;
    return token ? { Authorization: `Bearer ${token}` } : {};
  },
};

// Query parameters a GET carries whichever view asks (the project filter, filter.js).
export const scope = { extra: () => ({}) };

export async function api(path, { method = "GET", body, query } = {}) {
  const url = new URL(path, location.origin);
  const extra = method === "GET" ? scope.extra(url.pathname) : {};
  for (const [key, value] of Object.entries({ ...extra, ...(query || {}) })) {
    if (value !== undefined && value !== null) url.searchParams.set(key, String(value));
  }
  const headers = { Accept: "application/json", ...auth.headers() };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const answer = await fetch(url, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store", credentials: "omit",
  });
  const data = await answer.json().catch(() => null);
  if (!answer.ok) throw new ApiError(answer.status, data);
  return data;
}

// GET /api/v1/events read with fetch (EventSource cannot send the Authorization header),
// resumed with Last-Event-ID after a drop.
export class EventStream {
  constructor(onEvent, onState) {
    this.onEvent = onEvent;
    this.onState = onState;
    this.lastId = null;
    this.controller = null;
    this.stopped = false;
    this.retry = 500;
  }

  start() {
    this.stopped = false;
    this.loop();
  }

  stop() {
    this.stopped = true;
    if (this.controller) this.controller.abort();
  }

  async loop() {
    while (!this.stopped) {
      try {
        await this.once();
      } catch (error) {
        if (this.stopped) return;
        if (error instanceof ApiError && error.status === 401) {
          this.onState("unauthorized");
          return;
        }
        if (error instanceof ApiError && error.status === 400) this.lastId = null;
      }
      this.onState("offline");
      if (this.stopped) return;
      await new Promise((resolve) => setTimeout(resolve, this.retry));
      this.retry = Math.min(this.retry * 2, 15000);
    }
  }

  async once() {
    this.controller = new AbortController();
    const headers = { Accept: "text/event-stream", ...auth.headers() };
    if (this.lastId) headers["Last-Event-ID"] = this.lastId;
    const answer = await fetch("/api/v1/events", {
      headers, signal: this.controller.signal, cache: "no-store", credentials: "omit",
    });
    if (!answer.ok) throw new ApiError(answer.status, await answer.json().catch(() => null));
    this.retry = 500;
    this.onState("live");
    const reader = answer.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value.replace(/\r\n/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        this.dispatch(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
      }
    }
  }

  dispatch(block) {
    let id = null, type = "message", data = "";
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "id") id = value;
      else if (field === "event") type = value;
      else if (field === "data") data += (data ? "\n" : "") + value;
    }
    if (id) this.lastId = id;
    if (!data) return;
    let payload = null;
    try { payload = JSON.parse(data); } catch { return; }
    this.onEvent(type, payload);
  }
}
