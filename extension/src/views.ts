// Views of a thunderlab compile record ("thunderlab.record/v1"), shared by the offline report and the
// notebook widget. All text comes from user code: it is set only through textContent, createTextNode
// and setAttribute, never parsed as markup.
import { callDiffView } from "./calldiff";
import { checkPayload, MAX_PROBLEMS, SCHEMA, type Graph, type GraphEdge, type GraphNode, type Payload, type Problem, type Step } from "./payload";
import { selectionOf } from "./selection";
import { declineRows, inputsLine, notesView, programView, stepTimingsView, verificationWords, STEP_CSS } from "./stepinfo";

// the payload's types live in the bottom module; re-exported for the modules that import them from here
export type { Changes, Graph, GraphEdge, GraphNode, Payload, Region, Step, Trace, Verification } from "./payload";
export { checkPayload, checkTraces, problemText, SCHEMA, type Problem } from "./payload";
export interface RenderOptions {
  current?: number; onSelect?: (i: number) => void; onRerun?: (pipeline: string) => void;
  onRunTo?: (passName: string) => void; status?: string; error?: string;
  /** the error panel's first words when the payload cannot be drawn ("thunderlab cannot show this report") */
  cannot?: string;
}

// ---------------------------------------------------------------- pure helpers (tested under node)

const checked = new WeakMap<object, Problem[]>();
/** checkPayload, remembered per payload object: a host that repaints the same payload (stepping) checks it once. */
export function payloadProblems(p: unknown): Problem[] {
  if (p === null || typeof p !== "object") return checkPayload(p);
  let found = checked.get(p);
  if (!found) checked.set(p, (found = checkPayload(p)));
  return found;
}

export type DiffKind = "add" | "del" | "hunk" | "ctx" | "meta";

export function classifyDiffLine(line: string): DiffKind {
  if (line.startsWith("+++") || line.startsWith("---") || line.startsWith("\\")) return "meta";
  if (line.startsWith("@@")) return "hunk";
  if (line.startsWith("+")) return "add";
  if (line.startsWith("-")) return "del";
  return "ctx";
}

export type Aligned = { kind: "same" | "del" | "add" | "change"; a: string | null; b: string | null };

/** The shortest edit script between two line lists (Myers), as rows side by side; a deletion next to an insertion pairs up as a change. */
export function alignLines(a: string[], b: string[]): Aligned[] {
  const n = a.length, m = b.length, max = n + m, off = max + 1;
  const v = new Int32Array(2 * max + 3);
  const trace: Int32Array[] = [];
  let found = n === 0 && m === 0;
  for (let d = 0; d <= max && !found; d++) {
    trace.push(v.slice());
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[off + k - 1] < v[off + k + 1]) ? v[off + k + 1] : v[off + k - 1] + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) { x++; y++; }
      v[off + k] = x;
      if (x >= n && y >= m) { found = true; break; }
    }
  }
  // walk back through the saved frontiers (trace[d] is the frontier before round d)
  const ops: ("same" | "del" | "add")[] = [];
  let x = n, y = m;
  for (let d = trace.length - 1; d >= 0; d--) {
    const vd = trace[d], k = x - y;
    const pk = k === -d || (k !== d && vd[off + k - 1] < vd[off + k + 1]) ? k + 1 : k - 1;
    const px = vd[off + pk], py = px - pk;
    while (x > px && y > py) { ops.push("same"); x--; y--; }
    if (d > 0) ops.push(x === px ? "add" : "del");
    x = px; y = py;
  }
  ops.reverse();
  const rows: Aligned[] = [];
  let i = 0, j = 0;
  for (let t = 0; t < ops.length;) {
    if (ops[t] === "same") { rows.push({ kind: "same", a: a[i++], b: b[j++] }); t++; continue; }
    const dels: string[] = [], adds: string[] = [];
    while (t < ops.length && ops[t] !== "same") { if (ops[t] === "del") dels.push(a[i++]); else adds.push(b[j++]); t++; }
    for (let q = 0; q < Math.max(dels.length, adds.length); q++) {
      const l = dels[q] ?? null, r = adds[q] ?? null;
      rows.push({ kind: l !== null && r !== null ? "change" : l !== null ? "del" : "add", a: l, b: r });
    }
  }
  return rows;
}

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

export function passName(spec: string): string {
  return spec.trim().replace(/^-/, "").split("{")[0].trim();
}

/** Pass names of a pipeline text such as "dce,remat{budget=3,x=1},-cse" (disabled passes left out). */
export function pipelinePasses(pipeline: string): string[] {
  return pipeline.replace(/\{[^{}]*\}/g, "").split(",").map((x) => x.trim()).filter((x) => x && !x.startsWith("-")).map(passName);
}

