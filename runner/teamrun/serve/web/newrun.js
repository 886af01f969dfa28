// The New run form: the token, the team picker (its description, shape and graph) and Run. Says EVENT.teams
// with the served teams, EVENT.store with the server's store, EVENT.token as the token is typed.
import { $, api, el, openRun, workbench } from "./dom.js";
import { EVENT, on, say } from "./events.js";
import { draw } from "./graph.js";

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
  draw($("team-graph"), team ? team.graph : null, team ? team.name : "");
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
    say(EVENT.teams, teams.data);
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
      ? "one id, one conversation (empty: a run on its own)"
      : "threads are off: this server keeps no store (start it with --store)";
  } catch (e) {
    field.disabled = true;
    note.textContent = "threads are off: cannot ask the server (" + e.message + ")";
  }
  say(EVENT.store, workbench.store);
}

// Starts a run; the view opens it and follows it live. Returns the run record (or throws).
export async function startRun(team, input, thread) {
  const request = { team, input };
  if (thread) request.thread = thread;
  const run = await api("/v1/runs", { method: "POST", body: JSON.stringify(request) });
  openRun(run.id, { record: run, started: true });
  return run;
}

// The token takes effect as it is typed (or pasted), not only when the field loses focus.
let tokenTimer = null;
function tokenChanged() {
  clearTimeout(tokenTimer);
  tokenTimer = setTimeout(() => {
    loadTeams();
    say(EVENT.token);
  }, 250);
}

on(EVENT.init, () => {
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
  $("token").addEventListener("input", tokenChanged);
  $("token").addEventListener("change", tokenChanged);
  loadTeams();
  loadThreads();
});
