// The console's one door to the native API: every request carries the tab's key in the
// Authorization header (never in a URL), and every failure becomes an ApiFailure whose message is
// the API's own error text.

const KEY_SLOT = "dragoman.apiKey";

/** The signed-in key of this tab (sessionStorage: gone when the tab closes), or null. */
export function storedKey() {
  return sessionStorage.getItem(KEY_SLOT);
}

/** Keep the key for this tab only. */
export function storeKey(key) {
  sessionStorage.setItem(KEY_SLOT, key);
}

/** Forget the key (sign out). */
export function forgetKey() {
  sessionStorage.removeItem(KEY_SLOT);
}

/** An answer of the API that was not a success: its HTTP status, error code and message. */
export class ApiFailure extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** A request whose answer came after the tab signed out (or that was made signed out): its answer is dropped,
 * so a slow list or translation of the last person at this screen is never drawn for the next. */
export class SignedOut extends Error {
  constructor() {
    super("signed out");
  }
}

/** Throw SignedOut unless the tab is still signed in with the key a request was sent with. */
function stillSignedIn(used) {
  if (used === null || storedKey() !== used) throw new SignedOut();
}

/** The error of a failed response, in whichever shape the API answered (native, OpenAI, DeepL...). */
async function failureOf(response) {
  let message = `${response.status} ${response.statusText}`.trim();
  let code = "http_" + response.status;
  try {
    const body = await response.json();
    const error = body.error ?? body;
    if (typeof error === "string") {
      message = error;
    } else if (error && typeof error.message === "string") {
      message = error.message;
      code = error.code ?? code;
    } else if (typeof body.detail === "string") {
      message = body.detail;
    }
  } catch {
    // not JSON: keep the status line
  }
  return new ApiFailure(response.status, code, message);
}

/** The URL of an API path with its query (values that are null, undefined or "" are left out). */
export function apiUrl(path, query = {}) {
  const url = new URL(path, window.location.origin);
  for (const [name, value] of Object.entries(query)) {
    for (const one of Array.isArray(value) ? value : [value]) {
      if (one !== null && one !== undefined && one !== "") url.searchParams.append(name, String(one));
    }
  }
  return url.pathname + url.search;
}

/**
 * Call the API with the tab's key: `call("POST", "/v1/jobs", {json: {...}, query: {wait: 30}})`.
 * Resolves to the Response of a success; rejects with an ApiFailure otherwise.
 */
export async function call(method, path, { json, body, contentType, query, signal, key } = {}) {
  const used = key ?? storedKey();
  if (key === undefined) stillSignedIn(used);
  const headers = { Authorization: `Bearer ${used}` };
  let payload = body;
  if (json !== undefined) {
    headers["Content-Type"] = "application/json";
    payload = JSON.stringify(json);
  } else if (contentType) {
    headers["Content-Type"] = contentType;
  }
  let response;
  try {
    response = await fetch(apiUrl(path, query), { method, headers, body: payload, signal, cache: "no-store" });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiFailure(0, "network", `the server did not answer (${error.message})`);
  }
  if (key === undefined) stillSignedIn(used);
  if (!response.ok) throw await failureOf(response);
  return response;
}

/** `call` for an answer that is JSON (dropped, as SignedOut, if the tab signed out while it was read). */
export async function callJson(method, path, options = {}) {
  const used = options.key ?? storedKey();
  const answer = await (await call(method, path, options)).json();
  if (options.key === undefined) stillSignedIn(used);
  return answer;
}

/**
 * Follow GET /v1/events (Server-Sent Events read with fetch, since EventSource cannot send the
 * Authorization header): `onEvent(name, data)` for each event, `onState(text)` for the connection.
 * Reconnects after a drop, resuming after the last event id it saw. Returns a function that stops it.
 */
export function followEvents({ runIds, onEvent, onState }) {
  const controller = new AbortController();
  let lastId = null;
  let stopped = false;

  async function readOnce() {
    const response = await call("GET", "/v1/events", {
      query: { run_id: runIds, after: lastId },
      signal: controller.signal,
    });
    onState("live");
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value.replace(/\r\n?/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let name = "message";
        let id = null;
        const data = [];
        for (const line of block.split("\n")) {
          if (line.startsWith(":")) continue;
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
          if (field === "event") name = text;
          else if (field === "data") data.push(text);
          else if (field === "id") id = text;
        }
        if (id) lastId = id;
        if (data.length) {
          let parsed = null;
          try {
            parsed = JSON.parse(data.join("\n"));
          } catch {
            parsed = data.join("\n");
          }
          onEvent(name, parsed);
        }
      }
    }
  }

  (async () => {
    while (!stopped) {
      try {
        await readOnce();
        onState("reconnecting");
      } catch (error) {
        if (stopped || error.name === "AbortError") return;
        onState(`not live (${error.message}); checking every few seconds`);
        if (error.status === 401) return;
      }
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  })();

  return () => {
    stopped = true;
    controller.abort();
  };
}
