// The dragoman web console: sign in with an API key (kept in the tab), translate a text, upload
// documents and JSONL runs with live progress, download the results (one by one or as a zip),
// browse the history and the usage. Everything goes through the native API (api.js).

import { ApiFailure, SignedOut, call, callJson, followEvents, forgetKey, storeKey, storedKey } from "./api.js";
import { strToU8, zipSync } from "./vendor/fflate.js";

const $ = (id) => document.getElementById(id);
const ACTIVE_GROUP = new Set(["submitting", "splitting", "held", "running", "finishing"]);
const ACTIVE_JOB = new Set(["queued", "running"]);
const ACTIVE_BATCH = new Set(["validating", "in_progress", "finalizing", "cancelling"]);
const POLL_MS = 2500;

/** What the server offers beyond main's API, read from its OpenAPI schema (no key needed). */
const server = { historyLists: false, documentOptions: [], retry: false };

/** This session's uploads: id -> {id, kind, label, fileName, status, counts, error, result}. */
const uploads = new Map();
let stopEvents = null;
let followedIds = "";
let pollTimer = null;
let pollDue = 0;

// ---------------------------------------------------------------- small DOM makers

function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (value !== null && value !== undefined && value !== false) node.setAttribute(name, value);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

function badge(status) {
  return element("span", { class: `badge ${status}`, text: status });
}

function showError(id, error) {
  $(id).textContent = error ? (error instanceof ApiFailure ? error.message : String(error.message ?? error)) : "";
}

function when(iso) {
  if (!iso) return "";
  const date = typeof iso === "number" ? new Date(iso * 1000) : new Date(iso);
  return date.toLocaleString();
}