const PALETTE = ["#cfe3ff", "#d5f5d5", "#ffe2b8", "#f3d0f7", "#fff3a6", "#c9f1ee", "#ffd0d0", "#e2e2e2"];
export function executorColor(executor: string | null): string {
  if (!executor) return "#ffffff";
  let h = 0;
  for (let i = 0; i < executor.length; i++) h = (h * 31 + executor.charCodeAt(i)) >>> 0;
  return PALETTE[h % PALETTE.length];
}

export const ms = (s: number) => (s * 1000).toFixed(s < 0.01 ? 3 : 1);

// ---------------------------------------------------------------- DOM building

type Attrs = Record<string, string | number>;
type Child = Node | string | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children) if (c) el.append(typeof c === "string" ? document.createTextNode(c) : c);
  return el;
}

export const CSS = `
.thunderlab{font:13px/1.4 var(--jp-ui-font-family,system-ui,sans-serif);color:var(--jp-ui-font-color1,#1d1d1f);background:var(--jp-layout-color0,#fff)}
.thunderlab h2{font-size:16px;margin:4px 0}
.thunderlab .tl-meta{color:var(--jp-ui-font-color2,#555);margin-bottom:6px}
.thunderlab .tl-error{color:#b00020;white-space:pre-wrap;font-family:ui-monospace,monospace}
.thunderlab .tl-error:empty,.thunderlab .tl-status:empty{display:none}
.thunderlab .tl-status{color:#0a5;margin:4px 0}
.thunderlab .tl-bar{display:flex;gap:6px;align-items:center;flex-wrap:wrap;margin:6px 0}
.thunderlab .tl-pipeline{font-family:var(--jp-code-font-family,ui-monospace,monospace);min-width:0;flex:1 1 180px;box-sizing:border-box;max-width:100%}
.thunderlab .tl-steps-wrap{overflow-x:auto;max-width:100%}
.thunderlab .tl-meta,.thunderlab h2,.thunderlab .tl-muted{overflow-wrap:anywhere}
.thunderlab .tl-steps td:nth-child(4){white-space:nowrap}
.thunderlab .tl-steps td:nth-child(2){overflow-wrap:anywhere;min-width:4em}
.thunderlab .tl-steps td,.thunderlab .tl-steps th{padding:2px 5px}
.thunderlab table{border-collapse:collapse}
.thunderlab td,.thunderlab th{border-bottom:1px solid var(--jp-border-color2,#e4e4e4);padding:2px 8px;text-align:left;vertical-align:top}
.thunderlab th{background:var(--jp-layout-color2,#f4f4f6)}
.thunderlab .tl-step{cursor:pointer}
.thunderlab .tl-step:hover{background:var(--jp-layout-color2,#f0f6ff)}
.thunderlab .tl-current{background:var(--jp-brand-color1,#1976d2) !important;color:var(--jp-ui-inverse-font-color1,#fff);font-weight:600}
.thunderlab .tl-current *{color:inherit !important}
.thunderlab .tl-ok{color:#0a7a2f}.thunderlab .tl-fail{color:#b00020;font-weight:600}
.thunderlab .tl-num{text-align:right;font-variant-numeric:tabular-nums}
.thunderlab .tl-tabs{display:flex;flex-wrap:wrap;gap:2px;margin-top:10px;border-bottom:1px solid var(--jp-border-color1,#ccc)}
.thunderlab .tl-tabs button{border:1px solid var(--jp-border-color1,#ccc);border-bottom:none;background:var(--jp-layout-color2,#f4f4f6);color:inherit;padding:3px 10px;cursor:pointer}
.thunderlab .tl-tabs button.tl-active{background:var(--jp-layout-color0,#fff);font-weight:600}
.thunderlab pre,.thunderlab .tl-diff{font:12px/1.35 ui-monospace,Menlo,Consolas,monospace;background:var(--jp-layout-color1,#fafafa);border:1px solid var(--jp-border-color2,#e4e4e4);padding:6px;overflow:auto;max-height:560px;margin:4px 0}
.thunderlab .tl-diff div{white-space:pre}
.thunderlab .tl-add{background:rgba(46,160,67,.18)}.thunderlab .tl-del{background:rgba(248,81,73,.18)}
.thunderlab .tl-hunk{color:#8a63d2;background:rgba(130,80,223,.12)}.thunderlab .tl-meta-line{color:#888}
.thunderlab .tl-muted{color:var(--jp-ui-font-color2,#888)}
.thunderlab .tl-problems{border:1px solid var(--jp-error-color1,#d32f2f);border-left-width:4px;border-radius:2px;background:rgba(244,67,54,.07);color:var(--jp-ui-font-color1,#1d1d1f);padding:8px 12px;margin:6px 0;overflow-wrap:break-word}
.thunderlab .tl-problems-title{font-weight:600;color:var(--jp-error-color1,#d32f2f);margin-bottom:4px}
.thunderlab .tl-problems ul{margin:4px 0;padding-left:20px}
.thunderlab .tl-problems li{margin:2px 0}
.thunderlab .tl-problems code{font-family:var(--jp-code-font-family,ui-monospace,monospace);background:var(--jp-layout-color2,#eee);padding:0 3px;border-radius:2px}
.thunderlab .tl-problems-hint{color:var(--jp-ui-font-color2,#555);margin-top:4px}
`;

