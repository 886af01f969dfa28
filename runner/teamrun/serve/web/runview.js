// The selected run: its facts (status, thread, tokens, cost), Cancel, its record (JSON), approvals asked
// without a store, and the run view (/view/view.js), followed live while the run runs.
// Opened by EVENT.open ({id, record?}); says EVENT.shown as it shows a run, EVENT.runOver with the record when
// it ends. The panel follows the run's record, never contradicting it: once its events have ended (the run waits
// for people, or the stream broke) a run that changes elsewhere (answered over HTTP, with `teamrun answer`, by
// another server) is read again when the runs list shows it changed, or when a Cancel is refused (recheck).
// Everything from a run is put in with textContent.
import { $, api, el, headers, statusClasses, usd } from "./dom.js";
import { EVENT, on, say } from "./events.js";

let shown = null;  // {id, abort, record?, drawn?, quiet?}: quiet once its events are no longer followed

// The run the view shows (its id), or null.
export function shownRun() { return shown ? shown.id : null; }

// The runs list as just read (history.js): the shown run is read again if its row says another status.
export function listedRuns(runs) {
  const row = shown && runs.find((r) => r.id === shown.id);
  if (row) recheck(row.id, row.status);
}

const narrow = window.matchMedia("(max-width: 59.99rem)");

// The run's facts from its record. Tokens and cost: the record's once the run is over; while it runs or waits
// (its record has no figures yet) what the view's summary adds up from the events drawn so far (``drawn``).
function facts(record, drawn) {
  const status = record.status || "running";
  if (shown) { shown.record = record; if (drawn) shown.drawn = drawn; }
  const live = status === "running" || status === "waiting";
  const figures = live && shown && shown.drawn && shown.drawn.tokens ? shown.drawn : null;
  $("status").textContent = status;
  $("status").className = statusClasses(status);
  $("run-thread").textContent = record.thread || "none";
  const usage = (record.result && record.result.usage) || record.usage;
  $("tokens").textContent = String(figures ? figures.tokens : (usage && usage.total_tokens) || record.tokens || 0);
  const cost = figures ? figures.cost
    : record.result && typeof record.result.cost === "number" ? record.result.cost : record.cost;
  $("cost").textContent = usd(cost);
  // a running run has a Cancel, and so has one waiting for people (the server ends it and its questions)
  $("cancel").disabled = $("cancel").hidden = status !== "running" && status !== "waiting";
  $("run-facts").hidden = false;
}

// Nothing is known of the run (it is being read, or cannot be): no figures, no Cancel, no record.
// The previous run's figures are cleared, not only hidden: no reader may take them for this run's.
function noFacts() {
  $("run-facts").hidden = true;
  for (const id of ["status", "run-thread", "tokens", "cost"]) $(id).textContent = "-";
  $("status").className = "status-word";
  $("cancel").disabled = $("cancel").hidden = true;
  $("record").disabled = true;
}

function showApproval(id, data) {
  const box = el("div", "approval");
  box.dataset.approval = data.id;
  box.append(el("p", "", `Allow ${data.tool}(${JSON.stringify(data.arguments)})?`));
  for (const [label, approve] of [["Approve", true], ["Deny", false]]) {
    const b = el("button", "", label);
    b.type = "button";
    b.onclick = () => api(`/v1/runs/${encodeURIComponent(id)}/approvals/${encodeURIComponent(data.id)}`, {
      method: "POST", body: JSON.stringify({ approve }),
    }).catch((e) => { $("error").textContent = e.message; });
    box.append(b);
  }
  $("approvals").append(box);
}

async function open(detail) {
  const id = detail.id;
  if (shown && shown.abort) shown.abort.abort();
  const abort = new AbortController();
  shown = { id, abort };
  $("run-id").textContent = id;
  history.replaceState(null, "", "#run=" + encodeURIComponent(id));  // a link to this run's view
  $("run-view-note").textContent = "";
  $("approvals").replaceChildren();
  $("record-json").hidden = true;
  $("record-json").textContent = "";
  noFacts();
  $("record").setAttribute("aria-expanded", "false");
  const fresh = el("div");  // a new element per run: the previous view keeps no listener on it
  fresh.id = "run-view";
  $("run-view").replaceWith(fresh);
  if ((detail.user || detail.started) && narrow.matches) {  // one column: the run is below, take the reader to it
    $("run-box").scrollIntoView({ block: "start" });
    if (detail.started) $("run-box").focus({ preventScroll: true });  // Run pressed: the focus follows the run
  }
  let record = detail.record;
  try {
    if (!record) record = await api("/v1/runs/" + encodeURIComponent(id));
  } catch (e) {
    if (shown.id !== id) return;
    const why = e.status === 401 ? " (401: type the server's token in Token above)"
      : e.status === 404 ? " (404: this server neither holds it nor has it in its store)"
      : e.status ? ` (HTTP ${e.status})` : "";
    $("run-view-note").textContent = "cannot open the run: " + e.message + why;
    return;
  }
  if (shown.id !== id) return;
  facts(record);
  $("record").disabled = false;
  say(EVENT.shown, record);
  const view = TeamrunView.mount(fresh, {
    result: record,
    onRender: (drawn) => { if (shown && shown.id === id && shown.record) facts(shown.record, drawn); },
  });
  if (record.source === "store" && !record.events) {
    $("run-view-note").textContent = "from the store: its outcome is kept, its timeline is not (the server that ran it kept no events)";
    shown.quiet = true;
    return;
  }
  if (record.source === "store") $("run-view-note").textContent = "from the store (run by an earlier server or another worker)";
  try {
    await follow(id, view, abort.signal);
  } catch (e) {
    if (e.name !== "AbortError") $("run-view-note").textContent = "events: " + e.message;
  }
  if (shown && shown.id === id && shown.abort === abort) shown.quiet = true;  // its events are over (for now)
}

