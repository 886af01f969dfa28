// The page of `teamrun serve`: pick a team, send an input, watch the agent tree live.
// Everything model-written is put in with textContent, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
let current = null;      // the run id in progress
const nodes = new Map();  // span id -> {li, line, children, usage, cost}

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
  if (!response.ok) throw new Error((body && body.error && body.error.message) || response.statusText);
  return body;
}

let teamsAsked = 0;  // only the answer to the latest ask counts (the token may change while one is out)
async function loadTeams() {
  const ask = ++teamsAsked;
  try {
    const models = await api("/v1/models");
    if (ask !== teamsAsked) return;
    $("team").replaceChildren(...models.data.map((m) => { const o = el("option", "", m.id); o.value = m.id; return o; }));
    $("error").textContent = "";
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
    field.disabled = !ready.store;
    note.textContent = ready.store
      ? "inputs sent with the same thread id form one conversation (empty: a run on its own)"
      : "threads are off: this server keeps no store (start it with --store)";
  } catch (e) {
    field.disabled = true;
    note.textContent = "threads are off: cannot ask the server (" + e.message + ")";
  }
}

function tokensOf(usage) { return (usage && usage.total_tokens) || 0; }

function agentNode(ev) {
  const li = el("li", "agent");
  li.dataset.agent = ev.agent_path[ev.agent_path.length - 1];
  li.dataset.path = ev.agent_path.join("/");
  const line = el("span", "line status-running");
  li.append(line);
  if (ev.data.task) li.append(el("div", "task", "task: " + ev.data.task));
  const children = el("ul");
  li.append(children);
  const node = { li, line, children, status: "running", usage: 0, cost: 0, name: li.dataset.agent, model: ev.data.model };
  draw(node);
  return node;
}

function draw(node) {
  node.line.textContent = `${node.name} (${node.model}) · ${node.status} · ${node.usage} tokens · $${node.cost.toFixed(4)}`;
  node.line.className = "line status-" + node.status;
  node.li.dataset.status = node.status;
}

function parentList(ev) {
  // A worker's agent span hangs under its delegation span, which hangs under the delegating agent.
  let span = ev.parent_span_id;
  while (span && !nodes.has(span) && delegationParents.has(span)) span = delegationParents.get(span);
  return nodes.has(span) ? nodes.get(span).children : $("tree");
}
const delegationParents = new Map();

function onEvent(kind, ev) {
  if (kind === "agent_start") {
    const node = agentNode(ev);
    parentList(ev).append(node.li);
    nodes.set(ev.span_id, node);
  } else if (kind === "agent_end" && nodes.has(ev.span_id)) {
    const node = nodes.get(ev.span_id);
    node.status = ev.data.status; node.usage = tokensOf(ev.data.usage); node.cost = ev.data.cost || 0;
    draw(node);
  } else if (kind === "delegation_start") {
    delegationParents.set(ev.span_id, ev.parent_span_id);
  } else if (kind === "approval_request") {
    showApproval(ev.data);
  } else if (kind === "approval_end") {
    document.querySelector(`[data-approval="${CSS.escape(ev.data.id)}"]`)?.remove();
  } else if (kind === "run_end") {
    $("tokens").textContent = tokensOf(ev.data.usage);
    $("cost").textContent = (ev.data.cost || 0).toFixed(4);
  }
}

function showApproval(data) {
  const box = el("div", "approval");
  box.dataset.approval = data.id;
  box.append(el("div", "", `Allow ${data.tool}(${JSON.stringify(data.arguments)})?`));
  for (const [label, approve] of [["Approve", true], ["Deny", false]]) {
    const b = el("button", "", label);
    b.type = "button";
    b.onclick = () => api(`/v1/runs/${current}/approvals/${data.id}`, { method: "POST", body: JSON.stringify({ approve }) })
      .catch((e) => { $("error").textContent = e.message; });
    box.append(b);
  }
  $("approvals").append(box);
}

function showResult(record) {
  $("status").textContent = record.status;
  $("run-thread").textContent = record.thread || "none";
  TeamrunMarkdown.render($("answer"), record.final_text || record.error || "");  // DOM nodes only: never HTML
  const list = (record.result && record.result.delegations) || [];
  $("delegations").replaceChildren(...list.map((d) => {
    const li = el("li");
    li.dataset.agent = d.agent;
    li.append(el("strong", "", `${d.parent} → ${d.agent} (${d.status})`));
    li.append(el("div", "task", "task: " + d.task));
    li.append(el("div", "reply", "answer: " + (d.response || d.error || "")));
    return li;
  }));
  const link = $("record");
  link.dataset.run = record.id;
  link.hidden = false;
  $("cancel").disabled = true;
  $("run").disabled = false;
}

async function follow(runId) {
  // EventSource cannot send a token, so the stream is read with fetch.
  const response = await fetch(`/v1/runs/${runId}/events`, { headers: headers() });
  if (!response.ok) throw new Error("events: " + response.statusText);
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
      let kind = "message"; const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) kind = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trim());
      }
      if (!data.length) continue;
      const parsed = JSON.parse(data.join("\n"));
      if (kind === "result") showResult(parsed); else onEvent(kind, parsed);
    }
  }
}

$("run-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  nodes.clear(); delegationParents.clear();
  for (const id of ["tree", "delegations", "approvals"]) $(id).replaceChildren();
  $("answer").replaceChildren(); $("error").textContent = ""; $("record").hidden = true;
  $("record-json").hidden = true; $("record-json").textContent = "";
  $("run-thread").textContent = "-";
  $("run").disabled = true;
  try {
    const request = { team: $("team").value, input: $("input").value };
    const thread = $("thread").value.trim();
    if (thread && !$("thread").disabled) request.thread = thread;
    const run = await api("/v1/runs", { method: "POST", body: JSON.stringify(request) });
    current = run.id;
    $("run-id").textContent = run.id;
    window.dispatchEvent(new CustomEvent("teamrun:run-started", { detail: run.id }));  // history.js opens its view
    $("status").textContent = "running";
    $("cancel").disabled = false;
    await follow(run.id);
  } catch (e) {
    $("error").textContent = e.message;
    $("run").disabled = false;
  }
});

$("cancel").addEventListener("click", () => {
  if (current) api(`/v1/runs/${current}/cancel`, { method: "POST" }).catch((e) => { $("error").textContent = e.message; });
});
// The record is read with the token (a link's navigation could not send it) and shown below the link.
$("record").addEventListener("click", async (event) => {
  event.preventDefault();
  const shown = $("record-json");
  try {
    const record = await api(`/v1/runs/${encodeURIComponent($("record").dataset.run)}`);
    shown.textContent = JSON.stringify(record, null, 2);
    shown.hidden = false;
  } catch (e) {
    $("error").textContent = "cannot read the run record: " + e.message;
  }
});

// The token takes effect as it is typed (or pasted), not only when the field loses focus.
let tokenTimer = null;
$("token").addEventListener("input", () => {
  clearTimeout(tokenTimer);
  tokenTimer = setTimeout(loadTeams, 250);
});
loadTeams();
loadThreads();
