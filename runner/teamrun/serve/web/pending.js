// What waiting runs wait for (a server with a store): questions and approvals, answered from the page.
// "Open run" shows the run in the view. Everything model-written is put in with textContent, never as HTML.
import { $, api, el, openRun } from "./dom.js";
import { EVENT, on, say } from "./events.js";
import { shownRun } from "./runview.js";

let pendingTimer = null;

// What an answer should look like, in words (the field's placeholder), from the item's answer_schema: a plain
// answer is typed as text, JSON only where the schema asks for a list or an object.
function schemaHint(schema) {
  if (!schema || typeof schema !== "object") return "your answer";
  if (Array.isArray(schema.enum)) return "one of: " + schema.enum.map(String).join(", ");
  const range = [schema.minimum !== undefined ? "at least " + schema.minimum : "",
                 schema.maximum !== undefined ? "at most " + schema.maximum : ""].filter(Boolean).join(", ");
  switch (schema.type) {
    case "string":
      if (schema.pattern) return patternHint(schema.pattern);
      if (schema.format === "date") return "a date like " + EXAMPLES["a date"];
      return schema.format ? "text (" + schema.format + ")" : "your answer (text)";
    case "integer": return "a whole number" + (range ? " (" + range + ")" : "");
    case "number": return "a number" + (range ? " (" + range + ")" : "");
    case "boolean": return "true or false";
    case "array": return "a JSON list, e.g. [\"a\", \"b\"]";
    case "object": {
      const keys = Object.keys(schema.properties || {});
      return "a JSON object" + (keys.length ? " with " + keys.join(", ") : "");
    }
    default: return "your answer";
  }
}

// What a pattern asks for, in words: the kind of value it takes when one of our examples fits it (a date, a time,
// an email address...), else the pattern itself, said as one.
const EXAMPLES = { "a date": "2026-12-07", "a time": "14:30", "a date and time": "2026-12-07T14:30",
                   "an email address": "name@example.com", "a whole number": "42", "a year": "2026" };

function patternHint(pattern) {
  let re;
  try { re = new RegExp(pattern, "u"); } catch (e) { return "text of the form " + pattern; }
  for (const [what, example] of Object.entries(EXAMPLES)) if (re.test(example)) return what + " like " + example;
  return "text of the form " + pattern;
}

function pendingItem(item) {
  const li = el("li", "pending-item");
  li.dataset.run = item.run_id;
  li.dataset.item = item.id;
  li.dataset.kind = item.kind;
  const head = el("div", "pending-head muted");
  const show = el("button", "pending-open small", "Open run");
  show.type = "button";
  show.setAttribute("aria-label", `Open run ${item.run_id} in the view`);
  show.onclick = () => openRun(item.run_id, { user: true });
  head.append(el("span", "", `${item.kind} · ${item.team} · ${item.agent} · run ${item.run_id} · ${item.id} `), show);
  li.append(head);
  const question = el("p", "pending-question", item.question || "");
  question.id = `pending-q-${item.run_id}-${item.id}`;
  li.append(question);
  const form = el("form", "pending-answer");
  const problem = el("span", "pending-problem");  // said aloud by #pending-said (role=alert), which outlives the item
  const send = async (body) => {
    problem.textContent = "";
    $("pending-said").textContent = "";
    $("pending-ok").textContent = "";
    try {
      await api(`/v1/runs/${encodeURIComponent(item.run_id)}/pending/${encodeURIComponent(item.id)}`, {
        method: "POST",
        body: JSON.stringify(body),
      });
      const said = body.approve === undefined ? "your answer " + JSON.stringify(body.answer) : body.approve ? "approved" : "denied";
      $("pending-ok").textContent = `Recorded: ${item.id} of run ${item.run_id}: ${said}. The run goes on.`;
      await loadPending();
      say(EVENT.answered, { run: item.run_id, item: item.id });
      if (shownRun() === item.run_id) openRun(item.run_id);  // follow it as it continues
    } catch (e) {
      problem.textContent = e.message;
      // kept above the list too: the item may be gone at the next redraw (answered elsewhere, run over)
      $("pending-said").textContent = `Not recorded: your answer to ${item.id} of run ${item.run_id}: ${e.message}`;
    }
  };
  if (item.kind === "approval") {
    li.append(el("pre", "pending-arguments", `${item.tool} ${JSON.stringify(item.arguments, null, 1)}`));
    const note = el("input", "pending-note");
    note.placeholder = "note for the agent (optional)";
    note.setAttribute("aria-label", "Note for the agent (optional)");
    const approve = el("button", "pending-approve", "Approve");
    const deny = el("button", "pending-deny", "Deny");
    approve.type = deny.type = "button";
    approve.setAttribute("aria-describedby", question.id);
    deny.setAttribute("aria-describedby", question.id);
    approve.onclick = () => send({ approve: true, note: note.value || null });
    deny.onclick = () => send({ approve: false, note: note.value || null });
    form.append(note, approve, deny);
  } else {
    let field;
    if (item.choices) {  // nothing chosen for the person: the first choice is not a default
      field = el("select", "pending-value");
      const none = el("option", "", "choose one…");
      none.value = "";
      none.disabled = true;
      none.selected = true;
      field.append(none, ...item.choices.map((c) => { const o = el("option", "", c); o.value = c; return o; }));
      field.required = true;
    } else {
      field = el("input", "pending-value");
      field.placeholder = schemaHint(item.answer_schema);
    }
    field.setAttribute("aria-label", "Your answer");
    field.setAttribute("aria-describedby", question.id);
    const answer = el("button", "pending-send", "Answer");
    answer.type = "submit";
    form.append(field, answer);
    form.addEventListener("submit", (event) => { event.preventDefault(); send({ answer: field.value }); });
  }
  form.append(problem);
  li.append(form);
  return li;
}

async function loadPending() {
  const list = $("pending-list"), note = $("pending-note");
  try {
    const found = await api("/v1/pending");
    const open = new Set([...list.querySelectorAll(".pending-item")].map((li) => li.dataset.run + "/" + li.dataset.item));
    const now = new Set(found.data.map((item) => item.run_id + "/" + item.id));
    if (open.size !== now.size || [...now].some((key) => !open.has(key))) {  // redrawn only when it changed
      list.replaceChildren(...found.data.map(pendingItem));
    }
    note.textContent = found.data.length ? "" : "nothing waits for a person";
  } catch (e) {
    note.textContent = e.message;
    if (/--store/.test(e.message)) { clearInterval(pendingTimer); pendingTimer = null; }  // no store: nothing to poll
  }
}

async function startPending() {
  // /readyz (no token needed) names the server's store: without one nothing can wait, so nothing is asked
  let ready = null;
  try { ready = await (await fetch("/readyz")).json(); } catch (e) { ready = null; }
  if (!ready || !ready.store) {
    $("pending-note").textContent = "nothing waits for a person here: this server keeps no store (start it with --store)";
    $("pending-refresh").disabled = true;
    return;
  }
  $("pending-refresh").addEventListener("click", loadPending);
  on(EVENT.token, loadPending);
  on(EVENT.runOver, loadPending);  // a run that ends (cancelled too) asks nothing more
  loadPending();
  pendingTimer = setInterval(loadPending, 3000);
}

on(EVENT.init, startPending);
