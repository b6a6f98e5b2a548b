// A layered layout for trace graphs that stays linear in the graph's size, with groups (fusion regions,
// module scopes) laid out as compound nodes: a group's members are laid out inside a box that holds
// only them, and the box is then placed as one node of the graph around it.
//
// Why not a layout library: benchmarks/views_graph.py measures dagre (@dagrejs/dagre 3.1), ELK layered
// (elkjs 0.12) and d3-dag (1.2, longest-path layering, two-layer decrossing, greedy coordinates) on
// trace-shaped graphs. They minimise crossings over every layer pair and route long edges through
// dummy nodes; a trace is a long chain with skip connections, so the dummies grow with depth x width and
// at 1,000 nodes each took over a minute (dagre 163 s, ELK 62-82 s, d3-dag over 300 s), far from the
// 1 s budget for 5,000 nodes. This layout places each node once (longest-path layers, one barycentre
// sweep down and one up, left-to-right packing), which keeps a 5,000-node graph well under the budget.

export interface LNode { id: string; width: number; height: number; group: string | null }
export interface LEdge { src: string; dst: string }
export interface Box { x: number; y: number; width: number; height: number }
export interface GroupBox extends Box { name: string; members: string[] }
export interface LayoutResult { nodes: Map<string, Box>; groups: GroupBox[]; width: number; height: number }
export interface LayoutOptions {
  gapX?: number; gapY?: number; pad?: number; groupPad?: number; groupTitle?: number;
  /** nodes (typically the trace's inputs) placed one layer above their first user rather than in the top row */
  floatSources?: (id: string) => boolean;
}

interface Item { id: string; width: number; height: number }

/** Longest-path layers; sources chosen by ``floatSources`` sit just above their first user. Cycles (a
 *  group whose members feed and consume another group) are broken in input order. */
function layers(items: Item[], edges: LEdge[], floatSources?: (id: string) => boolean): Map<string, number> {
  const preds = new Map<string, string[]>(), succs = new Map<string, string[]>();
  for (const it of items) { preds.set(it.id, []); succs.set(it.id, []); }
  for (const e of edges) {
    if (e.src === e.dst || !preds.has(e.src) || !preds.has(e.dst)) continue;
    preds.get(e.dst)!.push(e.src); succs.get(e.src)!.push(e.dst);
  }
  const indeg = new Map<string, number>();
  for (const it of items) indeg.set(it.id, preds.get(it.id)!.length);
  const order: string[] = [];
  const queue = items.filter((it) => indeg.get(it.id) === 0).map((it) => it.id);
  for (let i = 0; i < queue.length; i++) {
    const id = queue[i];
    order.push(id);
    for (const s of succs.get(id)!) { const d = indeg.get(s)! - 1; indeg.set(s, d); if (d === 0) queue.push(s); }
  }
  if (order.length < items.length) {
    const placed = new Set(order);
    for (const it of items) if (!placed.has(it.id)) order.push(it.id);
  }
  const layer = new Map<string, number>();
  for (const id of order) {
    let l = 0;
    for (const p of preds.get(id)!) { const lp = layer.get(p); if (lp !== undefined && lp + 1 > l) l = lp + 1; }
    layer.set(id, l);
  }
  if (floatSources) {
    for (const id of order) {
      if (preds.get(id)!.length || !floatSources(id)) continue;
      let first = Infinity;
      for (const s of succs.get(id)!) first = Math.min(first, layer.get(s)!);
      if (Number.isFinite(first) && first > 0) layer.set(id, first - 1);
    }
  }
  return layer;
}

/** Layers, ordered by one barycentre sweep down and one up, packed left to right and centred under their
 *  neighbours. Returns top-left corners relative to (0, 0) and the extent. */
