// The conversation panel: the turns of a thread (GET /v1/threads/{id}) and a field to send the next one
// (POST /v1/runs with the thread; the run opens in the view). The thread is the opened run's, or the one
// typed in New run's Thread field. Needs a server with a store. Uses app.js's $, el, api, startRun.
// Everything from the thread is put in with textContent (answers rendered as Markdown build DOM nodes).
"use strict";
(function () {
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
    if (message.role === "assistant" && window.TeamrunMarkdown) TeamrunMarkdown.render(body, message.content || "");
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

  $("chat-form").addEventListener("submit", async (event) => {
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
  });
  // Enter sends, Shift+Enter starts a new line.
  $("chat-input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("chat-form").requestSubmit(); }
  });
  window.addEventListener("teamrun:shown", (e) => { if (e.detail.thread) load(e.detail.thread, e.detail.team); });
  window.addEventListener("teamrun:run-over", (e) => { if (e.detail.thread) load(e.detail.thread, e.detail.team); });
  $("thread").addEventListener("change", () => load($("thread").value.trim(), $("team").value));
  window.addEventListener("teamrun:store", () => { if (!thread) load(null); });
  window.addEventListener("teamrun:token", () => { if (thread) load(thread.id, thread.team); });
})();