function saveBlob(blob, fileName) {
  const url = URL.createObjectURL(blob);
  const link = element("a", { href: url, download: fileName });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/** `term = translation` lines as an object; a line without `=` is an error naming it. */
function parseGlossary(text) {
  const glossary = {};
  const lines = text.split("\n").map((line) => line.trim()).filter(Boolean);
  lines.forEach((line, index) => {
    const at = line.indexOf("=");
    if (at <= 0 || !line.slice(at + 1).trim()) {
      throw new Error(`glossary line ${index + 1} (${line}) is not "term = translation"`);
    }
    glossary[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  });
  return lines.length ? glossary : null;
}

// ---------------------------------------------------------------- sign in / out

async function readServer() {
  try {
    const schema = await (await fetch("/openapi.json", { cache: "no-store" })).json();
    const paths = schema.paths ?? {};
    server.historyLists = Boolean(paths["/v1/jobs"]?.get && paths["/v1/documents"]?.get && paths["/v1/runs"]?.get);
    server.retry = Boolean(paths["/v1/jobs/{job_id}/retry"] || paths["/v1/documents/{document_id}/retry"]);
    const params = paths["/v1/documents"]?.post?.parameters ?? [];
    server.documentOptions = params.map((p) => p.name).filter((n) => ["formality", "context", "glossary"].includes(n));
  } catch {
    // an older server or no schema: main's API only
  }
  const options = server.documentOptions;
  $("document-options").disabled = options.length === 0;
  $("document-options-note").textContent = options.length
    ? "Every segment of each document gets these."
    : "This server does not take formality, context or a glossary for documents yet; they apply to texts only.";
}

function showSignedIn(signedIn) {
  $("sign-in").hidden = signedIn;
  $("workspace").hidden = !signedIn;
  $("nav").hidden = !signedIn;
  $("sign-out").hidden = !signedIn;
}

async function signIn(event) {
  event.preventDefault();
  const input = $("api-key");
  const key = input.value.trim();
  showError("sign-in-error", null);
  if (!key) {
    showError("sign-in-error", "Enter an API key (dragoman api-key create makes one).");
    input.focus();
    return;
  }
  try {
    await call("GET", "/v1/usage", { key });
  } catch (error) {
    showError("sign-in-error", error);
    input.focus();
    return;
  }
  storeKey(key);
  input.value = "";
  enterWorkspace();
}

function enterWorkspace() {
  showSignedIn(true);
  $("text-input").focus();
  loadUsage();
  loadHistory(true);
}

function signOut() {
  forgetKey();
  if (stopEvents) stopEvents();
  stopEvents = null;
  followedIds = "";
  clearTimeout(pollTimer);
  pollTimer = null;
  uploads.clear();
  renderUploads();
  const shown = ["translate-output", "translate-status", "history-list", "history-note", "stream-state", "upload-announcer"];
  for (const id of [...shown, "translate-error", "files-error", "history-error", "usage-error"]) $(id).textContent = "";
  $("translate-form").reset(); // the next person at this screen does not see this one's text
  $("files-form").reset();
  $("usage-table").tBodies[0].textContent = "";
  $("usage-table").tFoot.textContent = "";
  showSignedIn(false);
  $("api-key").focus();
}

/** Any answer 401 means the key is no longer good: back to the sign-in form, saying why. An answer that
 * came after signing out (SignedOut) is dropped: true for both, the caller shows nothing. */
function handleAuth(error) {
  if (error instanceof SignedOut) return true;
  if (error instanceof ApiFailure && error.status === 401 && storedKey()) {
    signOut();
    showError("sign-in-error", error);
    return true;
  }
  return false;
}

// ---------------------------------------------------------------- translate a text

async function translate(event) {
  event.preventDefault();
  showError("translate-error", null);
  $("translate-output").textContent = "";
  const job = {
    text: $("text-input").value,
    source_lang: $("text-source").value.trim(),
    target_lang: $("text-target").value.trim(),
    lane: "interactive",
    detection: "best_guess", // source "auto": a text too short to tell is guessed, never failed (as DeepL does)
  };
  try {
    if (!job.text.trim()) throw new Error("Enter a text to translate.");
    const formality = $("text-formality").value;
    if (formality) job.formality = formality;
    const context = $("text-context").value.trim();
    if (context) job.context = context;
    const glossary = parseGlossary($("text-glossary").value);
    if (glossary) job.glossary = glossary;
  } catch (error) {
    showError("translate-error", error);
    return;
  }
  const button = event.submitter ?? $("translate-form").querySelector("button");
  button.disabled = true;
  $("translate-status").textContent = "Translating…";
  try {
    let answer = await callJson("POST", "/v1/jobs", { json: job, query: { wait: 30 } });
    while (ACTIVE_JOB.has(answer.status)) {
      $("translate-status").textContent = `Translating… (${answer.status})`;
      await new Promise((resolve) => setTimeout(resolve, 1000));
      answer = await callJson("GET", `/v1/jobs/${answer.id}`);
    }
    if (answer.status === "succeeded") {
      $("translate-output").textContent = answer.translation;
      const detected = answer.detected_source_lang ? `, detected ${answer.detected_source_lang}` : "";
      $("translate-status").textContent = `Done${detected}.`;
      loadUsage();
    } else {
      $("translate-status").textContent = "";
      showError("translate-error", `The job ${answer.status}: ${answer.error ?? "no reason given"}`);
    }
  } catch (error) {
    $("translate-status").textContent = "";
    if (!handleAuth(error)) showError("translate-error", error);
  } finally {
    button.disabled = false;
  }
}

// ---------------------------------------------------------------- documents and runs

function stemOf(name) {
  const dot = name.lastIndexOf(".");
  return dot > 0 ? name.slice(0, dot) : name;
}

function suffixOf(name) {
  const dot = name.lastIndexOf(".");
  return dot > 0 ? name.slice(dot + 1).toLowerCase() : "";
}

async function uploadFiles(event) {
  event.preventDefault();
  showError("files-error", null);
  const files = [...$("file-input").files];
  const source = $("file-source").value.trim();
  const targets = $("file-targets").value.split(/[\s,]+/).filter(Boolean);
  const problems = [];
  if (!files.length) problems.push("Choose or drop at least one file.");
  if (!targets.length) problems.push("Name at least one target language.");
  let options = {};
  try {
    options = documentOptions();
  } catch (error) {
    problems.push(error.message);
  }
  if (problems.length) {
    showError("files-error", problems.join(" "));
    return;
  }
  const button = event.submitter ?? $("files-form").querySelector("button[type=submit]");
  button.disabled = true;
  const failures = [];
  try {
    for (const file of files) {
      for (const target of targets) {
        try {
          await uploadOne(file, source, target, options);
        } catch (error) {
          if (handleAuth(error)) return;
          failures.push(`${file.name} → ${target}: ${error.message}`);
        }
      }
    }
  } finally {
    button.disabled = false;
  }
  showError("files-error", failures.length ? failures.join("\n") : null);
  $("file-input").value = ""; // what failed is named in the error; what went up is in the list
  followUploads();
}

function documentOptions() {
  const options = {};
  const accepted = new Set(server.documentOptions);
  if (accepted.has("formality") && $("file-formality").value) options.formality = $("file-formality").value;
  if (accepted.has("context") && $("file-context").value.trim()) options.context = $("file-context").value.trim();
  if (accepted.has("glossary")) {
    const glossary = parseGlossary($("file-glossary").value);
    if (glossary) options.glossary = JSON.stringify(glossary);
  }
  return options;
}

async function uploadOne(file, source, target, options) {
  const isRun = suffixOf(file.name) === "jsonl";
  const query = { source_lang: source, target_lang: target };
  let view;
  if (isRun) {
    view = await callJson("POST", "/v1/runs", {
      query: { ...query, name: `${file.name} → ${target}` },
      body: file,
      contentType: "application/x-ndjson",
    });
  } else {
    view = await callJson("POST", "/v1/documents", {
      query: { ...query, filename: file.name, ...options },
      body: file,
      contentType: file.type || "application/octet-stream",
    });
  }
  const suffix = isRun ? "results.jsonl" : suffixOf(file.name) || "txt";
  uploads.set(view.id, {
    id: view.id,
    kind: isRun ? "run" : "document",
    label: `${file.name} → ${target}`,
    fileName: `${stemOf(file.name)}.${target}.${suffix}`,
    ...viewState(view),
    result: null,
  });
  renderUploads();
}

function viewState(view) {
  return { status: view.status, counts: view.counts, error: view.error ?? null, detected: view.detected_source_lang ?? null };
}

function contentPath(item) {
  if (item.kind === "batch") return `/v1/files/${item.outputFileId}/content`;
  return item.kind === "run" ? `/v1/runs/${item.id}/results` : `/v1/documents/${item.id}/content`;
}

async function fetchResult(item) {
  if (!item.result) item.result = await (await call("GET", contentPath(item))).blob();
  return item.result;
}

async function refreshUpload(item) {
  try {
    const view = await callJson("GET", `/v1/${item.kind}s/${item.id}`);
    Object.assign(item, viewState(view));
    if (item.status === "completed" && !item.result) {
      await fetchResult(item);
      loadUsage();
      loadHistory(true);
    }
  } catch (error) {
    if (handleAuth(error)) return;
    item.error = error.message;
    if (item.status === "completed") item.fetchFailures = (item.fetchFailures ?? 0) + 1;
  }
}

/** Uploads still to follow: unfinished, or completed with a result not fetched yet (three tries). */
function followed() {
  return [...uploads.values()].filter(
    (item) => ACTIVE_GROUP.has(item.status) || (item.status === "completed" && !item.result && (item.fetchFailures ?? 0) < 3),
  );
}

async function refreshActive() {
  await Promise.all(followed().map(refreshUpload));
  renderUploads();
  followUploads();
}

/** Follow the event stream for the unfinished uploads, with a poll as the fallback (a document's
 * own completion is the orchestrator's, not a job's event). */
function followUploads() {
  const ids = followed().map((item) => item.id).sort().join(",");
  if (ids !== followedIds) {
    if (stopEvents) stopEvents();
    stopEvents = null;
    followedIds = ids;
    if (ids) {
      stopEvents = followEvents({
        runIds: ids.split(","),
        onEvent: (name) => {
          const state = $("stream-state");
          state.dataset.events = String(Number(state.dataset.events ?? 0) + 1); // events seen (for tests)
          if (name === "job.finished" || name === "gap") scheduleRefresh(200);
        },
        onState: (state) => {
          $("stream-state").textContent = `Progress: ${state}.`;
        },
      });
    } else {
      $("stream-state").textContent = "";
    }
  }
  if (ids) scheduleRefresh(POLL_MS);
}

/** Refresh the unfinished uploads within `delay` ms (an earlier refresh already due is kept, so a
 * steady flow of events cannot keep pushing it back). */
function scheduleRefresh(delay) {
  const due = Date.now() + delay;
  if (pollTimer !== null && pollDue <= due) return;
  clearTimeout(pollTimer);
  pollDue = due;
  pollTimer = setTimeout(() => {
    pollTimer = null;
    refreshActive();
  }, delay);
}

async function cancelItem(kind, id, after, errorId) {
  try {
    await call("POST", `/v1/${kind}/${id}/cancel`);
  } catch (error) {
    if (handleAuth(error)) return;
    await after();
    showError(errorId, error);
    return;
  }
  after();
}

/** Redraw the uploads list, keeping the keyboard focus on the same button, and announce each status
 * change once (the list itself is not a live region: it is redrawn on every refresh). */
function renderUploads() {
  const list = $("uploads");
  const focused = list.contains(document.activeElement) ? document.activeElement : null;
  const focusKey = focused ? [focused.closest("li")?.dataset.id, focused.className] : null;
  const changes = [];
  list.textContent = "";
  for (const item of uploads.values()) {
    if (item.announced !== item.status) {
      changes.push(`${item.label}: ${item.status}`);
      item.announced = item.status;
    }
    const counts = item.counts ?? { total: 0, succeeded: 0, failed: 0, pending: 0, percent: 0 };
    const actions = element("div", { class: "actions" });
    if (item.result) {
      actions.append(
        element("button", {
          type: "button",
          class: "download",
          text: "Download",
          "aria-label": `Download ${item.fileName}`,
          onclick: () => saveBlob(item.result, item.fileName),
        }),
      );
    }
    if (ACTIVE_GROUP.has(item.status)) {
      actions.append(
        element("button", {
          type: "button",
          class: "cancel",
          text: "Cancel",
          "aria-label": `Cancel ${item.label}`,
          onclick: () => cancelItem(`${item.kind}s`, item.id, refreshActive, "files-error"),
        }),
      );
    }
    const unit = (item.kind === "run" ? "line" : "segment") + (counts.total === 1 ? "" : "s");
    const detail = `${counts.succeeded}/${counts.total} ${unit} done` +
      (counts.failed ? `, ${counts.failed} failed` : "") + (item.detected ? `, detected ${item.detected}` : "") +
      (item.error ? ` — ${item.error}` : "");
    list.append(
      element(
        "li",
        { "data-id": item.id, "data-status": item.status },
        element("span", { class: "name" }, `${item.label} `, badge(item.status)),
        element("progress", { max: "100", value: String(counts.percent ?? 0), "aria-label": `${item.label} progress` }),
        element("span", { class: "meta", text: detail }),
        actions,
      ),
    );
  }
  $("download-all").disabled = ![...uploads.values()].some((item) => item.result);
  if (focusKey) {
    const again = [...list.querySelectorAll("li")].find((li) => li.dataset.id === focusKey[0]);
    const button = again?.querySelector(`button.${focusKey[1] || "download"}`) ?? again?.querySelector("button");
    (button ?? $("uploads-title")).focus();
  }
  if (changes.length) $("upload-announcer").textContent = changes.join(". ");
}

async function downloadAll() {
  const entries = {};
  for (const item of uploads.values()) {
    if (!item.result) continue;
    let name = item.fileName;
    for (let n = 2; name in entries; n += 1) name = `${stemOf(item.fileName)} (${n}).${suffixOf(item.fileName)}`;
    entries[name] = new Uint8Array(await item.result.arrayBuffer());
  }
  entries["README.txt"] = strToU8(`Translated by dragoman on ${new Date().toISOString()}\n`);
  saveBlob(new Blob([zipSync(entries)], { type: "application/zip" }), "dragoman-translations.zip");
}

function watchDrops() {
  const zone = $("drop-zone");
  zone.addEventListener("dragover", (event) => {
    event.preventDefault();
    zone.classList.add("over");
  });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    zone.classList.remove("over");
    $("file-input").files = event.dataTransfer.files;
    $("file-input").focus();
  });
}

