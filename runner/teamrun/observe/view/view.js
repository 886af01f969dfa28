// The view of one teamrun run, built from its event lines (a trace file's, or the server's event stream):
// summary, problems, a timeline of agents / model calls / tool calls / waits / retries with the critical path,
// tokens and cost per agent, the delegation tree, the answer, and each span's details on click.
// Plain DOM, no framework: everything from the run is put in with textContent (never innerHTML).
//
// Public API: TeamrunView.usd(cost) -> text; TeamrunView.statusClass(status) -> its palette word (view.css st-*); TeamrunView.mount(root, options) -> view; view.push(record), view.setResult(result), view.render(),
// view.select(spanKey). Options: records (event lines), result (a served run's record), answer, ended (no more
// events come), content (false: keep workspace values off the page), evalCase (the eval case this run answered:
// { name, input, answer, passed, status, checks: [{ name, passed, detail }], report: link back }), onSelect
// (called with a span's key, or null, when the details panel opens on it or closes), onRender (called after each
// redraw with { tokens, cost }: what the summaries say was spent).
"use strict";
(function (global) {
  const { RunModel, criticalPath, tokensOf, costOf, usageUnknown, paidUsage, workerOf, answeredBy, fallbackOf, FAILED, LIMITED } =
    global.TeamrunRunModel;

  // -- formatting ------------------------------------------------------------------------------------------

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function seconds(s) {
    if (!isFinite(s)) return "-";
    if (s < 1) return Math.round(s * 1000) + " ms";
    if (s < 120) return s.toFixed(s < 10 ? 2 : 1) + " s";
    return Math.floor(s / 60) + " min " + Math.round(s % 60) + " s";
  }

  // A name inside a line of text, isolated for the bidi algorithm (teamrun.observe.bidi.isolate, the same
  // rule): an unclosed U+202E in a name must not reverse what follows it. ASCII names are left as they are.
  function iso(name) {
    const s = String(name);
    if (!/[^\x00-\x7f]/.test(s)) return s;
    let depth = 0, kept = "";
    for (const c of s) {
      if (c === "\u2066" || c === "\u2067" || c === "\u2068") depth++;
      else if (c === "\u2069") { if (!depth) continue; depth--; }
      kept += c;
    }
    return "\u2068" + kept + "\u2069".repeat(depth + 1);
  }

  // A cost in dollars, by the rule of teamrun.money.format_usd (the CLI and eval reports write the same text):
  // at least 4 decimals, and 2 significant digits below $0.01 (at most 10 decimals).
  function usd(v) {
    const value = Number(v) || 0;
    if (!isFinite(value)) return "$-";
    const size = Math.abs(value);
    const places = size === 0 || size >= 0.01 ? 4 : Math.min(10, Math.max(4, 1 - Math.floor(Math.log10(size))));
    const shown = size.toFixed(places);
    return (value < 0 && Number(shown) !== 0 ? "-$" : "$") + shown;
  }

  // Input and output tokens of an agent's own model calls (its end's usage when it has one), calls replayed
  // from the journal (paid in an earlier segment) left out.
  function ioTokens(agent) {
    const u = paidUsage(agent);
    return [u.input, u.output];
  }

  // The first line of a task, short: what a row says its invocation was asked.
  function preview(task, limit) {
    if (task === undefined || task === null) return "";
    const line = String(typeof task === "string" ? task : JSON.stringify(task)).split("\n").map((l) => l.trim()).find(Boolean) || "";
    return line.length > limit ? line.slice(0, limit - 1) + "…" : line;
  }

  // Copies ``text``: the Clipboard API where the page may use it, else the text is selected in ``pre`` and
  // copied the old way (a file:// page in some browsers); says which in ``status``.
  function copyText(text, pre, status) {
    const fallback = () => {
      const range = document.createRange();
      range.selectNodeContents(pre);
      const sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      let done = false;
      try { done = document.execCommand("copy"); } catch (e) { done = false; }
      status.textContent = done ? "copied" : "selected: press Ctrl+C (⌘C) to copy";
    };
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(() => { status.textContent = "copied"; }, fallback);
    } else fallback();
  }

  // The one palette of statuses (view.css's st-* classes), the workbench's status words too: which colour a
  // status takes. Cancelled is not a failure, waiting is not done, an interrupted run did not finish.
  function statusClass(status) {
    if (LIMITED.has(status)) return "limit";
    if (status === "cancelled" || status === "waiting" || status === "running") return status;
    if (status === "interrupted" || FAILED.has(status)) return "failed";
    return "ok";
  }

  // The classes of a status word or line: its kind (tv-failed...) and its palette colour (st-failed...).
  function paletted(status) {
    const cls = statusClass(status);
    return "tv-" + cls + " st-" + cls;
  }

  function text(value) {
    if (value === null || value === undefined) return "";
    if (typeof value === "string") return value;
    return JSON.stringify(value, null, 2);
  }

  function pretty(value) {
    if (typeof value === "string") {
      try { return JSON.stringify(JSON.parse(value), null, 2); } catch (e) { return value; }
    }
    return text(value);
  }

  // Who and what a span is, for people: "lead", "lead → competitors", "competitors: model call", "pricing: tool price_list".
  function label(node) {
    const agent = iso(node.path[node.path.length - 1] || node.name), name = iso(node.name);
    if (node.kind === "llm") return agent + ": model call";
    if (node.kind === "tool") return agent + ": tool " + name;
    if (node.kind === "delegation") return agent + " → " + name;
    return node.kind === "agent" ? "agent " + name : name;
  }

  function noteText(n) {
    const d = n.data || {};
    switch (n.kind) {
      case "budget": return "limit reached: " + (d.reason || d.limit || "budget");
      case "warning": return "warning: " + (d.message || "");
      case "hook": return "hook " + (d.hook || "") + " " + (d.status || "") + (d.message ? ": " + d.message : "")
        + (d.actions && d.actions.length ? " (" + d.actions.join(", ") + ")" : "");
      case "llm_retry": return "retry " + d.attempt + "/" + d.max_attempts + " after " + (d.error || "an error")
        + (d.status_code ? " (HTTP " + d.status_code + ")" : "") + ", waited " + seconds(d.delay_s || 0);
      case "llm_wait": return "waited " + seconds(Number(d.seconds) || 0) + " for " + rateLimitOf(d) + ", not model time";
      case "fallback": return "fallback: " + (d.fallback || "");
      case "accept": return "acceptance " + (d.status || "") + (d.check ? ": " + d.check : "") + (d.detail ? " — " + d.detail : "");
      case "memory_recall": {
        const ids = listOf(d.ids), scores = listOf(d.scores);
        const which = ids.length ? ": " + ids.map((id, i) => shortId(id) + " (" + score(scores[i]) + ")").join(", ") : "";
        if (d.how === "messages") {  // quoted from the resource's other threads, not saved facts
          const said = ids.length ? ids.length + (ids.length === 1 ? " earlier message" : " earlier messages") : "no earlier messages";
          return "recalled " + said + " before its turn" + which + (d.replayed ? " · replayed from the journal" : "");
        }
        const found = ids.length ? memories(ids.length) : "nothing";
        return (d.how === "search" ? "memory_search found " + found : "recalled " + found + " before its turn") + which
          + (d.replayed ? " · replayed from the journal" : "");
      }
      case "memory_save":
        if (d.status === "refused") return "memory_save refused: " + (d.reason || "");
        if (d.status === "known") return "memory_save: already known as " + shortId(d.id) + " (one memory)";
        return "saved memory " + shortId(d.id);
      default: return n.kind;
    }
  }

  // Long-term memory's lines (an agent's recalls before its turns, its memory_search and memory_save calls).
  const MEMORY = new Set(["memory_recall", "memory_save"]);

  function listOf(value) { return Array.isArray(value) ? value : []; }

  function memories(count) { return count + (count === 1 ? " memory" : " memories"); }

  // A memory's id as a point's label says it: its first 8 characters (the details give it whole).
  function shortId(id) { return String(id === undefined || id === null ? "?" : id).slice(0, 8); }

  function score(value) { return typeof value === "number" && isFinite(value) ? value.toFixed(2) : "?"; }

  // Whose rate limit a wait (llm_wait) waited for, and why: "openai/a's rate limit (requests per minute)".
  function rateLimitOf(d) {
    return (d.model ? d.model + "'s " : "the ") + "rate limit" + (d.reason ? " (" + String(d.reason).replace(/_/g, " ") + ")" : "");
  }

  // Seconds a model call waited for its rate limit (its end's waited_s, else its llm_wait lines): not model time.
  function waitedOf(node) {
    if (typeof node.data.waited_s === "number") return node.data.waited_s;
    return node.notes.filter((n) => n.kind === "llm_wait").reduce((s, n) => s + (Number(n.data.seconds) || 0), 0);
  }

  // "120 in, 96 cached, 3 out" (or, labels first, "in 120, 96 cached, out 3"): input tokens, those of them read
  // from the provider's cache (said when there are any), output tokens.
  function inOut(input, cached, output, labelsFirst) {
    const cachedPart = cached ? ", " + cached + " cached" : "";
    return labelsFirst ? "in " + input + cachedPart + ", out " + output : input + " in" + cachedPart + ", " + output + " out";
  }

  function noteLevel(n) {
    const d = n.data || {};
    if (n.kind === "budget") return "limit";
    if (n.kind === "hook") return d.status === "error" ? "error" : "info";
    if (n.kind === "accept") return d.status === "passed" ? "info" : "warn";
    if (n.kind === "llm_retry" || n.kind === "warning") return "warn";
    return "info";
  }

  const FIRST_PROBLEMS = 5;  // problem lines shown before "show all"
  const ROVING = ".tv-toggle, .tv-who[data-key], .tv-bar[role=button]";  // the timeline's items, in a row's order

  // -- the view --------------------------------------------------------------------------------------------

  class RunView {
    constructor(root, options) {
      this.root = root;
      this.options = options || {};
      this.records = [];
      this.model = new RunModel();
      this.result = this.options.result || null;
      this.selected = null;
      this.pending = false;
      this.skew = -Infinity;  // the most the server's clock was seen ahead of ours (event time - time received)
      this.onTick = [];  // what the live clock redraws: positions, durations, the wall time
      this.timer = null;
      this.filter = { q: "", agent: "", kind: "", status: "" };  // the timeline's search and filters
      this.collapsed = new Set();  // agent keys whose invocations below are hidden
      this.rows = [];
      this.root.classList.add("teamrun-view");
      this.root.addEventListener("click", (e) => this.onClick(e));
      if (typeof ResizeObserver !== "undefined") {  // a bar says its duration if it fits: redraw when the width changes much
        new ResizeObserver((entries) => {
          const w = entries[0].contentRect.width;
          if (w && (!this.width || Math.abs(w - this.width) > 0.1 * this.width)) { this.width = w; this.schedule(); }
        }).observe(this.root);
      }
      const tip = (e) => {
        const target = e.target.closest && e.target.closest(".tv-bar, .tv-who");
        if (target && !target.title) this.tooltip(target);
      };
      this.root.addEventListener("pointerover", tip);
      this.root.addEventListener("focusin", tip);
      this.root.addEventListener("keydown", (e) => {
        if (e.key === "Escape" && this.details && !this.details.hidden) { e.preventDefault(); this.close(); return; }
        if ((e.key === "Enter" || e.key === " ") && e.target.dataset && e.target.dataset.key && e.target.tagName !== "BUTTON") {
          e.preventDefault(); this.onClick(e);
          const close = this.details && !this.details.hidden && this.details.querySelector(".tv-close");
          if (close) close.focus({ preventScroll: true });  // from the keyboard: on into the details (Escape: back)
        }
      });
      const escape = (e) => {  // Escape closes the details wherever the focus is
        if (!this.root.isConnected) { document.removeEventListener("keydown", escape); return; }  // a view let go of
        if (e.key === "Escape" && this.details && !this.details.hidden && !this.root.contains(e.target)) this.close();
      };
      document.addEventListener("keydown", escape);
      for (const r of this.options.records || []) this.model.add(r);
      this.render();
    }

    // Live: one more event line (rendered on the next frame, at most a few times a second).
    push(record) {
      if (record && typeof record.ts === "number") this.skew = Math.max(this.skew, record.ts - Date.now() / 1000);
      this.model.add(record);
      this.schedule();
    }

    setResult(result) {
      this.result = result;
      this.schedule();
    }

    // At most one redraw per 150 ms, or per twice the last redraw's time on a big run: live events never
    // keep the page busy more than about a third of the time.
    schedule() {
      if (this.pending) return;
      this.pending = true;
      setTimeout(() => {
        this.pending = false;
        const started = performance.now();
        this.render();
        this.cost = performance.now() - started;
      }, Math.max(150, 2 * (this.cost || 0)));
    }

    // The server's time now, by our clock: the same clock (a server on this machine) unless an event came
    // stamped later than it arrived, which shows how far ours is behind.
    clock() { return Date.now() / 1000 + Math.max(this.skew, 0); }

    // Draws ``draw`` now and, while the run is followed live and ``open``, again on each tick of the clock.
    ticking(draw, open) {
      draw();
      if (open !== false && this.model.now !== null) this.onTick.push(draw);
    }

    // While the run is live, between events: the clock and the open spans grow with time (a few times a
    // second; never more than about a fifth of the time on a big run). Events still redraw everything.
    tick() {
      if (this.timer !== null || !this.onTick.length) return;
      this.timer = setTimeout(() => {
        this.timer = null;
        if (this.status() !== "running" || this.model.now === null) return;
        const started = performance.now();
        this.model.now = this.clock();
        for (const draw of this.onTick) draw();
        this.tickCost = performance.now() - started;
        this.tick();
      }, Math.max(250, 4 * (this.tickCost || 0)));
    }

    onClick(event) {
      const toggle = event.target.closest(".tv-toggle");
      if (toggle && this.root.contains(toggle)) { this.toggle(toggle.dataset.agentKey); return; }
      const target = event.target.closest("[data-key]");
      if (!target || !this.root.contains(target)) return;
      this.opener = target;
      this.select(target.dataset.key, target.dataset.note);
    }

    // Closes the details panel; the focus goes back to what opened it.
    close() {
      this.selected = null;
      this.details.hidden = true;
      for (const e of this.root.querySelectorAll(".selected")) e.classList.remove("selected");
      if (this.options.onSelect) this.options.onSelect(null);
      const back = this.opener && this.opener.isConnected ? this.opener
        : this.root.querySelector(".tv-who[data-key]");
      if (back) back.focus({ preventScroll: true });
    }

    // Opens the details of span ``key``; ``note``: the index of one of its notes (a memory point) to show there.
    select(key, note) {
      const node = this.model.spans.get(key);
      if (!node) return;
      this.selected = key;
      this.selectedNote = note === undefined || note === null ? null : String(note);
      for (const e of this.root.querySelectorAll(".selected")) e.classList.remove("selected");
      for (const e of this.root.querySelectorAll(`[data-key="${CSS.escape(key)}"]`)) e.classList.add("selected");
      this.details.replaceChildren(...this.detailsOf(node));
      this.details.hidden = false;
      const item = this.selectedNote === null ? null : this.details.querySelector(`[data-note="${CSS.escape(this.selectedNote)}"]`);
      if (item) {
        item.classList.add("selected");
        item.scrollIntoView({ block: "nearest" });
      }
      if (this.options.onSelect) this.options.onSelect(key);
    }

    render() {
      const m = this.model;
      if (!this.width) this.width = this.root.clientWidth;  // once (then the ResizeObserver): no layout forced by a redraw
      const focused = document.activeElement;  // moving the toolbar into the new page blurs it: focus it again
      const caret = focused && focused.classList && focused.classList.contains("tv-search") ? [focused.selectionStart, focused.selectionEnd] : null;
      m.now = this.status() === "running" ? this.clock() : null;
      this.onTick = [];
      this.critical = criticalPath(m);
      const agents = m.agents();
      this.names = this.instanceNames(agents);
      this.figures = { tokens: 0, cost: 0 };  // what the summaries say the page's runs spent (added up as drawn)
      const parts = [this.evalCase(), ...this.summaries(agents), this.problems(agents), this.timeline(agents), this.workspace(),
                     this.charts(agents), this.tree(), this.answer()];
      this.details = el("aside", "tv-details");
      this.details.id = "tv-details";
      this.details.setAttribute("aria-label", "details");
      this.details.hidden = true;
      const hint = el("aside", "tv-hint", "Click a row or a bar (or press Enter on it) to see its details here; Escape closes them.");
      hint.setAttribute("aria-label", "details (none selected)");
      const main = el("div", "tv-main");
      main.append(...parts.filter(Boolean));
      const layout = el("div", "tv-layout");
      layout.append(main, this.details, hint);
      const grid = this.root.querySelector(".tv-grid"), old = this.root.querySelector(".tv-details");
      const kept = { grid: grid ? grid.scrollTop : 0, details: old ? old.scrollTop : 0 };  // a live redraw keeps places
      const inGrid = !!(focused && focused.closest && focused.closest(".tv-grid") && this.root.contains(focused));
      this.root.replaceChildren(layout);
      this.applyFilter();
      if (inGrid) [...this.root.querySelectorAll(".tv-grid " + ROVING.split(", ").join(", .tv-grid "))]
        .find((e) => e.tabIndex === 0)?.focus({ preventScroll: true });  // a live redraw keeps the focus in the timeline
      if (focused && focused.isConnected && focused !== document.activeElement && this.root.contains(focused)) {
        focused.focus({ preventScroll: true });  // the toolbar outlives a live redraw: typing goes on
        if (caret) focused.setSelectionRange(caret[0], caret[1]);
      }
      const newGrid = this.root.querySelector(".tv-grid");
      if (newGrid) newGrid.scrollTop = kept.grid;
      if (this.selected && m.spans.has(this.selected)) { this.select(this.selected, this.selectedNote); this.details.scrollTop = kept.details; }
      this.root.dataset.events = String(m.count);
      this.root.dataset.status = this.status();
      if (this.options.onRender) this.options.onRender(this.figures);
      this.tick();
    }

    // The status of the page: the served run's outcome, else its runs' (the last run's, or running while one
    // runs). "running" only while more events can come: a trace file that stops short is "unfinished".
    status() {
      if (this.result && this.result.status) return this.result.status;
      const runs = this.model.runs;
      if (!runs.length) return "empty";
      const each = runs.map((run) => this.runStatus(run));
      return each.includes("running") ? "running" : each[each.length - 1];
    }

    runStatus(run) {
      if (run.end !== null) return run.status;
      if (this.result && this.result.status && this.model.runs.length === 1) return this.result.status;
      return this.options.ended ? "unfinished" : "running";
    }

    // One word for a span's state, wherever it is shown: its end's status, else running while its run
    // runs, else unfinished (it never ended).
    statusOf(node) {
      if (node.replayed) return "replayed";  // a model call answered from the journal: not made, not paid again
      if (node.end !== null) {
        if (this.suspended(node)) return "waiting";
        return node.status === "error" && node.error === "cancelled" ? "cancelled" : node.status;  // cut off by a cancel
      }
      const run = this.model.runOf(node);
      const live = run ? this.runStatus(run) === "running" : !this.options.ended && !(this.result && this.result.status);
      return live ? "running" : "unfinished";
    }

    // A span cut off because its run suspended to wait for a person (nothing failed): the person tool call of
    // an invocation that ended "waiting", and the delegation to that worker: its end says status "waiting" (traces
    // written before the engine said so: error "cancelled").
    suspended(node) {
      if ((node.kind === "tool" || node.kind === "delegation") && node.status === "waiting") return true;  // said by the end
      if (node.kind === "tool") {
        return node.status === "error" && node.error === "cancelled" && !!node.parent && node.parent.kind === "agent"
          && node.parent.status === "waiting";
      }
      if (node.kind === "delegation" && node.status === "cancelled") {
        const worker = workerOf(node);
        return !!worker && worker.status === "waiting";
      }
      return false;
    }

    // A summary per run in the file (a file may hold several runs): every figure from that run's spans.
    summaries(agents) {
      const runs = this.model.runs;
      if (!runs.length) return [this.summary(null, agents)];
      return runs.map((run) => this.summary(run, agents.filter((a) => this.model.runOf(a) === run)));
    }

    summary(run, agents) {
      const m = this.model, only = m.runs.length <= 1;  // the served result speaks for the page's one run
      const box = el("section", "tv-summary");
      if (run) box.dataset.run = run.runId;
      const status = run ? this.runStatus(run) : this.status();
      const title = el("h2", "tv-title");
      title.append(el("span", "", iso(run ? run.name : (this.result && this.result.team) || "run")), el("span", "tv-status " + paletted(status), status));
      box.append(title);
      const facts = el("p", "tv-summary-facts");
      const res = only && this.result || {};
      const resUsage = res.usage || (res.result && res.result.usage) || {};
      const resCost = typeof res.cost === "number" ? res.cost : res.result && typeof res.result.cost === "number" ? res.result.cost : 0;
      // A run continued after people answered: one summary per segment, each with what that segment paid (its
      // run_end's usage is the run's so far, given as "run total").
      const parts = run ? m.segments.get(run.runId) || [run.scope] : [];
      const continued = parts.length > 1;
      const total = !continued && run && run.usage && run.usage.total_tokens ? run.usage.total_tokens
        : agents.reduce((s, a) => s + tokensOf(a), 0) || (continued ? 0 : resUsage.total_tokens || 0);
      const cost = !continued && run && run.cost ? run.cost : agents.reduce((s, a) => s + costOf(a), 0) || (continued ? 0 : resCost);
      this.figures.tokens += total;
      this.figures.cost += cost;
      const fact = (k, v) => { const f = el("span", "tv-fact"); const b = el("b", "", v); f.dataset.fact = k; f.append(el("span", "tv-k", k), b); facts.append(f); return b; };
      if (run || this.result) fact("run", run ? run.runId : this.result.id);
      if (only && this.result && this.result.thread) fact("thread", this.result.thread);
      // With no span at all (a served run whose events were not kept), what the spans would say is unknown: left
      // out, not 0; the served result's tokens and cost stay.
      const known = run || m.spans.size > 0 || !(this.result && this.result.status && this.result.status !== "running");
      const start = run ? run.start : m.t0;
      if (known) {
        const wall = fact("wall time", "");
        this.ticking(() => { wall.textContent = seconds(isFinite(start) ? (run ? m.endOf(run) : m.tEnd) - start : 0); }, !run || run.end === null);
      }
      if (isFinite(start)) fact("started", new Date(start * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC");
      if (continued) fact("part", (parts.indexOf(run.scope) + 1) + " of " + parts.length + (run.scope === parts[0] ? "" : " (continued)"));
      if (known) fact("agents", String(agents.length));
      const calls = [...m.spans.values()].filter((n) => n.kind === "llm" && (!run || m.runOf(n) === run));
      const replayed = calls.filter((n) => n.replayed).length;
      if (known) fact("model calls", String(calls.length - replayed));
      if (replayed) fact("replayed calls", String(replayed));
      if (known || resUsage.total_tokens !== undefined) {
        const paid = agents.map(paidUsage), sum = (k) => paid.reduce((t, u) => t + u[k], 0);
        const split = agents.length ? [sum("input"), sum("output"), sum("cached")]
          : [resUsage.input_tokens, resUsage.output_tokens, resUsage.cached_tokens || 0];
        const b = fact("tokens", String(total));
        if (split[0] !== undefined && split[1] !== undefined && split[0] + split[1] > 0) {  // beside the total
          b.after(el("span", "tv-split", " (" + inOut(split[0], split[2], split[1], false) + ")"));
        }
      }
      if (known || typeof res.cost === "number" || (res.result && typeof res.result.cost === "number")) fact("cost", usd(cost));
      if (continued && run.usage && run.usage.total_tokens) fact("run total", run.usage.total_tokens + " tok · " + usd(run.cost));
      if (run && run.data.stopped_by) fact("stopped by", run.data.stopped_by);
      box.append(facts);
      const input = (run && run.data.input) || (only && this.result && this.result.input);
      if (input) box.append(...this.inputText(String(input)));
      return box;
    }

    // The run's input: a long one is clamped to a few lines (the timeline stays in sight), with a button to show
    // all of it (kept open across live redraws) and back.
    inputText(input) {
      const p = el("p", "tv-input", "input: " + input);
      if (input.length <= 400 && input.split("\n").length <= 4) return [p];
      p.classList.toggle("tv-clamped", !this.inputOpen);
      const all = el("button", "tv-button tv-input-all", this.inputOpen ? "show less" : "show all (" + input.length + " characters)");
      all.type = "button";
      all.setAttribute("aria-expanded", String(!!this.inputOpen));
      all.addEventListener("click", () => {
        this.inputOpen = !this.inputOpen;
        p.classList.toggle("tv-clamped", !this.inputOpen);
        all.textContent = this.inputOpen ? "show less" : "show all (" + input.length + " characters)";
        all.setAttribute("aria-expanded", String(this.inputOpen));
      });
      return [p, all];
    }

    // Who an invocation is, for people: "researcher #3" when the agent ran more than once, else its name.
    // Numbered within its run (each segment of a continued run on its own: the same invocation, replayed, keeps
    // its number), in the order they started.
    instanceNames(agents) {
      const repeats = new Map(), seen = new Map(), names = new Map();
      const group = (a) => { const run = this.model.runOf(a); return (run ? run.scope : "") + "|" + a.name; };
      for (const a of agents) repeats.set(group(a), (repeats.get(group(a)) || 0) + 1);
      for (const a of [...agents].sort((x, y) => x.start - y.start)) {
        const g = group(a);
        seen.set(g, (seen.get(g) || 0) + 1);
        names.set(a.key, iso(a.name) + (repeats.get(g) > 1 ? " #" + seen.get(g) : ""));
      }
      return names;
    }

    // The invocation a span is part of: an agent itself, a delegation's worker (else the delegation), a call's agent.
    ownerOf(node) {
      if (node.kind === "agent") return node;
      if (node.kind === "delegation") return workerOf(node) || node;
      let n = node.parent;
      while (n && n.kind !== "agent") n = n.parent;
      return n || node;
    }

    whoOf(owner) {
      if (owner.kind === "agent") return this.names.get(owner.key) || iso(owner.name);
      return label(owner);
    }

    // Who and what a span is, with the invocation's number as its row says it: "researcher #2",
    // "researcher #2: model call", "lead → researcher #2", "pricing: tool price_list".
    labelOf(node) {
      if (node.kind === "agent") return this.whoOf(node);
      if (node.kind === "delegation") {
        const worker = workerOf(node), asking = node.parent && node.parent.kind === "agent" ? this.whoOf(node.parent) : null;
        return (asking || label(node).split(" → ")[0]) + " → " + (worker ? this.whoOf(worker) : iso(node.name));
      }
      const owner = this.ownerOf(node);
      if (owner === node) return label(node);
      return this.whoOf(owner) + (node.kind === "llm" ? ": model call" : node.kind === "tool" ? ": tool " + iso(node.name) : "");
    }

    // One problem per failed invocation, with the levels it was seen at (a provider's 500 fails the model
    // call, the worker and the delegation to it: one line); cancelled spans are one line with their count.
    problems(agents) {
      const items = [];
      const spans = [...this.model.spans.values()];
      const budgetNoted = (node) => node.notes.some((n) => n.kind === "budget");
      const anyBudget = spans.some(budgetNoted);
      const failures = new Map();  // owner key -> { owner, spans: [...] }
      const cancelled = [], waiting = [];
      const levelName = { llm: "model call", tool: "tool call", delegation: "delegation", agent: "agent" };
      for (const node of spans) {
        if (node.kind === "run") {
          if (LIMITED.has(node.status) && !anyBudget) items.push({ node, level: "limit", text: "run stopped: " + (node.data.stopped_by || node.status) });
          continue;
        }
        const status = this.statusOf(node);
        if (status === "waiting") {  // the invocations that asked (their person tool call cut off), not those waiting on them
          const run = this.model.runOf(node), parts = run ? this.model.segments.get(run.runId) || [] : [];
          const current = !run || parts[parts.length - 1] === run.scope;  // an earlier part's wait was answered
          if (current && node.kind === "agent" && node.children.some((c) => c.kind === "tool" && this.suspended(c))) waiting.push(node);
        }
        else if (status === "cancelled") cancelled.push(node);
        else if (status === "unfinished" || FAILED.has(status)) {
          const owner = this.ownerOf(node);
          if (!failures.has(owner.key)) failures.set(owner.key, { owner, spans: [] });
          failures.get(owner.key).spans.push(node);
        } else if (LIMITED.has(node.status) && node.kind === "agent" && !budgetNoted(node)) {
          items.push({ node, level: "limit", text: this.whoOf(node) + " stopped by a limit" + (node.data.stopped_by ? ": " + node.data.stopped_by : "") });
        }
        for (const n of node.notes) {
          if (noteLevel(n) !== "info") items.push({ node, level: noteLevel(n), text: this.labelOf(node) + ": " + noteText(n) });
        }
      }
      const depthOrder = { llm: 0, tool: 0, agent: 1, delegation: 2 };
      for (const { owner, spans: seen } of failures.values()) {
        seen.sort((a, b) => depthOrder[a.kind] - depthOrder[b.kind]);
        const first = seen.find((n) => n.error) || seen[0];  // the deepest span that says why
        const status = this.statusOf(first);
        const why = status === "unfinished" ? "never ended" : first.error ? first.error : status;
        const levels = seen.map((n) => levelName[n.kind] + (n.kind === "tool" || n.kind === "llm" ? " " + iso(n.name) : ""));
        items.unshift({ node: first, level: "error", text: this.whoOf(owner) + ": " + why, levels, count: seen.length });
      }
      if (cancelled.length) {
        const who = new Set(cancelled.map((n) => this.whoOf(this.ownerOf(n))));
        items.push({ node: cancelled[0], level: "cancelled", text: "cancelled: " + cancelled.length + " span" + (cancelled.length === 1 ? "" : "s")
          + " (" + [...who].slice(0, 3).join(", ") + (who.size > 3 ? " and " + (who.size - 3) + " more" : "") + ")" });
      }
      if (waiting.length) {  // one line: the run suspended until people answer, not a failure
        const who = waiting.map((n) => this.whoOf(n));
        items.push({ node: waiting[0], level: "waiting", text: "waiting for a person: " + who.slice(0, 3).join(", ")
          + (who.length > 3 ? " and " + (who.length - 3) + " more" : "") });
      }
      // The served run's error is the failure its spans tell (told once, as `trace view` tells it); said on its own
      // only when no span says why the run failed.
      if (this.result && this.result.error && !items.some((i) => i.level === "error")) {
        items.unshift({ node: this.model.run, level: "error", text: this.result.error });
      }
      if (!items.length) return null;
      const box = el("section", "tv-problems");
      box.append(el("h3", "", "Errors, limits and warnings (" + items.length + ")"));
      const list = el("ul");
      const words = { error: "error", limit: "limit", warn: "warning", cancelled: "cancelled", waiting: "waiting", info: "note" };
      for (const item of items.slice(0, 200)) {
        const li = el("li", "tv-problem tv-" + item.level);
        const body = el("span", "tv-problem-text");  // the list item stays a list item; its text is the button
        body.append(el("span", "tv-level", words[item.level] || item.level), document.createTextNode(item.text));
        if (item.levels && item.levels.length > 1) body.append(el("span", "tv-levels", " · seen at: " + item.levels.join(", ")));
        li.append(body);
        li.dataset.level = item.level;
        if (item.count) li.dataset.count = String(item.count);
        if (item.node) { body.dataset.key = item.node.key; body.tabIndex = 0; body.setAttribute("role", "button"); }
        list.append(li);
      }
      if (items.length > 200) list.append(el("li", "", "… and " + (items.length - 200) + " more"));
      box.append(list);
      if (items.length > FIRST_PROBLEMS) {  // the first lines, whole (a scroll box cut a line in half), then the rest on ask
        const rest = [...list.children].slice(FIRST_PROBLEMS);
        const more = el("button", "tv-button tv-problems-all");
        more.type = "button";
        const show = () => {
          for (const li of rest) li.hidden = !this.problemsOpen;
          more.textContent = this.problemsOpen ? "show the first " + FIRST_PROBLEMS : "show all " + items.length;
          more.setAttribute("aria-expanded", String(!!this.problemsOpen));
        };
        more.addEventListener("click", () => { this.problemsOpen = !this.problemsOpen; show(); });
        show();
        box.append(more);
      }
      return box;
    }

    // The search box and filters above the timeline: built once, kept across live redraws (typing goes on).
    toolbar(agents) {
      if (!this.tools) {
        const tools = el("div", "tv-tools");
        tools.setAttribute("role", "search");
        tools.setAttribute("aria-label", "search and filter the timeline");
        const field = (text, control) => { const l = el("label", "tv-field"); l.append(el("span", "", text), control); tools.append(l); return control; };
        const search = el("input", "tv-search");
        search.type = "search";
        search.placeholder = "agent, task, tool, model, error…";
        search.setAttribute("aria-label", "search the timeline's rows");
        field("Search", search).addEventListener("input", () => { this.filter.q = search.value; this.applyFilter(); });
        const select = (name, text, options) => {
          const sel = el("select", "tv-filter tv-f-" + name);
          sel.setAttribute("aria-label", "show only rows of this " + name);
          for (const [value, shown] of options) { const o = el("option", "", shown); o.value = value; sel.append(o); }
          field(text, sel).addEventListener("change", () => { this.filter[name] = sel.value; this.applyFilter(); });
          return sel;
        };
        this.agentSelect = select("agent", "Agent", [["", "all agents"]]);
        select("kind", "Kind", [["", "all kinds"], ["llm", "model calls"], ["tool", "tool calls"], ["delegation", "waits on workers"]]);
        const statuses = [["", "any status"], ["ok", "ok"], ["failed", "failed or unfinished"], ["limit", "stopped by a limit"]];
        if (!this.options.ended) statuses.push(["running", "running"]);  // a trace file has nothing running
        select("status", "Status", statuses);
        const all = el("button", "tv-button tv-collapse-all", "Collapse all");
        all.type = "button";
        all.addEventListener("click", () => {
          const open = this.rows.some((r) => r.hasChildren && !this.collapsed.has(r.key));
          this.collapsed = open ? new Set(this.rows.filter((r) => r.hasChildren).map((r) => r.key)) : new Set();
          this.applyFilter();
        });
        tools.append(all);
        this.collapseAll = all;
        this.shown = el("span", "tv-shown");
        this.shown.setAttribute("aria-live", "polite");
        tools.append(this.shown);
        this.tools = tools;
      }
      const names = [...new Set(agents.map((a) => a.name))].sort();
      if (names.join("\n") !== this.agentNames) {  // new agents while live: the list grows
        this.agentNames = names.join("\n");
        const sel = this.agentSelect;
        sel.replaceChildren(sel.options[0]);
        for (const n of names) { const o = el("option", "", n); o.value = n; sel.append(o); }
        sel.value = names.includes(this.filter.agent) ? this.filter.agent : "";
        this.filter.agent = sel.value;
      }
      return this.tools;
    }

    // Shows the rows the search, filters and collapsed rows leave; says how many.
    applyFilter() {
      const f = this.filter, q = f.q.trim().toLowerCase();
      let shown = 0;
      for (const r of this.rows) {
        let ok = (!q || r.text.includes(q)) && (!f.agent || r.name === f.agent) && (!f.kind || r.kinds.has(f.kind))
          && (!f.status || r.statuses.has(f.status));
        if (ok && !q) for (const a of r.ancestors) if (this.collapsed.has(a)) { ok = false; break; }  // a search looks inside
        if (r.row.hidden === ok) r.row.hidden = !ok;
        if (r.toggle) {
          r.toggle.hidden = !r.hasChildren;
          const closed = this.collapsed.has(r.key);
          r.toggle.textContent = closed ? "▸" : "▾";
          r.toggle.setAttribute("aria-expanded", String(!closed));
          r.toggle.setAttribute("aria-label", (closed ? "expand " : "collapse ") + "the " + r.below + " invocation"
            + (r.below === 1 ? "" : "s") + " under " + r.who);
        }
        if (ok) shown++;
      }
      const grid = this.root.querySelector(".tv-grid");
      if (grid) grid.dataset.kind = f.kind;
      if (this.shown) this.shown.textContent = shown + " of " + this.rows.length + " rows";
      if (this.collapseAll) this.collapseAll.hidden = !this.rows.some((r) => r.hasChildren);
      if (this.collapseAll) this.collapseAll.textContent = this.rows.some((r) => r.hasChildren && !this.collapsed.has(r.key)) ? "Collapse all" : "Expand all";
      this.rove();
    }

    // The timeline is one Tab stop (a roving tabindex): the row or bar last reached there (else the first shown
    // row) takes Tab; Left/Right (Home/End) move along a row's toggle, label and bars, Up/Down to the row above or
    // below (a label to a label, an agent bar to an agent bar, another bar to the one nearest in time).
    rovingItems(row) { return [...row.querySelectorAll(ROVING)].filter((e) => !e.hidden); }

    rove(target) {
      const grid = this.root.querySelector(".tv-grid");
      if (!grid) return;
      let next = target || null;
      if (!next && this.roving) {
        const [cls, key] = this.roving;
        next = [...grid.querySelectorAll("." + cls)].find((e) => (e.dataset.key || e.dataset.agentKey) === key
          && !e.hidden && !e.closest(".tv-row").hidden) || null;
      }
      if (!next) {
        const first = [...grid.querySelectorAll(".tv-row:not(.tv-axis)")].find((r) => !r.hidden);
        next = first ? first.querySelector(".tv-who[data-key]") : null;
      }
      for (const e of grid.querySelectorAll(ROVING)) if (e !== next && e.tabIndex !== -1) e.tabIndex = -1;
      if (next) {
        next.tabIndex = 0;
        this.roving = [["tv-who", "tv-toggle"].find((c) => next.classList.contains(c)) || "tv-bar", next.dataset.key || next.dataset.agentKey];
      }
    }

    // The item of ``row`` under (or over) ``item``: a label for a label or toggle, an agent bar for an agent bar,
    // else the bar nearest in time.
    below(item, row) {
      if (!item.classList.contains("tv-bar")) return row.querySelector(".tv-who[data-key]");
      if (item.classList.contains("tv-agent")) return row.querySelector(".tv-bar.tv-agent[role=button]");
      const x = (e) => { const r = e.getBoundingClientRect(); return r.left + r.width / 2; };
      const at = x(item), bars = [...row.querySelectorAll(".tv-bar[role=button]")];
      return bars.reduce((a, b) => (Math.abs(x(b) - at) < Math.abs(x(a) - at) ? b : a), bars[0]) || null;
    }

    onGridKey(e) {
      if (!["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "Home", "End"].includes(e.key)) return;
      const item = e.target.closest && e.target.closest(ROVING);
      const row = item && item.closest(".tv-row");
      if (!row) return;
      e.preventDefault();
      const items = this.rovingItems(row), i = items.indexOf(item);
      let next;
      if (e.key === "ArrowRight") next = items[i + 1];
      else if (e.key === "ArrowLeft") next = items[i - 1];
      else if (e.key === "Home") next = items[0];
      else if (e.key === "End") next = items[items.length - 1];
      else {
        const rows = [...row.parentNode.querySelectorAll(".tv-row:not(.tv-axis)")].filter((r) => !r.hidden);
        const other = rows[rows.indexOf(row) + (e.key === "ArrowDown" ? 1 : -1)];
        next = other ? this.below(item, other) : null;
      }
      if (next) { this.rove(next); next.focus(); }
    }

    toggle(key) {
      if (this.collapsed.has(key)) this.collapsed.delete(key); else this.collapsed.add(key);
      this.applyFilter();
    }

    timeline(agents) {
      const m = this.model;
      const box = el("section", "tv-timeline");
      box.append(el("h3", "", "Timeline"));
      const legend = el("p", "tv-legend");
      for (const [cls, label] of [["agent", "agent"], ["llm", "model call"], ["tool", "tool call"], ["wait", "waiting on workers"],
                                  ["retry", "retry (and its back-off)"], ["critical", "critical path"], ["failed", "failed ✗"], ["limit", "limit reached"],
                                  ...([...m.spans.values()].some((n) => n.replayed) ? [["replayed", "replayed from the journal (not paid again)"]] : []),
                                  ...([...m.spans.values()].some((n) => n.notes.some((x) => x.kind === "llm_wait")) ? [["ratewait", "waiting for a rate limit"]] : []),
                                  ...([...m.spans.values()].some((n) => fallbackOf(n)) ? [["fallback", "answered by a fallback model"]] : [])]) {
        const key = el("span", "tv-key");
        key.append(el("i", "tv-swatch tv-sw-" + cls), document.createTextNode(label));
        legend.append(key);
      }
      for (const [kind, label] of [["memory_recall", "memory recalled"], ["memory_save", "memory saved"]]) {  // when there are
        if (![...m.spans.values()].some((n) => n.notes.some((x) => x.kind === kind))) continue;
        const key = el("span", "tv-key");
        key.append(el("i", "tv-swatch tv-sw-memory tv-sw-" + kind.replace("_", "-")), document.createTextNode(label));
        legend.append(key);
      }
      box.append(legend);
      this.rows = [];
      if (!agents.length) {
        const over = !this.model.count && this.result && this.result.status && this.result.status !== "running";
        box.append(el("p", "tv-empty", over ? "no events of this run to draw (they were not kept)" : "no agent has started yet"));
        return box;
      }
      box.append(this.toolbar(agents));
      // Live, the time drawn grows with the clock: every position is redrawn on each tick (rescale first).
      let span = 1;
      this.ticking(() => { span = Math.max(m.tEnd - m.t0, 1e-6); });
      const x = (t) => ((t - m.t0) / span) * 100;
      // About how wide a track is, in pixels (the layout's sizes, view.css): a bar says its duration if it fits.
      const width = this.width || 1200, rem = 16;
      const labelPx = (width >= 62 * rem ? 22 : width >= 40 * rem ? 17 : width >= 30 * rem ? 12 : 9) * rem;  // view.css
      const trackPx = Math.max(60, width - (width >= 62 * rem ? 27 * rem : 0) - labelPx - 1.5 * rem);
      const place = (e, a, b, textual) => this.ticking(() => {
        const end = typeof b === "function" ? b() : b;
        const w = Math.max(x(end) - x(a), 0);
        e.style.left = x(a) + "%";
        e.style.width = w + "%";
        if (textual) {
          const said = seconds(end - a);
          const fits = (w / 100) * trackPx >= said.length * 6.2 + 8;
          if ((e.textContent === said) !== fits) e.textContent = fits ? said : "";
        }
      });
      const at = (e, t) => this.ticking(() => { e.style.left = x(t) + "%"; });
      const grid = el("div", "tv-grid");
      grid.setAttribute("aria-label", "timeline: one row per agent invocation");
      const axis = el("div", "tv-row tv-axis");
      axis.setAttribute("aria-hidden", "true");
      const axisTrack = el("div", "tv-track");
      const ticks = Math.max(1, Math.min(10, Math.floor(trackPx / 70)));  // a label per 70 px: none overlaps
      this.ticking(() => {  // round steps (1, 2, 5 × 10^n seconds), as many as fit
        const raw = span / ticks, p10 = Math.pow(10, Math.floor(Math.log10(raw)));
        const step = [1, 2, 5, 10].map((k) => k * p10).find((v) => v >= raw) || raw;
        const parts = [];
        for (let t = 0; t <= span + 1e-9; t += step) {
          const tick = el("span", "tv-tick", seconds(t));
          tick.style.left = (t / span) * 100 + "%";
          parts.push(tick);
        }
        axisTrack.replaceChildren(...parts);
        grid.style.setProperty("--grid-step", (step / span) * 100 + "%");
      });
      axis.append(el("div", "tv-label", "agent · task"), axisTrack);
      grid.append(axis);
      const index = new Map();  // agent key -> its row entry
      for (const agent of agents) {
        const row = el("div", "tv-row");
        row.dataset.agent = agent.name;
        row.dataset.path = agent.path.join("/");
        const who = this.names.get(agent.key);
        const entry = { row, key: agent.key, name: agent.name, who, kinds: new Set(), statuses: new Set(), ancestors: [],
                        parent: null, below: 0, hasChildren: false, toggle: null, text: "" };
        for (let p = agent.parent; p; p = p.parent) {
          if (p.kind === "agent") { entry.parent = index.get(p.key) || null; break; }
        }
        for (let e = entry.parent; e; e = e.parent) { entry.ancestors.push(e.key); e.below++; e.hasChildren = true; }
        index.set(agent.key, entry);
        this.rows.push(entry);
        const status = this.statusOf(agent);
        entry.statuses.add(statusClass(status));
        const task = preview(agent.data.task, 60);
        const label = el("div", "tv-label");
        const delegates = agent.children.some((c) => c.kind === "delegation");
        label.style.paddingLeft = (0.2 + agent.depth * 0.9 + (delegates ? 0 : 1.45)) + "em";  // names line up
        if (delegates) {  // beside the row's button, not in it
          const toggle = el("button", "tv-toggle", "▾");
          toggle.type = "button";
          toggle.tabIndex = -1;  // one of the timeline's roving items
          toggle.dataset.agentKey = agent.key;
          entry.toggle = toggle;
          label.append(toggle);
        }
        const button = el("div", "tv-who");
        button.append(el("span", "tv-name", who));
        if (task) button.append(el("span", "tv-preview", "· " + task));
        const meta = el("span", "tv-meta");
        const [inTok, outTok] = ioTokens(agent);
        const word = statusClass(status) === "ok" ? "" : status + " · ";
        this.ticking(() => {
          meta.textContent = word + seconds(m.endOf(agent) - agent.start) + " · " + tokensOf(agent) + " tok (" + inTok + " in, " + outTok + " out)";
        }, agent.end === null);
        button.append(meta);
        label.append(button);
        button.dataset.key = agent.key;
        button.tabIndex = -1;  // the timeline is one Tab stop: rove()
        button.setAttribute("role", "button");
        const track = el("div", "tv-track");
        const bar = this.bar(agent, "agent");
        place(bar, agent.start, () => m.endOf(agent), true);
        track.append(bar);
        const words = [agent.name, who, String(agent.data.task || ""), agent.path.join(" "), status, agent.error || ""];
        for (const c of agent.children) {
          if (c.kind !== "llm" && c.kind !== "tool" && c.kind !== "delegation") continue;
          entry.kinds.add(c.kind);
          const st = this.statusOf(c);
          entry.statuses.add(statusClass(st));
          words.push(c.name, c.error || "", st);
          const seg = this.bar(c, c.kind === "delegation" ? "wait" : c.kind);
          place(seg, c.start, () => m.endOf(c), c.kind !== "delegation");
          track.append(seg);
          if (fallbackOf(c)) {  // the call a fallback answered: its bar outlined, a mark at its start
            seg.classList.add("tv-fallback");
            const mark = this.mark({ kind: "fallback", data: { fallback: fallbackOf(c) } }, c, "fallback");
            at(mark, c.start);
            track.append(mark);
            words.push(fallbackOf(c));
          }
          for (const n of c.notes) {
            if (n.kind === "llm_wait") {  // the wait for the rate limit, over the call's bar: a wait, not model time
              const wait = el("div", "tv-bar tv-ratewait");
              place(wait, n.ts, () => Math.min(n.ts + (Number(n.data.seconds) || 0), m.endOf(c)));
              wait.dataset.key = c.key;
              wait.title = "waiting " + seconds(Number(n.data.seconds) || 0) + " for " + rateLimitOf(n.data) + ": not model time";
              track.append(wait);
              continue;
            }
            if (n.kind !== "llm_retry") continue;
            const pause = el("div", "tv-bar tv-backoff");  // the wait before the next attempt
            place(pause, n.ts, () => Math.min(n.ts + (Number(n.data.delay_s) || 0), m.tEnd));
            pause.dataset.key = c.key;
            pause.title = "waiting " + seconds(Number(n.data.delay_s) || 0) + " before retrying";
            const mark = this.mark(n, c, "retry");
            at(mark, n.ts);
            track.append(pause, mark);
          }
        }
        agent.notes.forEach((n, index) => {
          if (MEMORY.has(n.kind)) {  // what it recalled or saved, where it did: a point on its row, its details on click
            const mark = this.mark(n, agent, "memory");
            mark.classList.add("tv-mark-" + n.kind.replace("_", "-"));
            if (n.kind === "memory_save" && n.data.status === "refused") mark.classList.add("tv-mark-memory-refused");
            mark.dataset.note = String(index);
            at(mark, n.ts);
            track.append(mark);
            words.push(...listOf(n.data.ids).map(String), n.data.id ? String(n.data.id) : "");  // found by a memory's id
            return;
          }
          const level = noteLevel(n);
          if (level === "info") return;
          const mark = this.mark(n, agent, level);
          at(mark, n.ts);
          track.append(mark);
        });
        entry.text = words.join("\n").toLowerCase();
        row.append(label, track);
        grid.append(row);
      }
      grid.addEventListener("keydown", (e) => this.onGridKey(e));
      grid.addEventListener("focusin", (e) => {
        const item = e.target.closest && e.target.closest(ROVING);
        if (item && grid.contains(item) && item.tabIndex !== 0) this.rove(item);
      });
      box.append(grid);
      return box;
    }

    // The shared workspace over time: each entry's writes in order (who, version before → after), refusals
    // marked with their reason, and the value each write left only when the trace carries content.
    workspace() {
      const writes = this.model.writes;
      if (!writes.length) return null;
      const box = el("section", "tv-workspace");
      const refused = writes.filter((w) => w.data.status === "refused").length;
      const ops = writes.filter((w) => w.kind === "board_op").length, change = ops ? " change" : " write";
      box.append(el("h3", "", "Workspace (" + writes.length + change + (writes.length === 1 ? "" : "s")
        + (ops ? ", " + ops + " on a board" : "") + (refused ? ", " + refused + " refused" : "") + ")"));
      const values = this.options.content !== false && writes.some((w) => Object.prototype.hasOwnProperty.call(w.data, "value_after"));
      if (!values) box.append(el("p", "tv-empty", "Values were not captured for this run (record it with --trace-content to see them)."));
      const byEntry = new Map();
      for (const w of writes) {
        const name = String(w.data.entry);
        if (!byEntry.has(name)) byEntry.set(name, []);
        byEntry.get(name).push(w);
      }
      const t0 = this.model.t0;
      for (const [name, list] of byEntry) {
        const entry = el("div", "tv-ws-entry");
        entry.dataset.entry = name;
        const last = list.filter((w) => w.data.status === "applied").pop();
        const head = el("h4", "tv-ws-name");
        head.append(el("span", "", iso(name)), el("span", "tv-meta", " " + (list[0].data.rule || (list[0].kind === "board_op" ? "board" : ""))
          + " · version " + (last ? last.data.version_after : list[0].data.version_before)));
        entry.append(head);
        const ol = el("ol", "tv-ws-writes");
        for (const w of list) {
          const d = w.data, status = String(d.status || "");
          const li = el("li", "tv-ws-write tv-ws-" + (status === "refused" ? "refused" : "applied"));
          li.dataset.status = status;
          li.dataset.kind = w.kind;
          if (d.reason) li.dataset.reason = String(d.reason);
          const who = iso(w.path[w.path.length - 1] || (d.step ? "workflow" : "?")) + (d.step ? " (step " + iso(d.step) + ")" : "");
          const change = d.version_after !== d.version_before ? "v" + d.version_before + " → v" + d.version_after
            : "v" + d.version_before + (status === "refused" ? "" : " (unchanged)");
          const op = w.kind === "board_op" ? (d.op || "") + (d.task_id ? " " + iso(d.task_id) : "") + " · " : "";  // post t3 · ...
          const line = el("span", "tv-ws-line", "+" + seconds(w.ts - t0) + " · " + who + " · " + op + change + " · " + status
            + (d.reason ? " (" + d.reason + ")" : "") + (d.replayed ? " · replayed" : ""));
          li.append(line);
          if (d.message && (status === "refused" || w.kind === "board_op")) li.append(el("div", "tv-ws-message", d.message));
          if (values && status !== "refused" && Object.prototype.hasOwnProperty.call(d, "value_after")) {  // what it left
            const shown = JSON.stringify(d.value_after === undefined ? null : d.value_after, null, 2);  // as JSON: "1" is not 1
            li.append(el("pre", "tv-pre tv-ws-value", shown.length > 4000 ? shown.slice(0, 4000) + "…" : shown));
          }
          if (this.model.spans.has(w.spanKey)) {  // the list item stays a list item; its line is the button
            li.dataset.key = w.spanKey;
            line.dataset.key = w.spanKey; line.tabIndex = 0; line.setAttribute("role", "button");
          }
          ol.append(li);
        }
        entry.append(ol);
        box.append(entry);
      }
      return box;
    }

    bar(node, cls) {
      const status = this.statusOf(node);
      const bar = el("div", "tv-bar tv-" + cls + " tv-" + statusClass(status));
      if (this.critical.has(node.key)) bar.classList.add("tv-critical");
      if (node.replayed) bar.classList.add("tv-replayed");  // answered from the journal: drawn hatched, its word "replayed"
      bar.dataset.key = node.key;
      bar.dataset.kind = node.kind;
      bar.dataset.status = status;
      bar.dataset.start = String(node.start);
      bar.tabIndex = -1;  // reached with the arrow keys from the timeline's one Tab stop (rove())
      bar.setAttribute("role", "button");
      // Its name says what and how it ended; its tooltip (with the duration) is written when the pointer or the
      // focus first comes to it (tooltip()): a thousand workers' bars are drawn without a thousand strings.
      bar.setAttribute("aria-label", this.what(node) + " · " + status + (fallbackOf(node) ? " · fallback: " + fallbackOf(node) : ""));
      if (node.end !== null) bar.dataset.end = String(node.end);
      else this.ticking(() => { bar.dataset.end = String(this.model.endOf(node)); });
      return bar;
    }

    what(node) {
      return (node.kind === "delegation" ? "waiting on " : node.kind === "agent" ? "agent " : node.kind === "llm" ? "model call " : "tool ")
        + iso(node.kind === "llm" ? answeredBy(node) : node.name);
    }

    // A bar's tooltip: what, how long (so far, while it runs) and its status.
    tooltip(bar) {
      const node = this.model.spans.get(bar.dataset.key);
      if (node && bar.classList.contains("tv-who")) {  // a row: its path and its whole task
        bar.title = node.path.map(iso).join(" → ") + (node.data.task ? "\n" + text(node.data.task) : "");  // the whole task
        return;
      }
      if (!node || !bar.classList.contains("tv-bar") || bar.classList.contains("tv-backoff") || bar.classList.contains("tv-ratewait")) return;
      const waited = node.kind === "llm" ? waitedOf(node) : 0, took = this.model.endOf(node) - node.start;
      bar.title = this.what(node) + " · " + (waited ? seconds(Math.max(0, took - waited)) + " model time, " + seconds(waited) + " waiting for its rate limit"
        : seconds(took)) + " · " + this.statusOf(node) + (fallbackOf(node) ? "\nfallback: " + fallbackOf(node) : "");
    }

    mark(note, node, level) {
      const mark = el("div", "tv-mark tv-mark-" + level);
      mark.dataset.key = node.key;
      mark.dataset.level = level;
      mark.title = noteText(note);
      mark.setAttribute("role", "img");  // a role that takes a name: the limit, retry or warning is read out
      mark.setAttribute("aria-label", mark.title);
      return mark;
    }

    charts(agents) {
      const box = el("section", "tv-charts");
      box.append(el("h3", "", "Tokens and cost per agent"));
      const by = new Map();
      for (const a of agents) {
        const row = by.get(a.name) || { name: a.name, input: 0, output: 0, total: 0, cost: 0, runs: 0, unknown: 0 };
        const [inTok, outTok] = ioTokens(a);
        row.runs++;
        if (usageUnknown(a)) { row.unknown++; by.set(a.name, row); continue; }  // not known: not counted as 0
        row.input += inTok; row.output += outTok; row.total += tokensOf(a); row.cost += costOf(a);
        by.set(a.name, row);
      }
      const rows = [...by.values()].sort((a, b) => b.total - a.total);
      const most = Math.max(1, ...rows.map((r) => r.input + r.output));
      const chart = el("div", "tv-chart");
      for (const r of rows) {
        const line = el("div", "tv-chart-row");
        line.dataset.agent = r.name;
        line.dataset.tokens = String(r.total);
        const bars = el("div", "tv-chart-bars");
        const i = el("div", "tv-in"), o = el("div", "tv-out");
        i.style.width = (r.input / most) * 100 + "%";
        o.style.width = (r.output / most) * 100 + "%";
        i.title = r.input + " input tokens";
        o.title = r.output + " output tokens";
        bars.append(i, o);
        line.append(el("span", "tv-chart-name", iso(r.name) + (r.runs > 1 ? " ×" + r.runs : "")), bars,
                    el("span", "tv-chart-value", r.unknown === r.runs ? "usage not reported"
                      : r.total + " tok · " + usd(r.cost) + (r.unknown ? " (+ " + r.unknown + " not reported)" : "")));
        chart.append(line);
      }
      box.append(chart, el("p", "tv-legend", "bars: input tokens (dark) and output tokens (light); each agent's own model calls"));
      return box;
    }

    tree() {
      const box = el("section", "tv-tree");
      box.append(el("h3", "", "Delegation tree"));
      const list = el("ul");
      const add = (node, parentList) => {
        if (node.kind === "agent") {
          const li = el("li", "tv-agent");
          li.dataset.agent = node.name;
          li.dataset.status = this.statusOf(node);
          const line = el("span", "tv-line " + paletted(li.dataset.status));
          line.dataset.key = node.key;
          line.tabIndex = 0;
          line.setAttribute("role", "button");
          this.ticking(() => {
            line.textContent = this.whoOf(node) + " · " + li.dataset.status + " · " + seconds(this.model.endOf(node) - node.start)
              + " · " + (usageUnknown(node) ? "usage not reported" : tokensOf(node) + " tokens · " + usd(costOf(node)));
          }, node.end === null);
          li.append(line);  // its task: on its timeline row and in its details
          parentList.append(li);
          if (node.children.some((c) => c.kind === "delegation")) {  // a list only where there are workers
            const sub = el("ul");
            li.append(sub);
            for (const c of node.children) add(c, sub);
          }
        } else if (node.kind === "delegation") {
          const worker = workerOf(node);
          if (worker) { add(worker, parentList); return; }
          const li = el("li", "tv-agent tv-refused");  // refused before the worker started
          li.dataset.agent = node.name;
          li.dataset.status = node.status;
          const line = el("span", "tv-line " + paletted(node.status), iso(node.name) + " · " + node.status + (node.error ? ": " + node.error : ""));
          line.dataset.key = node.key;
          li.append(line);
          parentList.append(li);
        } else if (node.kind === "run") for (const c of node.children) add(c, parentList);
      };
      for (const r of this.model.roots) add(r, list);
      box.append(list);
      return box;
    }

    answerText() {
      if (this.result && typeof this.result.final_text === "string" && this.result.final_text) return this.result.final_text;
      if (this.options.answer) return this.options.answer;
      const run = this.model.run;
      const top = (run ? run.children : this.model.roots).filter((c) => c.kind === "agent");
      const last = top[top.length - 1];
      if (!last) return null;
      const calls = last.children.filter((c) => c.kind === "llm" && c.io && c.io.reply && c.io.reply.text);
      return calls.length ? calls[calls.length - 1].io.reply.text : null;
    }

    answer() {
      const value = this.answerText();
      if (!value) return null;
      const box = el("section", "tv-answer");
      box.append(el("h3", "", "Answer"));
      const body = el("div", "tv-markdown");
      body.id = "tv-answer";
      global.TeamrunMarkdown.render(body, value);
      box.append(body);
      return box;
    }

    detailsOf(node) {
      const m = this.model;
      const out = [];
      const head = el("h3", "", (node.kind === "llm" ? "model call " : node.kind === "delegation" ? "delegation to " : node.kind + " ")
        + iso(node.kind === "llm" ? answeredBy(node) : node.name));
      const close = el("button", "tv-close", "×");
      close.type = "button";
      close.setAttribute("aria-label", "close the details (Escape)");
      close.onclick = (e) => { e.stopPropagation(); this.close(); };
      head.append(close);
      out.push(head);
      const facts = el("dl", "tv-facts");
      const fact = (k, v) => { if (v !== undefined && v !== null && v !== "") facts.append(el("dt", "", k), el("dd", "", v)); };
      fact("agent", node.path.map(iso).join(" → "));
      fact("status", this.statusOf(node));
      fact("start", "+" + seconds(node.start - m.t0));
      fact("duration", seconds(m.endOf(node) - node.start));
      const waited = node.kind === "llm" ? waitedOf(node) : 0;
      if (waited) {
        fact("rate-limit wait", seconds(waited) + " (not model time)");
        fact("model time", seconds(Math.max(0, m.endOf(node) - node.start - waited)));
      }
      if (node.kind === "llm") {
        fact("answered by", answeredBy(node));
        if (answeredBy(node) !== node.name) fact("asked first", node.name);
        fact("fallback", fallbackOf(node));
      }
      if (node.usage && node.usage.total_tokens !== undefined) {
        fact("tokens", node.usage.total_tokens + " (" + inOut(node.usage.input_tokens || 0, node.usage.cached_tokens || 0,
          node.usage.output_tokens || 0, true) + ")"
          + (node.replayed ? " · replayed from the journal: paid in an earlier part, not again" : ""));
      }
      if (node.cost) fact("cost", usd(node.cost) + (node.replayed ? " (not paid again)" : ""));
      fact("critical path", this.critical.has(node.key) ? "yes" : "");
      for (const [k, v] of Object.entries(node.data)) {
        if (["task", "input"].includes(k) || (node.kind === "llm" && ["model", "fallback", "waited_s"].includes(k))) continue;
        fact(k.replace(/_/g, " "), Array.isArray(v) ? v.join(", ") : typeof v === "object" ? JSON.stringify(v) : String(v));
      }
      fact("error", node.error);
      out.push(facts);
      if (node.data.task) out.push(el("h4", "", "task"), el("pre", "tv-pre", node.data.task));
      for (const n of node.notes) if (!MEMORY.has(n.kind)) out.push(el("p", "tv-problem tv-" + noteLevel(n), noteText(n)));
      out.push(...this.memoryOf(node));
      if (node.kind === "llm") out.push(...this.messages(node));
      if (node.kind === "tool") out.push(...this.toolIO(node));
      out.push(...this.rawOf(node));
      return out;
    }

    // What an invocation recalled and saved, in order: when, how (before its turn or memory_search), each memory's
    // id and score, and the facts (and the query) only when the trace carries content.
    memoryOf(node) {
      const notes = node.notes.map((n, index) => [n, index]).filter(([n]) => MEMORY.has(n.kind));
      if (!notes.length) return [];
      const content = this.options.content !== false;  // a trace that says it has none: nothing of it is shown
      const list = el("ol", "tv-memory");
      for (const [n, index] of notes) {
        const d = n.data || {};
        const li = el("li", "tv-memory-item");
        li.dataset.kind = n.kind;
        li.dataset.note = String(index);
        const when = "+" + seconds(n.ts - this.model.t0) + " · ";
        const messages = n.kind === "memory_recall" && d.how === "messages";  // earlier threads' messages, not facts
        const missing = (many) => el("p", "tv-empty", d.forgotten  // redacted by forget, else recorded without content
          ? "Forgotten (teamrun memory forget): " + (messages ? "its messages are" : many ? "its facts are" : "its fact is")
            + " not kept."
          : (messages ? "Messages were" : many ? "Facts were" : "The fact was")
            + " not captured for this run (record it with --trace-content to see " + (many ? "them" : "it") + ").");
        if (n.kind === "memory_recall") {
          const ids = listOf(d.ids).map(String), scores = listOf(d.scores), facts = content ? d.facts : undefined;
          li.dataset.how = String(d.how || "");
          const how = d.how === "search" ? "memory_search · "
            : messages ? "earlier threads' messages before its turn · " : "recall before its turn · ";
          const count = messages ? ids.length + (ids.length === 1 ? " message" : " messages") : memories(ids.length);
          li.append(el("div", "tv-memory-line", when + how
            + (ids.length ? count : d.how === "search" ? "nothing found" : "nothing recalled")
            + (d.replayed ? " · replayed from the journal" : "")));
          if (content && typeof d.query === "string" && d.query) li.append(el("div", "tv-memory-query", "query: " + d.query));
          const found = el("ol", "tv-recalled-list");
          ids.forEach((id, i) => {
            const item = el("li", "tv-recalled");
            item.append(el("span", "tv-memory-id", id), el("span", "tv-memory-score", "score " + score(scores[i])));
            if (Array.isArray(facts) && typeof facts[i] === "string") item.append(el("div", "tv-memory-fact", facts[i]));
            found.append(item);
          });
          if (ids.length) li.append(found);
          if (ids.length && !Array.isArray(facts)) li.append(missing(true));
        } else {
          li.dataset.status = String(d.status || "");
          const id = d.id === undefined || d.id === null ? "" : String(d.id);
          li.append(el("div", "tv-memory-line", when + (d.status === "refused" ? "refused: " + (d.reason || "")
            : d.status === "known" ? "already known: " + id + " (one memory)" : "saved " + id + " (new)")));
          if (content && typeof d.fact === "string") li.append(el("div", "tv-memory-fact", d.fact));
          else li.append(missing(false));
        }
        list.append(li);
      }
      return [el("h4", "", "memory"), list];
    }

    // The span's event lines as they were recorded (start, end, notes, messages), and a button to copy them.
    rawOf(node) {
      let shown = JSON.stringify(node.raw || [], null, 2);
      const whole = shown;
      if (shown.length > 200000) shown = shown.slice(0, 200000) + "\n… (" + (whole.length - 200000) + " more characters: Copy takes them all)";
      const head = el("h4", "tv-raw-head", "raw events (" + (node.raw || []).length + ")");
      const copy = el("button", "tv-button tv-copy", "Copy JSON");
      copy.type = "button";
      copy.setAttribute("aria-label", "copy the raw events as JSON");
      const said = el("span", "tv-copied");
      said.setAttribute("role", "status");
      head.append(copy, said);
      const pre = el("pre", "tv-pre tv-raw", shown);
      pre.tabIndex = 0;
      pre.setAttribute("aria-label", "raw events as JSON");
      copy.addEventListener("click", (e) => { e.stopPropagation(); copyText(whole, pre, said); });
      return [head, pre];
    }

    // An eval case's view: what the case asked, the answer, and each check's verdict, with a link back.
    evalCase() {
      const c = this.options.evalCase;
      if (!c) return null;
      const box = el("section", "tv-case");
      const title = el("h2", "tv-case-title");
      title.append(el("span", "", "eval case " + iso(c.name) + " "),
                   el("span", "tv-status " + paletted(c.passed ? "ok" : "failed"), c.passed ? "PASS" : "FAIL"));
      box.append(title);
      if (c.report) {
        const back = el("a", "tv-report-link", "← back to the eval report");
        back.href = String(c.report);  // a relative file link written by teamrun, never from the run
        const line = el("p", "");
        line.append(back);
        box.append(line);
      }
      box.append(el("h3", "", "input"), el("pre", "tv-pre tv-case-input", String(c.input || "")));
      box.append(el("h3", "", "answer"), el("pre", "tv-pre tv-case-answer", String(c.answer || "")));
      const checks = c.checks || [];
      box.append(el("h3", "", "checks (" + checks.filter((k) => k.passed).length + "/" + checks.length + " passed)"));
      const list = el("ul", "tv-checks");
      for (const k of checks) {
        const li = el("li", "tv-check tv-check-" + (k.passed ? "pass" : "fail"));
        li.dataset.check = String(k.name);
        li.dataset.passed = String(!!k.passed);
        li.append(el("span", "tv-verdict", k.passed ? "PASS" : "FAIL"), el("span", "tv-check-name", " " + k.name));
        if (k.detail) li.append(el("span", "tv-check-detail", ": " + k.detail));
        list.append(li);
      }
      if (!checks.length) list.append(el("li", "tv-empty", "this case has no checks"));
      box.append(list);
      return box;
    }

    messages(node) {
      if (!node.io) return [el("p", "tv-empty", "Messages were not captured for this run (record it with --trace-content to see them).")];
      const out = [el("h4", "", "messages sent (new in this call)")];
      const list = el("ol", "tv-messages");
      for (const msg of node.io.new_messages || []) {
        const li = el("li", "tv-msg tv-role-" + String(msg.role || "unknown").replace(/[^a-z_]/g, ""));
        li.append(el("span", "tv-role", msg.role + (msg.name ? " (" + iso(msg.name) + ")" : "")));
        li.append(el("pre", "tv-pre", typeof msg.content === "string" ? msg.content : text(msg.content)));
        if (msg.tool_calls) li.append(el("pre", "tv-pre", text(msg.tool_calls)));
        list.append(li);
      }
      out.push(list, el("h4", "", "reply"));
      const reply = node.io.reply || {};
      const li = el("div", "tv-msg tv-role-assistant");
      if (reply.text) li.append(el("pre", "tv-pre", reply.text));
      for (const call of reply.tool_calls || []) li.append(el("pre", "tv-pre tv-call", iso(call.name) + "(" + pretty(call.arguments) + ")"));
      if (!reply.text && !(reply.tool_calls || []).length) li.append(el("p", "tv-empty", "(empty)"));
      out.push(li);
      return out;
    }

    // A tool call's input is in the model reply that asked for it, its output in the next call's messages.
    toolIO(node) {
      const agent = node.parent;
      if (!agent) return [];
      const calls = agent.children.filter((c) => c.kind === "llm");
      const asking = calls.filter((c) => c.start <= node.start).pop();
      const next = calls.find((c) => c.start >= this.model.endOf(node));
      if (!asking || !asking.io) return [el("p", "tv-empty", "Tool input and output were not captured for this run (record it with --trace-content to see them).")];
      const asked = (asking.io.reply && asking.io.reply.tool_calls) || [];
      const sameName = agent.children.filter((c) => c.kind === "tool" && c.name === node.name && c.start >= asking.start
        && (!next || c.start < next.start));
      const nth = sameName.indexOf(node);
      let position = -1, seen = -1;
      for (let i = 0; i < asked.length; i++) if (asked[i].name === node.name && ++seen === nth) { position = i; break; }
      const out = [el("h4", "", "input")];
      out.push(el("pre", "tv-pre", position >= 0 ? pretty(asked[position].arguments) : "(not found in the model's reply)"));
      out.push(el("h4", "", "output"));
      const results = next && next.io ? (next.io.new_messages || []).filter((msg) => msg.role === "tool") : [];
      const result = position >= 0 ? results[position] : undefined;
      out.push(el("pre", "tv-pre", result ? text(result.content) : "(no later model call carries it)"));
      return out;
    }
  }

  function mount(root, options) { return new RunView(root, options); }

  global.TeamrunView = { mount, usd, statusClass };
})(window);
