// The Graph pane: the trace's dataflow graph; a node links to its other-trace twin (forward <-> backward).
import { graphView } from "../graph/view";
import type { Payload } from "../payload";
import { declineRows } from "../stepinfo";
import type { Pane } from "./registry";

/** Per call id: the executors that declined it and why, from every step's notes up to ``step`` (see ``declineRows``). */
export function declinesAt(p: Payload, step: number): Record<string, [string, string][]> {
  return Object.fromEntries(declineRows(p, step).map(({ id, reasons }) => [id.replace(/^b/, ""), reasons]));
}

export const graphPane: Pane = {
  id: "graph",
  title: "Graph",
  order: 30,
  needsTrace: true,
  render(step, ctx) {
    const traces = step.traces!, t = traces[ctx.trace];
    const graphs = Object.fromEntries(Object.entries(traces).map(([k, v]) => [k, v.graph]));
    const focus = ctx.state.focus;  // a node followed from the other trace: centred once
    ctx.state.focus = null;
    return graphView(t.graph, t.changes, { ...ctx.graph, trace: ctx.trace, traces: graphs, focus, declines: declinesAt(ctx.payload, step.index),
      onJump: (tr, id) => { ctx.state.focus = id; ctx.setTrace(tr); } });
  },
};
