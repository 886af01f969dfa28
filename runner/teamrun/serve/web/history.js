// The page's run history: past runs from the server and its store (status, team, thread, time, tokens, cost;
// filtered by status and thread), each opened in the run view (/view/view.js), live while it runs.
// Uses app.js's headers() for the token. Everything from a run is put in with textContent.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  let shown = null;  // {id, view, abort}

  function cell(text, cls) {
    const td = document.createElement("td");
    if (cls) td.className = cls;
    td.textContent = text;
    return td;
  }

  function when(iso) {
    const d = new Date(iso);
    return isNaN(d) ? "-" : d.toLocaleString();
  }

  async function getJSON(path) {
    const response = await fetch(path, { headers: headers() });
    const body = response.headers.get("content-type")?.includes("json") ? await response.json() : null;
    if (!response.ok) throw new Error((body && body.error && body.error.message) || response.statusText);
    return body;
  }

  async function refresh() {
    const query = new URLSearchParams();
    if ($("runs-status").value) query.set("status", $("runs-status").value);
    if ($("runs-thread").value.trim()) query.set("thread", $("runs-thread").value.trim());
    try {
      const list = await getJSON("/v1/runs" + (query.toString() ? "?" + query : ""));
      $("runs-list").replaceChildren(...list.data.map(row));
      $("runs-note").textContent = list.data.length ? "" : "no runs match";
    } catch (e) {
      $("runs-note").textContent = "cannot list runs: " + e.message;
    }
  }

  function row(run) {
    const tr = document.createElement("tr");
    tr.dataset.run = run.id;
    tr.dataset.status = run.status;
    tr.tabIndex = 0;
    tr.className = "run-row status-" + run.status;
    const open = document.createElement("a");
    open.href = "#run=" + encodeURIComponent(run.id);
    open.textContent = run.id;
    const first = document.createElement("td");
    first.append(open);
    tr.append(first, cell(run.status, "status"), cell(run.team), cell(run.thread || "-"), cell(when(run.started_at)),
              cell(String(run.tokens)), cell("$" + (run.cost || 0).toFixed(4)), cell(run.input || "", "input"));
    tr.addEventListener("click", (e) => { e.preventDefault(); openRun(run.id); });
    tr.addEventListener("keydown", (e) => { if (e.key === "Enter") openRun(run.id); });
    return tr;
  }

  async function openRun(id) {
    if (shown && shown.abort) shown.abort.abort();
    const box = $("run-view-box");
    box.hidden = false;
    $("run-view-id").textContent = id;
    history.replaceState(null, "", "#run=" + encodeURIComponent(id));  // a link to this run's view
    $("run-view-note").textContent = "";
    for (const tr of document.querySelectorAll("#runs-list tr")) tr.classList.toggle("open", tr.dataset.run === id);
    let record;
    try {
      record = await getJSON("/v1/runs/" + encodeURIComponent(id));
    } catch (e) {
      $("run-view-note").textContent = "cannot open the run: " + e.message;
      return;
    }
    const view = TeamrunView.mount($("run-view"), { result: record });
    const abort = new AbortController();
    shown = { id, view, abort };
    if (record.source === "store" && !record.events) {
      $("run-view-note").textContent = "from the store: its outcome is kept, its timeline is not (the server that ran it kept no events)";
      return;
    }
    if (record.source === "store") $("run-view-note").textContent = "from the store (run by an earlier server or another worker)";
    try {
      await follow(id, view, abort.signal);
    } catch (e) {
      if (e.name !== "AbortError") $("run-view-note").textContent = "events: " + e.message;
    }
  }

  // The run's events (all so far, then live until it ends), read with fetch: EventSource cannot send a token.
  async function follow(id, view, signal) {
    const response = await fetch("/v1/runs/" + encodeURIComponent(id) + "/events", { headers: headers(), signal });
    if (!response.ok) throw new Error(response.statusText);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        let kind = "message";
        const data = [];
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) kind = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).trim());
        }
        if (!data.length) continue;
        const parsed = JSON.parse(data.join("\n"));
        if (kind === "result") { view.setResult(parsed); refresh(); } else view.push(parsed);
      }
    }
  }

  $("runs-filter").addEventListener("submit", (e) => { e.preventDefault(); refresh(); });
  $("runs-status").addEventListener("change", refresh);
  let tokenTimer = null;  // the token takes effect as it is typed, as for app.js's team list
  $("token").addEventListener("input", () => { clearTimeout(tokenTimer); tokenTimer = setTimeout(refresh, 250); });
  $("token").addEventListener("change", refresh);
  window.addEventListener("teamrun:run-started", (e) => { refresh(); openRun(e.detail); });
  const linked = new URLSearchParams(location.hash.slice(1)).get("run");
  refresh();
  if (linked) openRun(linked);
})();
