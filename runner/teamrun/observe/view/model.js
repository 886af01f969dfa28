// A run's span tree, from its event lines (a trace file's, or the server's event stream), and its critical
// path. No DOM here: view.js draws it. Spans nest run -> agent -> delegation -> agent (worker) -> llm / tool,
// each placed under the span its parent_span_id names (the same rule as teamrun.observe.spans).
"use strict";
(function (global) {
  const START = { run_start: "run", agent_start: "agent", delegation_start: "delegation", llm_start: "llm",
                  tool_start: "tool" };
  const END = { run_end: "run", agent_end: "agent", delegation_end: "delegation", llm_end: "llm", tool_end: "tool" };
  const POINTS = new Set(["warning", "budget", "hook", "llm_retry", "llm_wait", "llm_io", "accept", "memory_recall",
                          "memory_save"]);  // a memory line is the agent's (its span_id): a note of its invocation
  const PARENT_ORDER = ["agent", "run", "delegation"];
  const FAILED = new Set(["error", "failed", "rejected", "cancelled", "unfinished"]);
  const LIMITED = new Set(["budget_exhausted"]);

  // -- model -----------------------------------------------------------------------------------------------

  class RunModel {
    constructor() {
      this.spans = new Map();  // "kind|run:span" -> node
      this.roots = [];
      this.t0 = Infinity;
      this.t1 = -Infinity;
      this.lastOf = new Map();  // run id -> its last event's time: where its unfinished spans end
      this.now = null;  // while the run is followed live: the time now (open spans grow to it); else null
      this.count = 0;
      this.writes = [];  // workspace_write and board_op lines, in order: { ts, kind, runId, path, spanKey, data }
      // A run continued after people answered (or resumed) holds several segments in one stream, each from its
      // own run_start, whose span ids start again at s1. Spans are keyed per segment: "kind|run:span" in the
      // first, "kind|run~n:span" in the n-th after it (n = 1, 2...).
      this.segmentOf = new Map();  // run id -> its current segment's scope ("run", "run~1"...)
      this.segments = new Map();  // run id -> its segments' scopes, in order
      this.calls = new Map();  // scope -> the segment's model calls, in start order
      this.seen = new Set();  // each line's identity: a line delivered twice (a stream read again) counts once
    }

    // A line already added: the same kind, run, span and time (and, for a note, the same data). A continued
    // run's segment repeats span ids, never their times.
    duplicate(r) {
      const id = [r.kind, r.run_id, r.span_id, r.ts, POINTS.has(r.kind) && r.kind !== "llm_io" ? JSON.stringify(r.data || {}) : ""].join("|");
      if (this.seen.has(id)) return true;
      this.seen.add(id);
      return false;
    }

    // The scope a line's span ids are read in: its run's current segment (a new one from a later run_start of
    // the same span: the run continued after people answered, or was resumed).
    scopeOf(r) {
      const id = r.run_id;
      const run = this.segmentOf.has(id) ? this.spans.get("run|" + this.segmentOf.get(id) + ":" + r.span_id) : null;
      if (r.kind === "run_start" && run && r.ts > run.start) {
        const list = this.segments.get(id);
        this.segmentOf.set(id, id + "~" + list.length);
        list.push(this.segmentOf.get(id));
      } else if (!this.segmentOf.has(id)) {
        this.segmentOf.set(id, id);
        this.segments.set(id, [id]);
      }
      return this.segmentOf.get(id);
    }

    // A segment's model call answered from the run's journal, not made again: the earlier segment holds a
    // finished call of the same agent with the same usage, tool calls and finish (or its end says replayed).
    replayedCall(node, data) {
      if (data.replayed === true) return true;
      const list = this.segments.get(node.runId) || [];
      const i = list.indexOf(node.scope);
      if (i < 1 || node.status !== "ok") return false;
      const sig = callSignature(node);
      for (const prev of this.calls.get(list[i - 1]) || []) {
        if (prev.matched || prev.status !== "ok" || prev.end === null || callSignature(prev) !== sig) continue;
        prev.matched = true;
        return true;
      }
      return false;
    }

    find(key) {
      if (!key) return null;
      for (const kind of PARENT_ORDER) {
        const node = this.spans.get(kind + "|" + key);
        if (node) return node;
      }
      return null;
    }

    add(r) {
      if (!r || typeof r.kind !== "string" || typeof r.ts !== "number" || this.duplicate(r)) return;
      this.count++;
      this.t0 = Math.min(this.t0, r.ts);
      this.t1 = Math.max(this.t1, r.ts);
      const scope = this.scopeOf(r);
      this.lastOf.set(scope, Math.max(this.lastOf.has(scope) ? this.lastOf.get(scope) : -Infinity, r.ts));
      const key = scope + ":" + r.span_id;
      const parentKey = r.parent_span_id ? scope + ":" + r.parent_span_id : null;
      const data = r.data || {};
      if (START[r.kind] && !this.spans.has(START[r.kind] + "|" + key)) {
        const kind = START[r.kind];
        const parent = kind === "agent" && this.spans.has("delegation|" + key)
          ? this.spans.get("delegation|" + key) : this.find(parentKey);  // old traces: a worker shared its id
        const node = {
          kind, key: kind + "|" + key, id: r.span_id, runId: r.run_id, scope, name: nameOf(kind, r), replayed: false,
          path: r.agent_path || [], start: r.ts, end: null, status: "running", usage: {}, cost: 0, error: null,
          data: Object.assign({}, data), notes: [], children: [], io: null, parent, raw: [r],
        };
        this.spans.set(node.key, node);
        (parent ? parent.children : this.roots).push(node);
        if (kind === "llm") {
          if (!this.calls.has(scope)) this.calls.set(scope, []);
          this.calls.get(scope).push(node);
        }
      } else if (START[r.kind]) {
        return;  // a span that started already (in this segment): nothing new
      } else if (END[r.kind]) {
        const node = this.spans.get(END[r.kind] + "|" + key);
        if (!node) return;
        node.raw.push(r);
        node.end = r.ts;
        node.status = String(data.status || "ok");
        if (data.usage && typeof data.usage === "object") node.usage = data.usage;
        if (typeof data.cost === "number") node.cost = data.cost;
        if (data.error) node.error = String(data.error);
        for (const [k, v] of Object.entries(data)) if (!["status", "usage", "cost", "error"].includes(k)) node.data[k] = v;
        if (node.kind === "llm") node.replayed = this.replayedCall(node, data);
      } else if (r.kind === "workspace_write" || r.kind === "board_op") {  // a board's tasks change as a write does
        this.writes.push({ ts: r.ts, kind: r.kind, runId: r.run_id, scope, path: r.agent_path || [], spanKey: "tool|" + key, data });
      } else if (POINTS.has(r.kind)) {
        let owner = (r.kind === "llm_retry" || r.kind === "llm_wait" || r.kind === "llm_io") ? this.spans.get("llm|" + key) : null;
        owner = owner || this.find(key) || this.find(parentKey);
        if (!owner) return;
        owner.raw.push(r);
        if (r.kind === "llm_io") owner.io = data;
        else owner.notes.push({ kind: r.kind, ts: r.ts, data });
      }
    }

    get run() { return this.roots.find((n) => n.kind === "run") || null; }

    get runs() { return this.roots.filter((n) => n.kind === "run"); }

    // The run a span belongs to (null for spans of a trace without run_start lines).
    runOf(node) {
      let n = node;
      while (n && n.kind !== "run") n = n.parent;
      return n || null;
    }

    // Agent invocations in tree order (supervisor first, each worker under the delegation that started it).
    agents() {
      const out = [];
      const walk = (node, depth) => {
        if (node.kind === "agent") { node.depth = depth; out.push(node); depth++; }
        for (const child of node.children) if (child.kind === "agent" || child.kind === "delegation" || child.kind === "run") walk(child, depth);
      };
      for (const root of this.roots) walk(root, 0);
      return out;
    }

    // Where a span ends as drawn: its end; open, the time now while followed live, else its run's last event.
    endOf(node) {
      if (node.end !== null) return node.end;
      if (this.now !== null) return this.tEnd;
      return this.lastOf.has(node.scope) ? this.lastOf.get(node.scope) : this.t1;
    }

    // The end of the time drawn: the last event, or the time now while followed live.
    get tEnd() { return this.now !== null ? Math.max(this.now, this.t1) : this.t1; }
  }

  function nameOf(kind, r) {
    const d = r.data || {};
    if (kind === "run") return d.team || r.run_id || "run";
    if (kind === "delegation") return d.worker || "worker";
    if (kind === "llm") return d.model || "model";
    if (kind === "tool") return d.tool || "tool";
    return (r.agent_path && r.agent_path[r.agent_path.length - 1]) || "agent";
  }

  function callSignature(node) {
    const u = node.usage || {};
    return [node.path.join("/"), u.input_tokens, u.output_tokens, u.total_tokens,
            (node.data.tool_calls || []).join(","), node.data.finish_reason].join("|");
  }

  // The model calls a span's usage counts (an agent's: its own; a delegation's: its worker's and theirs)
  // that were replayed from the journal: their tokens and cost were paid in an earlier segment.
  function replayedCalls(node) {
    if (node.kind === "agent") return node.children.filter((c) => c.kind === "llm" && c.replayed);
    if (node.kind !== "delegation") return [];
    const out = [];
    const walk = (n) => { for (const c of n.children) { if (c.kind === "llm" && c.replayed) out.push(c); walk(c); } };
    walk(node);
    return out;
  }

  // Usage of a span as paid in its segment: a replayed call counts nothing, a span holding replayed calls
  // counts them out ({ input, output, total, cost, cached }; cached: of input, read from the provider's cache).
  function paidUsage(node) {
    if (node.kind === "llm" && node.replayed) return { input: 0, output: 0, total: 0, cost: 0, cached: 0 };
    const calls = node.kind === "agent" ? node.children.filter((c) => c.kind === "llm") : [];
    const sum = (list, k) => list.reduce((s, c) => s + ((c.usage && c.usage[k]) || 0), 0);
    const u = node.usage || {};
    const replayed = replayedCalls(node);
    const pick = (k) => (u[k] !== undefined ? u[k] : sum(calls, k)) - sum(replayed, k);
    const total = (u.total_tokens ? u.total_tokens : sum(calls, "total_tokens")) - sum(replayed, "total_tokens");
    let cost = node.cost || (node.kind === "agent" && node.end === null ? calls.reduce((s, c) => s + (c.cost || 0), 0) : 0);
    cost -= replayed.reduce((s, c) => s + (c.cost || 0), 0);
    return { input: Math.max(0, pick("input_tokens")), output: Math.max(0, pick("output_tokens")),
             total: Math.max(0, total), cost: Math.max(0, cost), cached: Math.max(0, pick("cached_tokens")) };
  }

  function tokensOf(node) { return paidUsage(node).total; }

  // The model that answered a call: its end's model (a model with fallbacks names the one of its list that
  // answered), else the one asked (its start's). The call's name stays the one asked.
  function answeredBy(node) { return String(node.data.model || node.name); }

  // Why a fallback answered a call ("openai/b after openai/a failed: server error (HTTP 500)"), or "".
  function fallbackOf(node) { return node.kind === "llm" && node.data.fallback ? String(node.data.fallback) : ""; }

  function costOf(node) { return paidUsage(node).cost; }

  // A remote (a2a:) worker that reported no usage: its tokens and cost are not known (shown so, never as 0).
  function usageUnknown(node) { return node.kind === "agent" && node.data.usage_known === false; }

  function workerOf(delegation) { return delegation.children.find((c) => c.kind === "agent") || null; }

  // The spans the run's end waited on: from an agent's end, back through whatever ended last before it
  // (a model call, a tool call, or a delegation and then its worker), and so on to the start.
  function criticalPath(model) {
    const marked = new Set();
    const visit = (agent) => {
      marked.add(agent.key);
      const parts = agent.children.filter((c) => c.kind === "llm" || c.kind === "tool" || c.kind === "delegation")
        .sort((a, b) => model.endOf(b) - model.endOf(a));  // latest end first: one pass, as t only goes back
      let t = model.endOf(agent) + 1e-9;
      for (const best of parts) {
        if (model.endOf(best) > t) continue;
        marked.add(best.key);
        if (best.kind === "delegation") { const w = workerOf(best); if (w) visit(w); }
        t = best.start + 1e-9;
        if (best.start <= agent.start) break;
      }
    };
    const run = model.run;
    const top = run ? run.children.filter((c) => c.kind === "agent") : model.roots.filter((c) => c.kind === "agent");
    if (top.length) visit(top.reduce((a, b) => (model.endOf(b) > model.endOf(a) ? b : a)));
    if (run) marked.add(run.key);
    return marked;
  }


  global.TeamrunRunModel = { RunModel, criticalPath, tokensOf, costOf, usageUnknown, paidUsage, workerOf, answeredBy, fallbackOf,
                             FAILED, LIMITED };
})(window);
