// The Diff pane: the step's trace side by side with the previous step's (or a chosen one's), call by call by
// stable id; programs without call ids (older payloads) are aligned line by line instead.
import { callDiffView } from "../calldiff";
import { h } from "../dom";
import type { Step, Trace } from "../payload";
import { alignLines } from "../textdiff";
import type { Pane, PaneContext } from "./registry";

/** Two programs line by line, only the lines that differ when the program is long. */
function linesView(a: Trace | undefined, b: Trace): HTMLElement {
  const rows = alignLines((a?.program ?? "").split("\n"), b.program.split("\n"));
  const changed = rows.filter((r) => r.kind !== "same").length;
  const table = h("table", { class: "tl-sbs-table" });
  for (const r of rows) {
    if (r.kind === "same" && changed && rows.length > 60) continue;  // long programs: only what changed
    table.append(h("tr", { class: `tl-sbs-${r.kind}` }, h("td", { class: "tl-sbs-a" }, r.a ?? ""), h("td", { class: "tl-sbs-b" }, r.b ?? "")));
  }
  return h("div", { class: "tl-sbs" },
    h("div", { class: "tl-muted" }, changed ? `${changed} lines differ` : "the programs print the same (executor assignment shows in the graph)"),
    table);
}

function render(st: Step, ctx: PaneContext): HTMLElement {
  const p = ctx.payload, trace = ctx.trace;
  // a step can be compared with when its traces are here, or when the host can fetch them
  const usable = (x: Step | undefined) => !!x && x.index !== st.index && (!!ctx.tracesOf(x.index) || (!!ctx.load && ctx.tracesOf(x.index) === undefined && !x.error));
  const prev = [...p.steps].reverse().find((x) => x.index < st.index && usable(x))?.index;
  const against = ctx.state.against;
  const other = against !== undefined && usable(p.steps[against]) ? against : prev;
  const sel = h("select", { class: "tl-diff-against", "aria-label": "compare with step" });
  for (const x of p.steps) if (usable(x)) sel.append(h("option", { value: x.index }, `vs step ${x.index}: ${x.spec}${x.index === prev ? " (previous)" : ""}`));
  const box = h("div", { class: "tl-diff-pane" }, sel);
  const b = st.traces?.[trace];
  if (other === undefined || !b) { box.append(h("div", { class: "tl-muted" }, "(nothing to compare with: this is the first step)")); return box; }
  sel.value = String(other);
  sel.addEventListener("change", () => { ctx.state.against = Number(sel.value); ctx.repaint(); });
  const theirs = ctx.tracesOf(other);
  if (theirs === undefined) { ctx.load?.(other); box.append(h("div", { class: "tl-loading tl-muted" }, "loading…")); return box; }
  const a = theirs?.[trace];
  if (!a) box.append(h("div", { class: "tl-muted" }, `step ${other} has no ${trace} trace: every call is new`));
  if (b.calls && (!a || a.calls)) {
    box.append(callDiffView(a ?? { program: "", calls: [] }, b, { beforeName: `step ${other}: ${p.steps[other].spec}`, afterName: `step ${st.index}: ${st.spec}`,
      onSelect: (id) => ctx.selection.selectNode(id, "diff"), regionExecutor: (r) => p.regions[r]?.executor ?? null }));
  } else box.append(linesView(a, b));
  return box;
}

export const diffPane: Pane = {
  id: "diff",
  title: "Diff",
  order: 20,
  needsTrace: true,
  render,
  css: `
.thunderlab .tl-sbs-table{border-collapse:collapse;width:100%;table-layout:fixed;font:11px/1.35 var(--jp-code-font-family,ui-monospace,monospace)}
.thunderlab .tl-sbs-table td{white-space:pre;overflow:hidden;text-overflow:ellipsis;padding:0 4px;border-bottom:1px solid var(--jp-border-color3,#eee);vertical-align:top}
.thunderlab .tl-sbs-del .tl-sbs-a,.thunderlab .tl-sbs-change .tl-sbs-a{background:rgba(248,81,73,.18)}
.thunderlab .tl-sbs-add .tl-sbs-b,.thunderlab .tl-sbs-change .tl-sbs-b{background:rgba(46,160,67,.18)}
`,
};