// ---------------------------------------------------------------- history

const history = { kind: "documents", next: null, loading: 0 };

function historyRequest(kind, cursor) {
  if (kind === "batches") return ["/v1/batches", { limit: 20, after: cursor }];
  return [`/v1/${kind}`, { limit: 20, before: cursor }];
}

/** Load the selected kind's newest page (`fresh`) or the next older one; the list is replaced in one
 * go when the page arrives, and only the latest of overlapping loads is shown. */
async function loadHistory(fresh) {
  const kind = history.kind;
  const load = ++history.loading;
  showError("history-error", null);
  if (kind !== "batches" && !server.historyLists) {
    $("history-list").textContent = "";
    $("history-note").textContent =
      "This server does not list jobs, runs and documents yet; this session's uploads are above.";
    $("history-more").hidden = true;
    return;
  }
  try {
    const [path, query] = historyRequest(kind, fresh ? null : history.next);
    const page = await callJson("GET", path, { query });
    if (load !== history.loading) return;
    const rows = (page.data ?? []).map((row) => historyRow(kind, row));
    history.next = kind === "batches" ? (page.has_more ? page.last_id : null) : page.next ?? null;
    if (fresh) $("history-list").replaceChildren(...rows);
    else $("history-list").append(...rows);
    $("history-note").textContent = fresh && !rows.length ? `No ${kind} yet.` : "";
    $("history-more").hidden = !history.next;
  } catch (error) {
    if (load === history.loading && !handleAuth(error)) showError("history-error", error);
  }
}

