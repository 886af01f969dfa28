// The runs list: the runs this server holds and those in its store, filtered by status, team and thread;
// live ones (running, waiting) at the top, then the newest first. It is asked again every few seconds while
// a listed run is running or waiting, when a run starts or ends, and when the page answers a pending item. Each row is a button (Enter or Space opens it in the view).
// Everything from a run is put in with textContent.
import { $, api, el, openRun, statusWord, usd } from "./dom.js";
import { EVENT, on } from "./events.js";
import { listedRuns, shownRun } from "./runview.js";

const LIVE = new Set(["running", "waiting"]);
const PREVIEW = 140;  // characters of a run's input shown in its row
let drawn = "";  // what the list shows now (redrawn only when it changes: the focus stays on its row)
let timer = null;
let asked = 0;

function when(iso) {
  const d = new Date(iso);
  if (isNaN(d)) return "-";
  const today = d.toDateString() === new Date().toDateString();  // short: the row's second line stays one line
  return today ? d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })
    : d.toLocaleString([], { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
}

function row(run) {
  const li = el("li");
  const b = el("button", "run-row");
  b.type = "button";
  b.dataset.run = run.id;
  b.dataset.status = run.status;
  if (run.id === shownRun()) b.setAttribute("aria-current", "true");
  // Two lines: its status, team and input; then when, its id, thread, tokens and cost (more rows in sight).
  const head = el("span", "run-head");
  const input = run.input || "";
  const preview = el("span", "run-input", input.length > PREVIEW ? input.slice(0, PREVIEW - 1) + "…" : input);
  head.append(statusWord(run.status, "span"), el("span", "run-team", run.team), preview);
  const tail = el("span", "run-tail muted");
  tail.append(el("span", "run-when", when(run.started_at)), el("code", "run-id", run.id),
              ...(run.thread ? [el("span", "", "thread " + run.thread)] : []), el("span", "", run.tokens === null ? "tokens unknown" : run.tokens + " tokens"),
              el("span", "run-cost", run.cost === null ? "cost unknown" : usd(run.cost)));
  b.append(head, tail);
  b.addEventListener("click", () => openRun(run.id, { user: true }));
  li.append(b);
  return li;
}

async function refresh() {
  const ask = ++asked;
  const query = new URLSearchParams();
  if ($("runs-status").value) query.set("status", $("runs-status").value);
  if ($("runs-team").value) query.set("team", $("runs-team").value);
  if ($("runs-thread").value.trim()) query.set("thread", $("runs-thread").value.trim());
  let list;
  try {
    list = await api("/v1/runs" + (query.toString() ? "?" + query : ""));
  } catch (e) {
    if (ask === asked) $("runs-note").textContent = "cannot list runs: " + e.message;
    return;
  }
  if (ask !== asked) return;
  const runs = list.data.slice().sort((a, b) => Number(LIVE.has(b.status)) - Number(LIVE.has(a.status)));  // stable
  listedRuns(runs);  // the Run panel checks its run's status against its row
  const shown = shownRun();
  const key = JSON.stringify([shown, runs.map((r) => [r.id, r.status, r.tokens, r.cost, r.thread])]);
  if (key !== drawn) {
    const focused = document.activeElement && document.activeElement.closest("#runs-list") ? document.activeElement.dataset.run : null;
    $("runs-list").replaceChildren(...runs.map(row));
    drawn = key;
    if (focused) $("runs-list").querySelector(`[data-run="${CSS.escape(focused)}"]`)?.focus();
  }
  const running = runs.filter((r) => r.status === "running").length;
  const waiting = runs.filter((r) => r.status === "waiting").length;
  const said = [`${runs.length} run(s)`];
  if (running) said.push(`${running} running`);
  if (waiting) said.push(`${waiting} waiting`);
  $("runs-note").textContent = runs.length ? said.join(", ") : "no runs match";
  clearTimeout(timer);
  // live rows update while something runs, or waits (a person may answer it from here or elsewhere)
  timer = running ? setTimeout(refresh, 2000) : waiting ? setTimeout(refresh, 4000) : null;
}

on(EVENT.token, refresh);
on(EVENT.open, () => setTimeout(refresh, 100));
on(EVENT.runOver, refresh);
on(EVENT.answered, refresh);  // an answer given on the page continues its run
on(EVENT.teams, (teams) => {
  const chosen = $("runs-team").value;
  const any = el("option", "", "any");
  any.value = "";
  $("runs-team").replaceChildren(any, ...teams.map((t) => { const o = el("option", "", t.name); o.value = t.name; return o; }));
  if (teams.some((t) => t.name === chosen)) $("runs-team").value = chosen;
});
on(EVENT.init, () => {
  $("runs-filter").addEventListener("submit", (e) => { e.preventDefault(); refresh(); });
  for (const id of ["runs-status", "runs-team"]) $(id).addEventListener("change", refresh);
  refresh();
});