/** The panel a view draws instead of a payload it cannot read: what is wrong where, one line per problem (the first few). */
export function problemsView(problems: Problem[], cannot = "thunderlab cannot show this record", name?: unknown, shown = 12): HTMLElement {
  const list = h("ul", { class: "tl-problems-list" });
  for (const p of problems.slice(0, shown)) {
    list.append(h("li", { class: "tl-problem" }, h("code", { class: "tl-problem-path" }, p.path || "the record"),
      `: expected ${p.expected}, got ${p.got}`));
  }
  const more = problems.length - shown;
  const hints = [...new Set(problems.map((p) => p.hint).filter((x): x is string => !!x))];
  return h("div", { class: "tl-problems", role: "alert" },
    h("div", { class: "tl-problems-title" }, `${cannot}${typeof name === "string" ? ` (${JSON.stringify(name)})` : ""}: ` +
      `its data does not follow the schema ${SCHEMA}`),
    list,
    more > 0 ? h("div", { class: "tl-problems-more tl-muted" }, `… and ${more}${problems.length >= MAX_PROBLEMS ? " or more" : ""} more`) : null,
    ...hints.map((x) => h("div", { class: "tl-problems-hint" }, x)));
}

/** Replace what ``root`` shows with the problems panel (with its own styles: no record view drew them yet). */
export function showProblems(root: HTMLElement, problems: Problem[], cannot?: string, name?: unknown): void {
  root.classList.add("thunderlab");
  root.removeAttribute("data-step");
  root.replaceChildren(h("style", {}, CSS), problemsView(problems, cannot, name));
}

function header(p: Payload, opts: RenderOptions): HTMLElement {
  const err = [p.error, opts.error].filter(Boolean).join("\n");
  return h("div", { class: "tl-header" },
    h("h2", {}, p.name),
    h("div", { class: "tl-meta" }, inputsLine(p)),
    h("div", { class: "tl-meta" }, `pipeline: ${p.pipeline} · total ${ms(p.compile_seconds)} ms · ${p.steps.length} steps`),
    h("div", { class: "tl-status" }, opts.status ?? ""),
    h("div", { class: "tl-error" }, err));
}

function controls(p: Payload, cur: number, opts: RenderOptions): HTMLElement {
  const bar = h("div", { class: "tl-bar" });
  const prev = h("button", { class: "tl-prev", type: "button" }, "◀ Prev");
  const next = h("button", { class: "tl-next", type: "button" }, "Next ▶");
  prev.disabled = cur <= 0;
  next.disabled = cur >= p.steps.length - 1;
  prev.addEventListener("click", () => opts.onSelect?.(cur - 1));
  next.addEventListener("click", () => opts.onSelect?.(cur + 1));
  bar.append(prev, next, h("span", { class: "tl-muted" }, `step ${cur} / ${p.steps.length - 1}`));
  if (opts.onRunTo) {
    const sel = h("select", { class: "tl-runto" }, h("option", { value: "" }, "run to…"));
    const names = [...new Set(pipelinePasses(p.pipeline).filter(Boolean))];
    for (const n of names) sel.append(h("option", { value: n }, n));
    sel.addEventListener("change", () => { if (sel.value) opts.onRunTo!(sel.value); });
    bar.append(sel);
  }
  if (opts.onRerun) {
    const input = h("input", { class: "tl-pipeline", type: "text", spellcheck: "false" });
    input.value = p.pipeline;
    const btn = h("button", { class: "tl-rerun", type: "button" }, "Re-run");
    const go = () => opts.onRerun!(input.value);
    btn.addEventListener("click", go);
    input.addEventListener("keydown", (e) => { if (e.key === "Enter") go(); });
    bar.append(input, btn);
  }
  return bar;
}