/** The name a history row's result is saved under (the list does not say a document's target). */
function historyFileName(kind, row) {
  const stem = stemOf(row.name ?? row.id);
  if (kind === "batches") return `${row.id}.output.jsonl`;
  if (kind === "runs") return `${stem}.results.jsonl`;
  return `${stem}.translated.${row.format || suffixOf(row.name ?? "") || "txt"}`;
}

function historyRow(kind, row) {
  const actions = element("div", { class: "actions" });
  const reload = () => loadHistory(true);
  const active = kind === "jobs" ? ACTIVE_JOB.has(row.status) : kind === "batches" ? ACTIVE_BATCH.has(row.status) : ACTIVE_GROUP.has(row.status);
  const label = row.name ?? row.id;
  if (active && row.status !== "cancelling") {
    actions.append(element("button", { type: "button", class: "cancel", text: "Cancel", "aria-label": `Cancel ${label}`, onclick: () => cancelItem(kind, row.id, reload, "history-error") }));
  }
  const retryable = (kind === "jobs" || kind === "documents") && server.retry &&
    (row.status === "failed" || row.status === "cancelled" || (kind === "documents" && row.counts?.failed > 0));
  if (retryable) {
    actions.append(element("button", { type: "button", class: "retry", text: "Retry", "aria-label": `Retry ${label}`, onclick: (event) => retry(kind, row.id, event.currentTarget) }));
  }
  if (row.status === "completed" && (kind === "documents" || kind === "runs" || row.output_file_id)) {
    const item = {
      id: row.id,
      kind: kind.slice(0, -1),
      outputFileId: row.output_file_id,
      fileName: historyFileName(kind, row),
    };
    actions.append(element("button", {
      type: "button",
      class: "download",
      text: "Download",
      "aria-label": `Download ${label}`,
      onclick: async () => {
        try {
          saveBlob(await fetchResult(item), item.fileName);
        } catch (error) {
          if (!handleAuth(error)) showError("history-error", error);
        }
      },
    }));
  }
  let meta;
  if (kind === "jobs") meta = `${row.source_lang ?? "?"} → ${row.target_lang ?? "?"} · ${when(row.created_at)}` + (row.error ? ` · ${row.error}` : "");
  else if (kind === "batches") meta = `${row.request_counts?.completed ?? 0}/${row.request_counts?.total ?? 0} ${row.request_counts?.total === 1 ? "request" : "requests"} · ${when(row.created_at)}`;
  else meta = `${row.counts?.succeeded ?? 0}/${row.counts?.total ?? 0} done · ${when(row.created_at)}` +
    (row.detected_source_lang ? ` · detected ${row.detected_source_lang}` : "") + (row.error ? ` · ${row.error}` : "");
  const title = kind === "jobs" ? (row.translation ?? row.id) : label;
  return element(
    "li",
    { "data-id": row.id, "data-status": row.status },
    element("span", { class: "name" }, `${title} `, badge(row.status)),
    element("span", { class: "meta", text: meta }),
    actions,
  );
}