// The shown run's record read again because something says it changed: its row in the runs list (``listed``: the
// row's status) or a Cancel refused. Only once its events are no longer followed (while they are, they say it); a
// run that goes on again, or ended, is opened anew from that record (its events from the first, then live).
async function recheck(id, listed) {
  if (!shown || shown.id !== id || !shown.quiet || shown.rechecking) return;
  if (listed !== undefined && shown.record && shown.record.status === listed) return;
  const asked = shown;
  asked.rechecking = true;
  let record = null;
  try {
    record = await api("/v1/runs/" + encodeURIComponent(id));
  } catch (e) {
    return;  // the panel stays as it was; the next list read asks again
  } finally {
    asked.rechecking = false;
  }
  if (shown !== asked || !record) return;
  if (shown.record && shown.record.status === record.status) facts(record);
  else open({ id, record });
}

// The run's events (all so far, then live until it ends), read with fetch: EventSource cannot send a token.
async function follow(id, view, signal) {
  const response = await fetch("/v1/runs/" + encodeURIComponent(id) + "/events", { headers: headers(), signal });
  if (!response.ok) throw new Error(response.statusText);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  const seen = new Set();  // the events' SSE ids: one delivered twice is drawn once
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let kind = "message", sseId = null;
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) kind = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trim());
        else if (line.startsWith("id:")) sseId = line.slice(3).trim();
      }
      if (!data.length) continue;
      if (sseId !== null) {
        if (seen.has(sseId)) continue;
        seen.add(sseId);
      }
      const parsed = JSON.parse(data.join("\n"));
      if (kind === "result") {
        view.setResult(parsed);
        facts(parsed);
        say(EVENT.runOver, parsed);
        continue;
      }
      view.push(parsed);
      if (kind === "approval_request") showApproval(id, parsed.data);
      else if (kind === "approval_end") document.querySelector(`[data-approval="${CSS.escape(parsed.data.id)}"]`)?.remove();
    }
  }
}

async function cancel() {
  if (!shown) return;
  const id = shown.id;
  try {
    const record = await api(`/v1/runs/${encodeURIComponent(id)}/cancel`, { method: "POST" });
    // a running run ends through its events (their result); a waiting one has none left: it is over now
    if (shown && shown.id === id && record && record.status === "cancelled") {
      facts(record);
      say(EVENT.runOver, record);
    }
  } catch (e) {
    $("error").textContent = e.message;
    if (e.status === 409) recheck(id);  // not running (it is done, or runs elsewhere): the panel shows what it is
  }
}

// The record is read with the token (a link's navigation could not send it) and shown in the page.
async function showRecord() {
  const box = $("record-json");
  if (!box.hidden) { box.hidden = true; $("record").setAttribute("aria-expanded", "false"); return; }
  try {
    const record = await api(`/v1/runs/${encodeURIComponent(shown.id)}`);
    box.textContent = JSON.stringify(record, null, 2);
    box.hidden = false;
    $("record").setAttribute("aria-expanded", "true");
  } catch (e) {
    $("error").textContent = "cannot read the run record: " + e.message;
  }
}

on(EVENT.open, open);
on(EVENT.token, () => {  // a run linked before the token was given: open it now
  if (shown && /^cannot open the run/.test($("run-view-note").textContent)) open({ id: shown.id });
});
on(EVENT.init, () => {
  $("cancel").addEventListener("click", cancel);
  $("record").addEventListener("click", showRecord);
  openLinked();
  window.addEventListener("hashchange", openLinked);  // a #run=<id> link followed on the page, or typed
});

// The run the address names (#run=<id>), opened unless it is the one shown.
function openLinked() {
  const linked = new URLSearchParams(location.hash.slice(1)).get("run");
  if (linked && linked !== shownRun()) open({ id: linked });
}