function stepTable(p: Payload, cur: number, opts: RenderOptions): HTMLElement {
  const body = h("tbody");
  const anyError = p.steps.some((st) => st.error);  // the error column only when a step failed
  for (const st of p.steps) {
    const vw = verificationWords(st.verification);
    const ver = h("span", { class: vw.cls, title: vw.title }, vw.text);
    const row = h("tr", { class: st.index === cur ? "tl-step tl-current" : "tl-step", "data-index": st.index },
      h("td", { class: "tl-num" }, String(st.index)),
      h("td", {}, st.spec),
      h("td", { class: "tl-num" }, ms(st.seconds)),
      h("td", { class: "tl-num" }, `${st.symbols_before} → ${st.symbols_after}`),
      h("td", {}, ver),
      anyError ? h("td", { class: "tl-error" }, st.error ?? "") : null);
    row.addEventListener("click", () => opts.onSelect?.(st.index));
    body.append(row);
  }
  const heads = ["#", "pass", "ms", "symbols", "verified", ...(anyError ? ["error"] : [])];
  return h("div", { class: "tl-steps-wrap" }, h("table", { class: "tl-steps" },
    h("thead", {}, h("tr", {}, ...heads.map((t) => h("th", {}, t)))), body));
}

export function diffView(diff: string | null): HTMLElement {
  const box = h("div", { class: "tl-diff" });
  if (!diff) { box.append(h("div", { class: "tl-ctx tl-muted" }, "(no changes)")); return box; }
  for (const line of diff.replace(/\n$/, "").split("\n")) {
    const k = classifyDiffLine(line);
    box.append(h("div", { class: k === "meta" ? "tl-meta-line" : `tl-${k}` }, line || " "));
  }
  return box;
}

// the graph view lives in ./graph (layout, search, legend, details); re-exported for the widget and the sidebar
import { graphView, type GraphViewOptions } from "./graph/view";
export { graphView };
export type GraphOptions = GraphViewOptions;

export function timingsView(p: Payload): HTMLElement {
  const names = Object.keys(p.regions);
  if (!names.length) return h("div", { class: "tl-muted" }, "(no fusion regions)");
  const body = h("tbody");
  for (const name of names) {
    const r = p.regions[name];
    const versions = Object.entries(r.timings);
    const rows = versions.length ? versions : [[r.version, null] as const];
    for (const [ver, t] of rows) {
      body.append(h("tr", {},
        h("td", {}, name), h("td", {}, r.executor), h("td", {}, ver + (ver === r.version ? " (current)" : "")),
        h("td", { class: "tl-num" }, t ? String(t.count) : "–"),
        h("td", { class: "tl-num" }, t ? ms(t.median_s) : "–"),
        h("td", { class: "tl-num" }, t ? ms(t.min_s) : "–"),
        h("td", { class: "tl-error" }, r.error ?? "")));
    }
    if (r.code != null) {
      body.append(h("tr", {}, h("td", { colspan: 7 }, h("details", {}, h("summary", {}, `${name} code`), h("pre", {}, r.code)))));
    }
  }
  return h("table", { class: "tl-timings" },
    h("thead", {}, h("tr", {}, ...["region", "executor", "version", "count", "median ms", "min ms", "error"].map((t) => h("th", {}, t)))), body);
}

/** Per call id: the executors that declined it and why, from every step's notes up to ``step`` (see ``declineRows``). */
export function declinesAt(p: Payload, step: number): Record<string, [string, string][]> {
  return Object.fromEntries(declineRows(p, step).map(({ id, reasons }) => [id.replace(/^b/, ""), reasons]));
}

function tabs(labels: string[], active: string, onPick: (l: string) => void): HTMLElement {
  const bar = h("div", { class: "tl-tabs" });
  for (const l of labels) {
    const b = h("button", { type: "button", class: l === active ? "tl-active" : "", "data-tab": l }, l);
    b.addEventListener("click", () => onPick(l));
    bar.append(b);
  }
  return bar;
}

// The chosen trace and pane survive re-renders of the same root (e.g. stepping through passes).
const viewState = new WeakMap<HTMLElement, { trace?: string; pane: string; against?: number; focus?: string | null }>();
const PANES = ["Program", "Diff", "Graph", "What it did", "Timings"];

