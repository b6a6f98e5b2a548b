// How the graph view groups and colours nodes: by fusion region or by module scope cut at a depth, a group
// folded into one node, one colour per executor. Pure (tested under node).
import type { Graph, GraphEdge, GraphNode } from "../payload";

/** How the graph view groups nodes: by fusion region, or by module scope cut at a depth. */
export type Grouping = { by: "regions" } | { by: "modules"; depth: number } | { by: "none" };

/** The module path cut to ``depth`` parts; null when the scope is shallower (the node stays ungrouped). */
export function scopeAt(scope: string | null | undefined, depth: number): string | null {
  if (!scope) return null;
  const parts = scope.split(".");
  return parts.length >= depth ? parts.slice(0, depth).join(".") : null;
}

export function groupOf(n: GraphNode, g: Grouping): string | null {
  if (g.by === "regions") return n.group;
  if (g.by === "modules") return scopeAt(n.scope, g.depth);
  return null;
}

/** The deepest module path in the graph. */
export function scopeDepth(graph: Graph): number {
  let d = 0;
  for (const n of graph.nodes) if (n.scope) d = Math.max(d, n.scope.split(".").length);
  return d;
}

/** The first depth at which at least two modules hold two or more nodes each (a model's layers, typically). */
export function defaultDepth(graph: Graph): number {
  const max = scopeDepth(graph);
  for (let d = 1; d <= max; d++) {
    const count = new Map<string, number>();
    for (const n of graph.nodes) { const k = scopeAt(n.scope, d); if (k) count.set(k, (count.get(k) ?? 0) + 1); }
    if ([...count.values()].filter((c) => c >= 2).length >= 2) return d;
  }
  return Math.max(1, max);
}

/** The grouping a graph opens with: its fusion regions if it has any, else its modules, else none. */
export function defaultGrouping(graph: Graph): Grouping {
  if (graph.nodes.some((n) => n.group)) return { by: "regions" };
  if (graph.nodes.some((n) => n.scope)) return { by: "modules", depth: defaultDepth(graph) };
  return { by: "none" };
}

/** The graph with every collapsed group folded into one node ("group:<name>") and edges redirected. */
export function collapseGroups(graph: Graph, grouping: Grouping, collapsed: Set<string>): Graph {
  const byId = new Map(graph.nodes.map((n) => [n.id, n]));
  const rep = (id: string) => {
    const n = byId.get(id);
    const k = n ? groupOf(n, grouping) : null;
    return k && collapsed.has(k) ? `group:${k}` : id;
  };
  const nodes: GraphNode[] = [];
  const seen = new Map<string, GraphNode>();
  const members = new Map<string, number>();
  for (const n of graph.nodes) {
    const id = rep(n.id);
    if (id !== n.id) members.set(id, (members.get(id) ?? 0) + 1);
    if (seen.has(id)) continue;
    const node = id === n.id ? n : { id, label: "", kind: "region", executor: grouping.by === "regions" ? n.executor : null,
      source: null, group: null, scope: grouping.by === "modules" ? groupOf(n, grouping) : null };
    seen.set(id, node);
    nodes.push(node);
  }
  for (const [id, count] of members) seen.get(id)!.label = `▸ ${id.slice(6)} (${count})`;
  const edges: GraphEdge[] = [];
  const dedup = new Set<string>();
  for (const e of graph.edges) {
    const src = rep(e.src), dst = rep(e.dst);
    if (src === dst) continue;
    const key = `${src}\u0000${dst}\u0000${e.value}`;
    if (dedup.has(key)) continue;
    dedup.add(key);
    edges.push({ ...e, src, dst });
  }
  return { nodes, edges };
}

const PALETTE = ["#cfe3ff", "#d5f5d5", "#ffe2b8", "#f3d0f7", "#fff3a6", "#c9f1ee", "#ffd0d0", "#e2e2e2"];
export function executorColor(executor: string | null): string {
  if (!executor) return "#ffffff";
  let h = 0;
  for (let i = 0; i < executor.length; i++) h = (h * 31 + executor.charCodeAt(i)) >>> 0;
  return PALETTE[h % PALETTE.length];
}
