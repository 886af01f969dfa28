// The conversation panel: the turns of a thread (GET /v1/threads/{id}) and a field to send the next one
// (POST /v1/runs with the thread; the run opens in the view). The thread is the opened run's, or the one
// typed in New run's Thread field. Needs a server with a store.
// Everything from the thread is put in with textContent (answers rendered as Markdown build DOM nodes).
import { $, api, el, openRun, workbench } from "./dom.js";
import { EVENT, on } from "./events.js";
import { startRun } from "./newrun.js";

let thread = null;  // {id, team} shown
let asked = 0;

function setOn(on) {
  $("chat-input").disabled = !on;
  $("chat-send").disabled = !on;
}

function turn(message) {
  const li = el("li", "turn turn-" + message.role);
  const who = message.role === "user" ? "you" : message.agent || "team";
  const head = el("div", "turn-head muted");
  head.append(el("span", "turn-who", who));
  if (message.run_id && message.role === "user") {
    const link = el("button", "turn-run small", "run " + message.run_id);
    link.type = "button";
    link.setAttribute("aria-label", `Open run ${message.run_id} in the view`);
    link.onclick = () => openRun(message.run_id, { user: true });
    head.append(link);
  }
  const body = el("div", "turn-text tv-markdown");
  if (message.role === "assistant" && window.TeamrunMarkdown) window.TeamrunMarkdown.render(body, message.content || "");
  else body.textContent = message.content || "";
  li.append(head, body);
  return li;
}

async function load(id, team) {
  const ask = ++asked;
  $("chat-thread").textContent = id || "-";
  if (!id) {
    thread = null;
    $("chat-turns").replaceChildren();
    setOn(false);
    $("chat-note").textContent = workbench.store
      ? "open a run of a thread (or give a thread above) to see its turns"
      : "conversations are off: this server keeps no store (start it with --store)";
    return;
  }
  thread = { id, team };
  setOn(true);
  try {
    const found = await api("/v1/threads/" + encodeURIComponent(id));
    if (ask !== asked) return;
    thread.team = found.team;
    $("chat-turns").replaceChildren(...found.messages.map(turn));
    $("chat-note").textContent = `${found.turns} turn(s) with ${found.team}`;
  } catch (e) {
    if (ask !== asked) return;
    $("chat-turns").replaceChildren();
    $("chat-note").textContent = /no thread/.test(e.message) ? "a new thread: its first message starts it" : e.message;
  }
}

async function send(event) {
  event.preventDefault();
  const text = $("chat-input").value.trim();
  if (!thread || !text) return;
  $("chat-send").disabled = true;
  try {
    await startRun(thread.team || $("team").value, text, thread.id);
    $("chat-input").value = "";
    $("chat-note").textContent = "sent: the answer shows here when the run ends";
  } catch (e) {
    $("chat-note").textContent = "not sent: " + e.message;
  } finally {
    $("chat-send").disabled = false;
  }
}

on(EVENT.shown, (run) => { if (run.thread) load(run.thread, run.team); });
on(EVENT.runOver, (run) => { if (run.thread) load(run.thread, run.team); });
on(EVENT.store, () => { if (!thread) load(null); });
on(EVENT.token, () => { if (thread) load(thread.id, thread.team); });
on(EVENT.init, () => {
  $("chat-form").addEventListener("submit", send);
  // Enter sends, Shift+Enter starts a new line.
  $("chat-input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("chat-form").requestSubmit(); }
  });
  $("thread").addEventListener("change", () => load($("thread").value.trim(), $("team").value));
});