function stepDetail(root: HTMLElement, p: Payload, st: Step): HTMLElement {
  const box = h("div", { class: "tl-detail" });
  const state = viewState.get(root) ?? { pane: "Program" };
  viewState.set(root, state);
  const paint = () => {
    box.replaceChildren();
    if (st.error) box.append(h("div", { class: "tl-error" }, `step ${st.index} (${st.spec}) failed: ${st.error}`));
    const traces = st.traces;
    const names = traces ? Object.keys(traces) : [];
    const trace = state.trace && names.includes(state.trace) ? state.trace : names[0];
    if (names.length) box.append(tabs(names, trace!, (t) => { state.trace = t; paint(); }));
    box.append(tabs(PANES, state.pane, (pn) => { state.pane = pn; paint(); }));
    if (state.pane === "Timings") { box.append(stepTimingsView(p, st)); return; }
    const labels = () => new Map((traces?.[trace!]?.graph.nodes ?? []).map((n) => [n.id, n.label]));
    const select = (id: string) => selectionOf(root).selectNode(id, "notes");
    if (state.pane === "What it did") { box.append(notesView(p, st, labels(), select)); return; }
    if (!traces) { box.append(h("div", { class: "tl-loading tl-muted" }, st.error ? "(no traces: the step failed)" : "loading…")); return; }
    const t = traces[trace!];
    if (!t) { box.append(h("div", { class: "tl-muted" }, "(no traces)")); return; }
    box.append(h("div", { class: "tl-muted" },
      `${trace}: ${t.stats.symbols} symbols, ${t.stats.regions} regions · ` +
      Object.entries(t.stats.executors).map(([k, v]) => `${k} ${v}`).join(", ")));
    if (state.pane === "Program") box.append(programView(t, { selection: selectionOf(root) }));
    else if (state.pane === "Diff") box.append(stepDiff(root, p, st, trace!, state, paint));
    else {
      const graphs = Object.fromEntries(Object.entries(traces).map(([k, v]) => [k, v.graph]));
      const focus = state.focus;
      state.focus = null;
      box.append(graphView(t.graph, t.changes, { trace, traces: graphs, focus, declines: declinesAt(p, st.index),
        onJump: (tr, id) => { state.trace = tr; state.focus = id; paint(); } }));
    }
  };
  paint();
  return box;
}

/** The Diff pane: side by side by stable call id against the previous step or a chosen one (text diff for older payloads). */
function stepDiff(root: HTMLElement, p: Payload, st: Step, trace: string, state: { against?: number }, repaint: () => void): HTMLElement {
  const prev = [...p.steps].reverse().find((x) => x.index < st.index && x.traces)?.index;
  const other = state.against !== undefined && state.against !== st.index && p.steps[state.against]?.traces ? state.against : prev;
  const sel = h("select", { class: "tl-diff-against", "aria-label": "compare with step" });
  for (const x of p.steps) if (x.index !== st.index && x.traces) sel.append(h("option", { value: x.index }, `vs step ${x.index}: ${x.spec}${x.index === prev ? " (previous)" : ""}`));
  const box = h("div", { class: "tl-diff-pane" }, sel);
  const a = other === undefined ? undefined : p.steps[other].traces?.[trace], b = st.traces?.[trace];
  if (other === undefined || !b) { box.append(h("div", { class: "tl-muted" }, "(nothing to compare with: this is the first step)")); return box; }
  sel.value = String(other);
  sel.addEventListener("change", () => { state.against = Number(sel.value); repaint(); });
  if (!a) box.append(h("div", { class: "tl-muted" }, `step ${other} has no ${trace} trace: every call is new`));
  if (b.calls && (!a || a.calls)) {
    box.append(callDiffView(a ?? { program: "", calls: [] }, b, { beforeName: `step ${other}: ${p.steps[other].spec}`, afterName: `step ${st.index}: ${st.spec}`,
      onSelect: (id) => selectionOf(root).selectNode(id, "diff"), regionExecutor: (r) => p.regions[r]?.executor ?? null }));
  } else box.append(diffView(other === prev ? b.diff : null));
  return box;
}

/** Renders the whole record into root, replacing what was there; a payload that does not follow the schema
 * gets a panel saying which fields are wrong instead (it is checked first, so no view draws from a malformed one). */
export function renderRecord(root: HTMLElement, data: unknown, opts: RenderOptions = {}): void {
  const problems = payloadProblems(data);
  if (problems.length) { showProblems(root, problems, opts.cannot, (data as { name?: unknown } | null)?.name); return; }
  const payload = data as Payload;
  const n = payload.steps.length;
  const cur = Math.max(0, Math.min(n - 1, opts.current ?? n - 1));
  root.classList.add("thunderlab");
  root.setAttribute("data-step", String(cur));
  const style = h("style", {}, CSS + STEP_CSS);
  const parts: Node[] = [style, header(payload, opts), controls(payload, cur, opts), stepTable(payload, cur, opts)];
  if (n) parts.push(stepDetail(root, payload, payload.steps[cur]));
  root.replaceChildren(...parts);
}