/** Retry a job or document; its button is disabled at once, so a double click is one retry (a document's
 * retry is a new document each time the server is asked). */
async function retry(kind, id, button) {
  button.disabled = true;
  try {
    await call("POST", `/v1/${kind}/${id}/retry`);
  } catch (error) {
    if (handleAuth(error)) return;
    await loadHistory(true);
    showError("history-error", error);
    return;
  }
  loadHistory(true);
}

function selectTab(tab) {
  for (const other of document.querySelectorAll("[role=tab]")) {
    const selected = other === tab;
    other.setAttribute("aria-selected", String(selected));
    other.tabIndex = selected ? 0 : -1;
  }
  $("history-panel").setAttribute("aria-labelledby", tab.id);
  history.kind = tab.dataset.kind;
  loadHistory(true);
}

function watchTabs() {
  const tabs = [...document.querySelectorAll("[role=tab]")];
  for (const tab of tabs) {
    tab.addEventListener("click", () => selectTab(tab));
    tab.addEventListener("keydown", (event) => {
      const at = tabs.indexOf(tab);
      const to = { ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: tabs.length - 1 }[event.key];
      if (to === undefined) return;
      event.preventDefault();
      const next = tabs[(to + tabs.length) % tabs.length];
      next.focus();
      selectTab(next);
    });
  }
}

