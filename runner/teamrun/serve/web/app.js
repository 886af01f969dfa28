// The workbench of `teamrun serve`: the shared helpers, the token, the team picker and the New run form.
// The other panels are their own scripts (runview.js, history.js, pending.js, chat.js); they talk through
// window events: "teamrun:token" (the token changed), "teamrun:teams" (the served teams), "teamrun:open"
// (open a run in the view), "teamrun:run-over" (a followed run ended).
// Everything from the server or a model is put in with textContent, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const workbench = { teams: [], store: null };  // what the server serves, and its store (null: none)

function headers() {
  const h = { "Content-Type": "application/json" };
  const token = $("token").value.trim();
  if (token) h.Authorization = "Bearer " + token;
  return h;
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

async function api(path, options) {
  const response = await fetch(path, Object.assign({ headers: headers() }, options || {}));
  const body = response.headers.get("content-type")?.includes("json") ? await response.json() : null;
  if (!response.ok) {
    const error = new Error((body && body.error && body.error.message) || response.statusText);
    error.status = response.status;  // what the server answered (401, 404, 409, ...), for the messages that say it
    throw error;
  }
  return body;
}

// A cost in dollars: the view's rule (TeamrunView.usd, the text teamrun.money.format_usd writes). view.js loads
// after this file; costs are only drawn once the page has loaded.
function usd(v) {
  return TeamrunView.usd(v);
}

// A status shown as a word with its colour (never the colour alone).
function statusWord(status, tag) {
  const word = el(tag || "span", "status-word status-" + status, status);
  return word;
}

function openRun(id, how) {
  window.dispatchEvent(new CustomEvent("teamrun:open", { detail: Object.assign({ id }, how || {}) }));
}

const SHAPES = {
  supervisor: "a supervisor delegates to workers",
  handoffs: "agents hand the conversation to each other",
  workflow: "a workflow of steps",
  peers: "peers share a task board",
};

function showTeam() {
  const team = workbench.teams.find((t) => t.name === $("team").value);
  $("team-description").textContent = team ? team.description || "(no description)" : "";
  $("team-shape").textContent = team ? "How it works: " + (SHAPES[team.shape] || team.shape) + "." : "";
  TeamrunGraph.draw($("team-graph"), team ? team.graph : null, team ? team.name : "");
}

let teamsAsked = 0;  // only the answer to the latest ask counts (the token may change while one is out)
async function loadTeams() {
  const ask = ++teamsAsked;
  try {
    const teams = await api("/v1/teams");
    if (ask !== teamsAsked) return;
    workbench.teams = teams.data;
    const chosen = $("team").value;
    $("team").replaceChildren(...teams.data.map((t) => { const o = el("option", "", t.name); o.value = t.name; return o; }));
    if (teams.data.some((t) => t.name === chosen)) $("team").value = chosen;
    $("error").textContent = "";
    showTeam();
    window.dispatchEvent(new CustomEvent("teamrun:teams", { detail: teams.data }));
  } catch (e) {
    if (ask !== teamsAsked) return;
    $("error").textContent = "cannot list teams: " + e.message;
  }
}

async function loadThreads() {
  // /readyz (no token needed) names the server's store, or null: without one there are no threads.
  const field = $("thread"), note = $("thread-note");
  try {
    const ready = await (await fetch("/readyz")).json();
    workbench.store = ready.store || null;
    field.disabled = !ready.store;
    note.textContent = ready.store
      ? "inputs sent with the same thread id form one conversation (empty: a run on its own)"
      : "threads are off: this server keeps no store (start it with --store)";
  } catch (e) {
    field.disabled = true;
    note.textContent = "threads are off: cannot ask the server (" + e.message + ")";
  }
  window.dispatchEvent(new CustomEvent("teamrun:store", { detail: workbench.store }));
}

// Starts a run; the view opens it and follows it live. Returns the run record (or throws).
async function startRun(team, input, thread) {
  const request = { team, input };
  if (thread) request.thread = thread;
  const run = await api("/v1/runs", { method: "POST", body: JSON.stringify(request) });
  openRun(run.id, { record: run, started: true });
  return run;
}

$("run-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  $("error").textContent = "";
  $("run").disabled = true;
  try {
    const thread = $("thread").disabled ? "" : $("thread").value.trim();
    await startRun($("team").value, $("input").value, thread);
  } catch (e) {
    $("error").textContent = e.message;
  } finally {
    $("run").disabled = false;
  }
});
$("team").addEventListener("change", showTeam);

// The token takes effect as it is typed (or pasted), not only when the field loses focus.
let tokenTimer = null;
function tokenChanged() {
  clearTimeout(tokenTimer);
  tokenTimer = setTimeout(() => {
    loadTeams();
    window.dispatchEvent(new CustomEvent("teamrun:token"));
  }, 250);
}
$("token").addEventListener("input", tokenChanged);
$("token").addEventListener("change", tokenChanged);
// After every script of the page has run: the team list draws graphs with graph.js, which loads after this file
// (the list's answer could arrive while the later scripts were still loading: "TeamrunGraph is not defined").
if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", () => { loadTeams(); loadThreads(); });
} else {
  loadTeams();
  loadThreads();
}
