// Pure logic of the graph view (tested under node): node text and sizes, search, the change marks and
// their legend, and the links between a backward call and the forward call it comes from.
import type { Graph, GraphNode } from "../payload";

export interface Changes {
  added: string[]; removed: string[]; changed: string[];
  executor?: string[]; regrouped?: string[];
}

/** What a pass did to a node, the strongest first: added, executor (re)assigned, changed, moved into a region. */
export type Mark = "added" | "executor" | "changed" | "regrouped";

export function changeMarks(changes: Changes | null | undefined): Map<string, Mark> {
  const marks = new Map<string, Mark>();
  if (!changes) return marks;
  for (const id of changes.regrouped ?? []) marks.set(id, "regrouped");
  for (const id of changes.changed) marks.set(id, "changed");
  for (const id of changes.executor ?? []) marks.set(id, "executor");
  for (const id of changes.added) marks.set(id, "added");
  return marks;
}

/** The change legend, one entry per kind of change with its count (kinds with none are left out);
 *  ``changed`` counts every changed call, ``executor`` those of them whose executor assignment changed. */
export function changeLegend(changes: Changes | null | undefined): { kind: Mark | "removed"; count: number; text: string }[] {
  if (!changes) return [];
  const ex = changes.executor?.length ?? 0, other = changes.changed.length - ex;
  const rows: { kind: Mark | "removed"; count: number; text: string }[] = [
    { kind: "added", count: changes.added.length, text: "added" },
    { kind: "executor", count: ex, text: "executor assigned or changed" },
    { kind: "changed", count: other, text: "changed (what it computes)" },
    { kind: "regrouped", count: changes.regrouped?.length ?? 0, text: "moved into, out of or between fusion regions" },
    { kind: "removed", count: changes.removed.length, text: "removed (not drawn)" },
  ];
  return rows.filter((r) => r.count > 0);
}

/** The one-line summary of a step's changes, as the graph's legend states it. */
export function changeSummary(changes: Changes | null | undefined): string {
  if (!changes) return "first step: nothing to compare with";
  const ex = changes.executor?.length ?? 0, rg = changes.regrouped?.length ?? 0;
  const parts = [`+${changes.added.length} added`,
    `~${changes.changed.length} changed` + (ex ? ` (${ex} by executor assignment)` : ""),
    `−${changes.removed.length} removed`];
  if (rg) parts.push(`${rg} moved into or between fusion regions`);
  return "vs previous step: " + parts.join(", ");
}

/** The executors that run the graph's calls, sorted, for the colour legend. */
export function executorsIn(g: Graph): string[] {
  return [...new Set(g.nodes.map((n) => n.executor).filter((e): e is string => !!e))].sort();
}

/** The shape part of a type string ("cpu f32[4, 64]" -> "f32[4, 64]"). */
export function shortType(t: string): string {
  const m = /^\S+\s+(\S.*)$/.exec(t);
  return m && m[1].includes("[") ? m[1] : t;
}

/** The second line a node shows under its name: its first output's dtype and shape (and how many more). */
export function typeLine(n: GraphNode): string {
  const outs = n.outputs ?? [];
  if (!outs.length) return "";
  return shortType(outs[0][1]) + (outs.length > 1 ? ` +${outs.length - 1}` : "");
}

export const CHAR_W = 7.3, NODE_H2 = 36, MIN_W = 90, MAX_W = 460;

/** A node's width: enough for its whole name and type line (capped very long names wrap to the cap). */
export function nodeWidth(n: GraphNode): number {
  const chars = Math.max(n.label.length, typeLine(n).length);
  return Math.round(Math.min(MAX_W, Math.max(MIN_W, chars * CHAR_W + 16)));
}

/** Node ids whose name, op, module, id or output types contain every word of ``query`` (case-insensitive), in graph order. */
export function searchNodes(g: Graph, query: string): string[] {
  const words = query.toLowerCase().split(/\s+/).filter(Boolean);
  if (!words.length) return [];
  const out: string[] = [];
  for (const n of g.nodes) {
    const hay = [n.id, n.label, n.scope ?? "", n.executor ?? "", n.group ?? "", n.source ?? "",
      ...(n.outputs ?? []).flatMap((o) => o)].join("\u0001").toLowerCase();
    if (words.every((w) => hay.includes(w))) out.push(n.id);
  }
  return out;
}

/** The next match after ``current`` (wrapping round; the first one when current is not a match). */
export function nextMatch(matches: string[], current: string | null, step: 1 | -1 = 1): string | null {
  if (!matches.length) return null;
  const i = current === null ? -1 : matches.indexOf(current);
  if (i < 0) return step === 1 ? matches[0] : matches[matches.length - 1];
  return matches[(i + step + matches.length) % matches.length];
}

export interface Link { trace: string; id: string; label: string }

/** Where a node links across traces: a backward call to the forward call it differentiates
 *  (``derived_from``), a forward call to every backward call derived from it. */
export function crossLinks(trace: string, node: GraphNode, traces: Record<string, Graph>): Link[] {
  const out: Link[] = [];
  if (node.derived_from) {
    for (const [name, g] of Object.entries(traces)) {
      if (name === trace) continue;
      const f = g.nodes.find((m) => m.id === node.derived_from);
      if (f) out.push({ trace: name, id: f.id, label: f.label });
    }
  }
  for (const [name, g] of Object.entries(traces)) {
    if (name === trace) continue;
    for (const m of g.nodes) if (m.derived_from === node.id) out.push({ trace: name, id: m.id, label: m.label });
  }
  return out;
}

/** The details a selected node shows, as label/value rows. */
export function nodeDetails(g: Graph, n: GraphNode, opts: { mark?: Mark; declines?: [string, string][] } = {}): [string, string][] {
  const rows: [string, string][] = [["op", n.label], ["id", n.id], ["kind", n.kind]];
  const ins = g.edges.filter((e) => e.dst === n.id);
  for (const e of ins) rows.push(["input", `${e.value}: ${e.type}`]);
  for (const [name, type] of n.outputs ?? []) rows.push(["output", `${name}: ${type}`]);
  if (!n.outputs) for (const e of g.edges.filter((e) => e.src === n.id)) rows.push(["output", `${e.value}: ${e.type}`]);
  if (n.executor) rows.push(["executor", n.executor]);
  if (n.group) rows.push(["region", n.group]);
  if (n.scope) rows.push(["module", n.scope]);
  if (n.source) rows.push(["source", n.source]);
  if (n.derived_from) rows.push(["derived from", n.derived_from]);
  if (opts.mark) rows.push(["this step", MARK_TEXT[opts.mark]]);
  for (const [ex, why] of opts.declines ?? []) rows.push(["not fused", `${ex}: ${why}`]);
  return rows;
}

export const MARK_TEXT: Record<Mark, string> = {
  added: "added by this step", executor: "executor assigned or changed by this step",
  changed: "changed by this step", regrouped: "moved into, out of or between fusion regions by this step",
};
