// The record page: a compile record ("thunderlab.record/v1") as the report, the notebook widget and the
// document viewer show it: its header, the step controls and table, and the selected step's panes (./panes).
// All text comes from user code: it is set only through textContent, createTextNode and setAttribute,
// never parsed as markup.
import { h, ms } from "./dom";
import { PANE_CSS, PANES, renderPane, type PaneState } from "./panes";
import { checkPayload, MAX_PROBLEMS, readNotes, SCHEMA, type Payload, type Problem, type Step } from "./payload";
import { selectionOf } from "./selection";
import { inputsLine, STEP_CSS, verificationWords } from "./stepinfo";

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

export function passName(spec: string): string {
  return spec.trim().replace(/^-/, "").split("{")[0].trim();
}

/** Pass names of a pipeline text such as "dce,remat{budget=3,x=1},-cse" (disabled passes left out). */
export function pipelinePasses(pipeline: string): string[] {
  return pipeline.replace(/\{[^{}]*\}/g, "").split(",").map((x) => x.trim()).filter((x) => x && !x.startsWith("-")).map(passName);
}

// ---------------------------------------------------------------- DOM building

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
.thunderlab pre{font:12px/1.35 ui-monospace,Menlo,Consolas,monospace;background:var(--jp-layout-color1,#fafafa);border:1px solid var(--jp-border-color2,#e4e4e4);padding:6px;overflow:auto;max-height:560px;margin:4px 0}
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

/** Where the captured graph came from, as its capture step's notes say (TorchDynamo's frame, the graph break it ends
 *  at, why it was compiled again), and the graph break's whole explanation; null when they say nothing. */
export function origin(p: Payload): { text: string; detail: string } | null {
  const notes = readNotes(p.steps[0]?.notes);
  if (!notes.summary) return null;
  const brk = notes.facts.graph_break as { detail?: unknown } | undefined;
  return { text: `from ${notes.summary}`, detail: typeof brk?.detail === "string" ? brk.detail : "" };
}

function originLine(p: Payload): HTMLElement | null {
  const o = origin(p);
  return o && h("div", { class: "tl-meta tl-origin", ...(o.detail ? { title: o.detail } : {}) }, o.text);
}

function header(p: Payload, opts: RenderOptions): HTMLElement {
  const err = [p.error, opts.error].filter(Boolean).join("\n");
  return h("div", { class: "tl-header" },
    h("h2", {}, p.name),
    originLine(p),
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

function tabs(labels: string[], active: string, onPick: (l: string) => void): HTMLElement {
  const bar = h("div", { class: "tl-tabs" });
  for (const l of labels) {
    const b = h("button", { type: "button", class: l === active ? "tl-active" : "", "data-tab": l }, l);
    b.addEventListener("click", () => onPick(l));
    bar.append(b);
  }
  return bar;
}

// The chosen trace, pane and each pane's state survive re-renders of the same root (e.g. stepping through passes).
const viewState = new WeakMap<HTMLElement, { trace?: string; pane: string; panes: PaneState }>();

/** The selected step: its trace tabs, the panes' tabs (./panes), and the chosen pane. */
function stepDetail(root: HTMLElement, p: Payload, st: Step): HTMLElement {
  const box = h("div", { class: "tl-detail" });
  const state = viewState.get(root) ?? { pane: PANES[0].title, panes: {} };
  viewState.set(root, state);
  const paint = () => {
    box.replaceChildren();
    if (st.error) box.append(h("div", { class: "tl-error" }, `step ${st.index} (${st.spec}) failed: ${st.error}`));
    const names = st.traces ? Object.keys(st.traces) : [];
    const trace = state.trace && names.includes(state.trace) ? state.trace : names[0];
    const setTrace = (t: string) => { state.trace = t; paint(); };
    if (names.length) box.append(tabs(names, trace!, setTrace));
    const pane = PANES.find((x) => x.title === state.pane) ?? PANES[0];
    box.append(tabs(PANES.map((x) => x.title), pane.title, (title) => { state.pane = title; paint(); }));
    box.append(...renderPane(pane, st, { payload: p, trace: trace ?? "", selection: selectionOf(root), state: state.panes, repaint: paint, setTrace,
      // a step's traces are in the payload, or not yet (the widget sends them when the step is shown), or never (it failed)
      tracesOf: (i) => p.steps[i]?.traces ?? (p.steps[i]?.error ? null : undefined) }));
  };
  paint();
  return box;
}

/** The record page's styles: the page's, the leaf views' and every pane's. */
export const STYLES = CSS + STEP_CSS + PANE_CSS;

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
  const style = h("style", {}, STYLES);
  const parts: Node[] = [style, header(payload, opts), controls(payload, cur, opts), stepTable(payload, cur, opts)];
  if (n) parts.push(stepDetail(root, payload, payload.steps[cur]));
  root.replaceChildren(...parts);
}