// ---------------------------------------------------------------- usage

async function loadUsage() {
  showError("usage-error", null);
  try {
    const report = await callJson("GET", "/v1/usage", { query: { group_by: "day" } });
    const body = $("usage-table").tBodies[0];
    body.textContent = "";
    const cells = (first, bucket) => [first, bucket.jobs, bucket.succeeded, bucket.failed, bucket.characters, bucket.output_tokens];
    for (const bucket of report.data) {
      body.append(element("tr", {}, ...cells(bucket.day, bucket).map((value, i) => element(i ? "td" : "th", { scope: i ? null : "row", text: String(value) }))));
    }
    if (!report.data.length) body.append(element("tr", {}, element("td", { colspan: "6", text: "No finished jobs in these days." })));
    const foot = $("usage-table").tFoot;
    foot.textContent = "";
    foot.append(element("tr", {}, ...cells("Total", report.total).map((value) => element("td", { text: String(value) }))));
  } catch (error) {
    if (!handleAuth(error)) showError("usage-error", error);
  }
}

// ---------------------------------------------------------------- start

function start() {
  $("sign-in-form").addEventListener("submit", signIn);
  $("sign-out").addEventListener("click", signOut);
  $("translate-form").addEventListener("submit", translate);
  $("files-form").addEventListener("submit", uploadFiles);
  $("download-all").addEventListener("click", downloadAll);
  $("history-refresh").addEventListener("click", () => loadHistory(true));
  $("history-more").addEventListener("click", () => loadHistory(false));
  $("usage-refresh").addEventListener("click", loadUsage);
  watchDrops();
  watchTabs();
  readServer().then(() => {
    if (storedKey()) enterWorkspace();
    else showSignedIn(false);
  });
}

start();
