// A team's graph (GET /v1/teams: nodes and edges, what `teamrun graph` draws) as an SVG built node by node.
// Layers: each node sits one row below the first node it is reached from (the first node on top); a node
// reached from nowhere goes in a last row. Labels are set with textContent, never as markup.
const NS = "http://www.w3.org/2000/svg";
const W = 132, H = 40, GAP_X = 16, GAP_Y = 34, PAD = 8;

function svg(tag, attrs, text) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

function short(text, n) { return text.length > n ? text.slice(0, n - 1) + "…" : text; }

function layers(graph) {
  const depth = new Map();
  const out = new Map(graph.nodes.map((n) => [n.id, []]));
  for (const e of graph.edges) if (out.has(e.from) && out.has(e.to)) out.get(e.from).push(e.to);
  if (graph.nodes.length) {
    depth.set(graph.nodes[0].id, 0);
    const queue = [graph.nodes[0].id];
    while (queue.length) {
      const id = queue.shift();
      for (const next of out.get(id)) if (!depth.has(next)) { depth.set(next, depth.get(id) + 1); queue.push(next); }
    }
  }
  const last = Math.max(0, ...depth.values()) + 1;
  const rows = [];
  for (const n of graph.nodes) {
    const d = depth.has(n.id) ? depth.get(n.id) : last;
    (rows[d] = rows[d] || []).push(n);
  }
  return rows.filter(Boolean);
}

function describe(graph) {
  const label = new Map(graph.nodes.map((n) => [n.id, n.label]));
  return graph.edges.map((e) => `${label.get(e.from)} ${e.label || "→"} ${label.get(e.to)}`).join("; ");
}

export function draw(figure, graph, name) {
  const caption = figure.querySelector("figcaption");
  figure.querySelector("svg")?.remove();
  if (!graph || !graph.nodes.length) { caption.textContent = ""; return; }
  const rows = layers(graph);
  const widest = Math.max(...rows.map((r) => r.length));
  const width = widest * W + (widest - 1) * GAP_X + 2 * PAD;
  const height = rows.length * H + (rows.length - 1) * GAP_Y + 2 * PAD;
  const place = new Map();
  rows.forEach((row, r) => {
    const rowWidth = row.length * W + (row.length - 1) * GAP_X;
    const left = (width - rowWidth) / 2;
    row.forEach((n, i) => place.set(n.id, { x: left + i * (W + GAP_X), y: PAD + r * (H + GAP_Y), n }));
  });
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img", class: "tg" });
  root.style.maxWidth = width + "px";
  root.append(svg("title", {}, `${name}: ${describe(graph) || graph.nodes.map((n) => n.label).join(", ")}`));
  const defs = svg("defs");
  const marker = svg("marker", { id: "tg-arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
  marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", class: "tg-head" }));
  defs.append(marker);
  root.append(defs);
  for (const e of graph.edges) {
    const a = place.get(e.from), b = place.get(e.to);
    if (!a || !b) continue;
    const down = b.y > a.y, same = b.y === a.y;
    const x1 = a.x + W / 2, y1 = same ? a.y + H / 2 : down ? a.y + H : a.y;
    const x2 = b.x + W / 2 + (same ? 0 : 0), y2 = same ? b.y + H / 2 : down ? b.y : b.y + H;
    const line = svg("line", { x1: same ? (b.x > a.x ? a.x + W : a.x) : x1, y1, x2: same ? (b.x > a.x ? b.x : b.x + W) : x2, y2, class: "tg-edge tg-" + e.style });
    if (e.style !== "line") line.setAttribute("marker-end", "url(#tg-arrow)");
    if (e.style === "both") line.setAttribute("marker-start", "url(#tg-arrow)");
    line.append(svg("title", {}, `${a.n.label} ${e.label || "→"} ${b.n.label}`));
    root.append(line);
  }
  for (const { x, y, n } of place.values()) {
    const g = svg("g", { class: "tg-node tg-" + n.shape });
    g.append(svg("title", {}, [n.label, ...n.details].join(" — ")));
    g.append(svg("rect", { x, y, width: W, height: H, rx: n.shape === "terminal" ? H / 2 : n.shape === "tool" ? 2 : 6 }));
    g.append(svg("text", { x: x + W / 2, y: y + (n.details.length ? 16 : 24), "text-anchor": "middle", class: "tg-label" }, short(n.label, 18)));
    if (n.details.length) {
      g.append(svg("text", { x: x + W / 2, y: y + 31, "text-anchor": "middle", class: "tg-detail" }, short(n.details.join(" · "), 24)));
    }
    root.append(g);
  }
  figure.insertBefore(root, caption);
  caption.textContent = "Graph: " + (describe(graph) || graph.nodes.map((n) => n.label).join(", "));
}