function layered(items: Item[], edges: LEdge[], gapX: number, gapY: number, floatSources?: (id: string) => boolean):
  { pos: Map<string, { x: number; y: number }>; width: number; height: number } {
  const layer = layers(items, edges, floatSources);
  const byId = new Map(items.map((it) => [it.id, it]));
  const rows: string[][] = [];
  for (const it of items) (rows[layer.get(it.id)!] ??= []).push(it.id);
  for (let i = 0; i < rows.length; i++) rows[i] ??= [];
  const up = new Map<string, string[]>(), down = new Map<string, string[]>();
  for (const it of items) { up.set(it.id, []); down.set(it.id, []); }
  for (const e of edges) {
    if (e.src === e.dst || !byId.has(e.src) || !byId.has(e.dst)) continue;
    up.get(e.dst)!.push(e.src); down.get(e.src)!.push(e.dst);
  }
  const x = new Map<string, number>();  // centre x
  const place = (row: string[], want: Map<string, number>) => {
    // pack in the given order at the wanted centres, pushing right on overlap, then pull the row back left
    // by half of how far it was pushed so it stays centred on what it wants
    let right = -Infinity;
    const centres: number[] = [];
    for (const id of row) {
      const w = byId.get(id)!.width;
      let c = want.get(id) ?? 0;
      if (c - w / 2 < right + gapX) c = right + gapX + w / 2;
      centres.push(c);
      right = c + w / 2;
    }
    let shift = 0, n = 0;
    row.forEach((id, i) => { const wnt = want.get(id); if (wnt !== undefined) { shift += centres[i] - wnt; n++; } });
    const s = n ? shift / n : 0;
    row.forEach((id, i) => x.set(id, centres[i] - s));
  };
  const sweep = (rowsInOrder: string[][], nb: Map<string, string[]>) => {
    for (const row of rowsInOrder) {
      const want = new Map<string, number>();
      for (const id of row) {
        let sum = 0, n = 0;
        for (const o of nb.get(id)!) { const ox = x.get(o); if (ox !== undefined) { sum += ox; n++; } }
        if (n) want.set(id, sum / n);
      }
      const prev = new Map(row.map((id, i) => [id, i]));
      // nodes with no placed neighbour keep their place between the others
      let last = -Infinity;
      const key = new Map<string, number>();
      for (const id of row) { const w = want.get(id); if (w !== undefined) last = w; key.set(id, w ?? last); }
      row.sort((a, b) => key.get(a)! - key.get(b)! || prev.get(a)! - prev.get(b)!);
      if (want.size === 0) {
        let c = 0;
        for (const id of row) { const w = byId.get(id)!.width; want.set(id, c + w / 2); c += w + gapX; }
      } else {
        for (const id of row) if (!want.has(id)) want.set(id, key.get(id)! === -Infinity ? 0 : key.get(id)!);
      }
      place(row, want);
    }
  };
  sweep(rows, up);
  sweep([...rows].reverse(), down);
  sweep(rows, up);
  let minX = Infinity, maxX = -Infinity;
  for (const it of items) { const c = x.get(it.id)!; minX = Math.min(minX, c - it.width / 2); maxX = Math.max(maxX, c + it.width / 2); }
  if (!items.length) { minX = 0; maxX = 0; }
  const pos = new Map<string, { x: number; y: number }>();
  let y = 0;
  for (const row of rows) {
    let hmax = 0;
    for (const id of row) hmax = Math.max(hmax, byId.get(id)!.height);
    for (const id of row) { const it = byId.get(id)!; pos.set(id, { x: x.get(id)! - it.width / 2 - minX, y: y + (hmax - it.height) / 2 }); }
    y += hmax + gapY;
  }
  return { pos, width: maxX - minX, height: Math.max(0, y - gapY) };
}

/** Lays out ``nodes``: each group's members inside the group's box, the boxes and the ungrouped nodes
 *  around them. Every member's box lies inside its group's box, and group boxes never overlap. */
export function layoutCompound(nodes: LNode[], edges: LEdge[], opts: LayoutOptions = {}): LayoutResult {
  const gapX = opts.gapX ?? 18, gapY = opts.gapY ?? 34, pad = opts.pad ?? 16, gpad = opts.groupPad ?? 10, title = opts.groupTitle ?? 16;
  const groupOf = new Map<string, string | null>(nodes.map((n) => [n.id, n.group]));
  const members = new Map<string, LNode[]>();
  for (const n of nodes) if (n.group) (members.get(n.group) ?? members.set(n.group, []).get(n.group)!).push(n);
  const blockOf = (id: string) => { const g = groupOf.get(id); return g ? `\u0000${g}` : id; };
  // inner layouts
  const inner = new Map<string, ReturnType<typeof layered>>();
  const innerEdges = new Map<string, LEdge[]>();
  for (const e of edges) {
    const g = groupOf.get(e.src);
    if (g && g === groupOf.get(e.dst)) (innerEdges.get(g) ?? innerEdges.set(g, []).get(g)!).push(e);
  }
  // inside a group, calls fed only from outside sit just above their first user, not in one top row
  for (const [g, ms] of members) inner.set(g, layered(ms, innerEdges.get(g) ?? [], gapX, gapY, () => true));
  // the outer graph: ungrouped nodes and one block per group
  const items: Item[] = [];
  const seen = new Set<string>();
  for (const n of nodes) {
    const b = blockOf(n.id);
    if (seen.has(b)) continue;
    seen.add(b);
    if (n.group) { const l = inner.get(n.group)!; items.push({ id: b, width: l.width + 2 * gpad, height: l.height + 2 * gpad + title }); }
    else items.push({ id: b, width: n.width, height: n.height });
  }
  const outerEdges: LEdge[] = [];
  const dedup = new Set<string>();
  for (const e of edges) {
    const s = blockOf(e.src), d = blockOf(e.dst);
    if (s === d) continue;
    const k = `${s}\u0001${d}`;
    if (dedup.has(k)) continue;
    dedup.add(k);
    outerEdges.push({ src: s, dst: d });
  }
  const fs = opts.floatSources;
  const outer = layered(items, outerEdges, gapX * 1.5, gapY, fs ? (id) => !id.startsWith("\u0000") && fs(id) : undefined);
  const out = new Map<string, Box>();
  const groups: GroupBox[] = [];
  const size = new Map(nodes.map((n) => [n.id, n]));
  for (const it of items) {
    const p = outer.pos.get(it.id)!;
    const x0 = p.x + pad, y0 = p.y + pad;
    if (it.id.startsWith("\u0000")) {
      const g = it.id.slice(1), l = inner.get(g)!;
      groups.push({ name: g, x: x0, y: y0, width: it.width, height: it.height, members: members.get(g)!.map((m) => m.id) });
      for (const m of members.get(g)!) {
        const q = l.pos.get(m.id)!;
        out.set(m.id, { x: x0 + gpad + q.x, y: y0 + gpad + title + q.y, width: m.width, height: m.height });
      }
    } else {
      const n = size.get(it.id)!;
      out.set(it.id, { x: x0, y: y0, width: n.width, height: n.height });
    }
  }
  return { nodes: out, groups, width: outer.width + 2 * pad, height: outer.height + 2 * pad };
}
