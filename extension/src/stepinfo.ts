// What a step did, in words, for every view: the inputs by name, whether numbers were compared, the pass's
// notes (a summary, named facts and declines, one shape for every pass), why calls were not fused, the values saved
// for backward with their bytes, per-step and per-region timings (each region's executor race among them), and the
// program linked to source lines.
import { communicationView } from "./communication";
import { h, ms } from "./dom";
import { KERNEL_CSS, kernelsView } from "./kernels";
import { raceView } from "./race";
import { readNotes, type Call, type InputName, type Payload, type Saved, type Source, type Step, type Verification } from "./payload";
import type { SelectionModel } from "./selection";

export type { InputName, Saved } from "./payload";

// ---------------------------------------------------------------- pure helpers

/** Parameters and buffers lifted into a model's program: named after the module path, ending in these. */
const PARAM = /(^|_)(weight|bias|running_mean|running_var|num_batches_tracked|inv_freq|in_proj_weight|in_proj_bias)(_\d+)?$/;
export function splitInputs(names: InputName[]): { args: InputName[]; params: InputName[] } {
  const args: InputName[] = [], params: InputName[] = [];
  for (const n of names) (PARAM.test(n.name) ? params : args).push(n);
  return { args, params };
}

export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}

/** The verification mark in words: numbers compared with eager PyTorch, or only the program's structure checked. */
export function verificationWords(v: Verification | null | undefined): { text: string; cls: string; title: string } {
  if (!v) return { text: "not checked", cls: "tl-muted", title: "" };
  if (!v.ok) return { text: `✗ ${v.detail || v.structural}`, cls: "tl-fail", title: v.detail || v.structural };
  if (v.max_error != null) return { text: `✓ numbers match eager (max err ${v.max_error.toExponential(1)})`, cls: "tl-ok", title: "outputs compared with eager PyTorch on the captured inputs" };
  return { text: "✓ structure only", cls: "tl-ok tl-structural", title: "the program is well formed; numbers were not compared (thunderlab.jit(..., verify=True) compares them)" };
}

/** A fact's value in a few words: text and numbers as they are, short lists joined, bigger tables counted. */
function factText(v: unknown): string {
  const scalar = (x: unknown) => x === null || ["string", "number", "boolean"].includes(typeof x);
  let text: string;
  if (scalar(v)) text = String(v);
  else if (Array.isArray(v)) text = v.every(scalar) ? v.join(", ") || "none" : `${v.length} entries`;
  else {
    const entries = Object.entries(v as Record<string, unknown>);
    text = entries.length <= 8 && entries.every(([, x]) => scalar(x)) ? entries.map(([k, x]) => `${k} ${x}`).join(", ") || "none"
      : `${entries.length} entries`;
  }
  return text.length > 200 ? text.slice(0, 199) + "…" : text;
}

/** The pass's notes as lines, whichever pass wrote them: its summary, then each named fact, then how many calls were declined. */
export function noteLines(notes: unknown): string[] {
  const n = readNotes(notes);
  const out: string[] = [];
  if (n.summary) out.push(n.summary);
  for (const [k, v] of Object.entries(n.facts)) if (k !== "traceback") out.push(`${k.replace(/_/g, " ")}: ${factText(v)}`);
  const declined = new Set(n.declines.map(([id]) => id)).size;
  if (declined) out.push(`${declined} calls were declined by at least one executor (see "why not fused" below)`);
  return out;
}

/** Every decline up to step `step`: per call, each executor that said no and why, in step order (claim's, then fuse's left-outs). */
export function declineRows(p: Payload, step: number): { id: string; reasons: [string, string][] }[] {
  const by = new Map<string, [string, string][]>();
  for (let i = 0; i <= Math.min(step, p.steps.length - 1); i++) {
    for (const [id, ex, why] of readNotes(p.steps[i].notes).declines) {
      const list = by.get(`b${id}`) ?? [];
      if (!list.some(([e, w]) => e === ex && w === why)) list.push([ex, why]);
      by.set(`b${id}`, list);
    }
  }
  return [...by].map(([id, reasons]) => ({ id, reasons }));
}

/** When each region switched versions, in seconds after it first ran (the history the API reports). */
export function switches(history: [number, string][]): { version: string; after_s: number }[] {
  if (!history.length) return [];
  const t0 = history[0][0];
  return history.map(([t, v]) => ({ version: v, after_s: t - t0 }));
}

// ---------------------------------------------------------------- views

export function inputsLine(p: Payload & { input_names?: InputName[] }): HTMLElement {
  const names = p.input_names;
  if (!names || !names.length) return h("span", { class: "tl-inputs" }, `inputs: ${p.inputs.join(", ") || "(none)"}`);
  const { args, params } = splitInputs(names);
  const line = h("span", { class: "tl-inputs" }, "inputs: ");
  args.forEach((a, i) => line.append(i ? ", " : "", h("code", { class: "tl-input" }, a.name), ` ${a.type}`));
  if (params.length) {
    line.append(h("details", { class: "tl-params" },
      h("summary", {}, `${args.length ? "+ " : ""}${params.length} parameters and buffers`),
      h("div", { class: "tl-param-list" }, ...params.map((x) => h("div", {}, h("code", {}, x.name), ` ${x.type}`)))));
  }
  return line;
}

function savedView(saved: Saved): HTMLElement {
  const rows = saved.values.slice().sort((a, b) => b.bytes - a.bytes);
  return h("details", { class: "tl-saved" },
    h("summary", {}, `saved for backward: ${saved.values.length} values, ${bytes(saved.bytes)}`),
    h("table", { class: "tl-saved-table" },
      h("thead", {}, h("tr", {}, h("th", {}, "value"), h("th", {}, "type"), h("th", { class: "tl-num" }, "bytes"))),
      h("tbody", {}, ...rows.map((v) => h("tr", {}, h("td", {}, h("code", {}, v.name)), h("td", {}, v.type), h("td", { class: "tl-num" }, bytes(v.bytes)))))));
}

/** The "What this step did" pane: notes, saved-for-backward set, and why calls were not fused. */
export function notesView(p: Payload, st: Step, labels: Map<string, string>, onSelect?: (id: string) => void): HTMLElement {
  const box = h("div", { class: "tl-notes-view" });
  const v = verificationWords(st.verification);
  box.append(h("div", {}, h("strong", {}, `step ${st.index}: ${st.spec}`), ` · ${ms(st.seconds)} ms · ${st.symbols_before} → ${st.symbols_after} symbols · `,
    h("span", { class: v.cls, title: v.title }, v.text)));
  const lines = noteLines(st.notes);
  box.append(lines.length ? h("ul", { class: "tl-notes" }, ...lines.map((l) => h("li", {}, l)))
    : h("div", { class: "tl-muted" }, st.index === 0 ? "the program TorchDynamo captured" : "this pass reported nothing more"));
  const fw = st.traces?.forward as { saved?: Saved } | undefined;
  if (fw?.saved) box.append(savedView(fw.saved));
  const rows = declineRows(p, st.index);
  if (rows.length) {
    const list = h("ul", { class: "tl-whynot" });
    for (const r of rows.slice(0, 500)) {
      const name = h("code", { class: "tl-call-link", "data-id": r.id }, labels.get(r.id) ?? r.id);
      if (onSelect) name.addEventListener("click", () => onSelect(r.id));
      list.append(h("li", {}, name, h("ul", {}, ...r.reasons.map(([ex, why]) => h("li", {}, h("strong", {}, ex), `: ${why}`)))));
    }
    box.append(h("details", { class: "tl-whynot-box", ...(rows.length <= 30 ? { open: "" } : {}) }, h("summary", {}, `why not fused: ${rows.length} calls declined by an executor`), list,
      rows.length > 500 ? h("div", { class: "tl-muted" }, `… and ${rows.length - 500} more`) : null));
  }
  return box;
}

/** Timings for the selected step: every pass's time (this one marked), and the fusion regions this step's program runs. */
export function stepTimingsView(p: Payload, st: Step): HTMLElement {
  const box = h("div", { class: "tl-step-timings" });
  const max = Math.max(1e-9, ...p.steps.map((s) => s.seconds));
  const passes = h("table", { class: "tl-pass-times" }, h("thead", {}, h("tr", {}, h("th", {}, "#"), h("th", {}, "pass"), h("th", { class: "tl-num" }, "ms"), h("th", {}, ""))));
  const body = h("tbody");
  for (const s of p.steps) {
    body.append(h("tr", { class: s.index === st.index ? "tl-current" : "" }, h("td", { class: "tl-num" }, String(s.index)), h("td", {}, s.spec),
      h("td", { class: "tl-num" }, ms(s.seconds)),
      h("td", { class: "tl-bar-cell" }, h("span", { class: "tl-hbar", style: `width:${Math.max(1, Math.round((80 * s.seconds) / max))}px` }))));
  }
  passes.append(body);
  box.append(h("div", { class: "tl-muted" }, `compile time by pass (total ${ms(p.compile_seconds)} ms); this step is marked`), passes);
  const regions = Object.entries(p.regions);
  const here = st.traces ? Object.values(st.traces).reduce((n, t) => n + t.stats.regions, 0) : null;
  if (here === 0 || !regions.length) {
    const fuse = p.steps.find((s) => /^fuse\b/.test(s.spec));
    box.append(h("div", { class: "tl-muted" }, regions.length && fuse ? `no fusion region at this step: regions run from step ${fuse.index} (${fuse.spec}) on`
      : "(no fusion regions)"));
    const comm = communicationView(p.regions, p.communication);
    if (comm) box.append(comm);
    if (p.kernels) box.append(kernelsView(p.kernels));
    return box;
  }
  const table = h("table", { class: "tl-region-times" }, h("thead", {}, h("tr", {}, ...["region", "version", "calls", "median ms", "min ms", "switched"].map((t) => h("th", {}, t)))));
  const tb = h("tbody");
  let timed = false;
  for (const [name, r] of regions) {
    const sw = switches(r.history).slice(1).map((x) => `→ ${x.version} after ${x.after_s.toFixed(2)} s`).join(", ");
    const versions = Object.entries(r.timings);
    if (versions.length) timed = true;
    const rows = versions.length ? versions : [[r.version, null] as const];
    for (const [ver, t] of rows) {
      tb.append(h("tr", {}, h("td", {}, name), h("td", {}, `${r.executor}/${ver}${ver === r.version ? " ●" : ""}`),
        h("td", { class: "tl-num" }, t ? String(t.count) : "–"), h("td", { class: "tl-num" }, t ? ms(t.median_s) : "–"),
        h("td", { class: "tl-num" }, t ? ms(t.min_s) : "–"), h("td", {}, sw || (r.error ? `failed: ${r.error}` : "–"))));
    }
  }
  table.append(tb);
  box.append(h("div", { class: "tl-muted" }, timed ? "per fusion region (● the version running now)"
    : "regions not timed: compile with thunderlab.jit(..., timing=True) to time each region"), table);
  const race = raceView(p.regions);  // the race times the calls it ran, timing=True or not
  if (race) box.append(race);
  const comm = communicationView(p.regions, p.communication);
  if (comm) box.append(comm);
  box.append(p.kernels ? kernelsView(p.kernels)
    : h("div", { class: "tl-muted tl-kernels-none" }, "per-kernel times: not profiled yet (thunderlab.profile(f, *args), or the sidebar's Profile one call)"));
  return box;
}

function sourceText(s: Source): string {
  return s.cell != null ? `cell [${s.cell}] line ${s.line}` : `${s.path ?? s.file}:${s.line}`;
}

const FIRST_LINES = 150, SLICE_LINES = 1000;

export interface ProgramOptions {
  /** Open a call's source (the sidebar opens the file or the notebook cell); without it the place is shown as text. */
  openSource?: (s: Source) => void;
  selection?: SelectionModel;
}

/** The step's program, one line per row: a call's line selects its node (shared selection) and shows its source line. */
export function programView(t: { program: string; calls?: Call[] }, opts: ProgramOptions = {}): HTMLElement {
  const box = h("div", { class: "tl-program-view" });
  const byLine = new Map<number, Call>();
  for (const c of t.calls ?? []) if (c.line) byLine.set(c.line, c);
  const bar = h("div", { class: "tl-source-bar tl-muted" }, t.calls ? "click a call to see where it came from" : "");
  const pre = h("pre", { class: "tl-program" });
  const lines = t.program.replace(/\n$/, "").split("\n");
  // the first screenful is drawn at once, the rest in slices after it (a long program does not hold up the step switch)
  const draw = (from: number, to: number) => {
    const frag = document.createDocumentFragment();
    for (let i = from; i < Math.min(to, lines.length); i++) {
      const c = byLine.get(i + 1);
      const el = h("div", { class: c ? "tl-line tl-call-line" : "tl-line", ...(c ? { "data-id": c.id } : {}) });
      highlightInto(el, lines[i] || " ");
      frag.append(el);
    }
    pre.append(frag);
    if (to < lines.length) setTimeout(() => { if (pre.isConnected) draw(to, to + SLICE_LINES); }, 0);
  };
  draw(0, FIRST_LINES);
  const show = (id: string | null) => {
    pre.querySelector(".tl-line-selected")?.classList.remove("tl-line-selected");
    const c = id ? (t.calls ?? []).find((x) => x.id === id) : undefined;
    if (!c) { bar.replaceChildren(t.calls ? "click a call to see where it came from" : ""); return; }
    const el = pre.querySelector(`[data-id="${c.id}"]`);
    el?.classList.add("tl-line-selected");
    const s = c.source;
    bar.replaceChildren(h("code", {}, c.op), c.executor ? ` [${c.executor}${c.region ? ` · ${c.region}` : ""}]` : "",
      s ? " ← " : " (no source line: made by a pass" + (c.origin ? `, ${c.origin}` : "") + ")");
    if (s) {
      const where = opts.openSource ? h("a", { class: "tl-source-link", href: "#", title: "open the source" }, sourceText(s)) : h("span", { class: "tl-source-link" }, sourceText(s));
      if (opts.openSource) where.addEventListener("click", (e) => { e.preventDefault(); opts.openSource!(s); });
      bar.append(where, s.scope ? ` · ${s.scope}` : "", s.code ? h("div", {}, h("code", { class: "tl-source-code" }, s.code)) : "");
    }
  };
  pre.addEventListener("click", (e) => {
    const el = (e.target as HTMLElement).closest("[data-id]") as HTMLElement | null;
    if (!el) return;
    opts.selection?.selectNode(el.dataset.id!, "program");
    if (!opts.selection) show(el.dataset.id!);
  });
  if (opts.selection) {
    // a redrawn view replaces this one: it stops listening at the first change after that
    const stop = opts.selection.onChange((id) => { if (!box.isConnected) { stop(); return; } show(id); });
    if (opts.selection.selected) show(opts.selection.selected);
  }
  box.append(bar, pre);
  return box;
}

// ---------------------------------------------------------------- highlighting (the report and widget)

const KEYWORDS = new Set(["def", "return", "import", "from", "as", "del", "None", "True", "False", "if", "else", "for", "in", "lambda", "not", "and", "or"]);
const TOKEN = /(#.*$)|('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|(\b\d+(?:\.\d+)?(?:e[-+]?\d+)?\b)|([A-Za-z_][A-Za-z0-9_]*)/g;

/** Python text as spans classed like JupyterLab's editor tokens (cm-keyword, cm-string, ...), set as text only. */
export function highlightInto(el: HTMLElement, line: string): void {
  let last = 0;
  TOKEN.lastIndex = 0;
  for (let m = TOKEN.exec(line); m; m = TOKEN.exec(line)) {
    const cls = m[1] ? "tl-hl-comment" : m[2] ? "tl-hl-string" : m[3] ? "tl-hl-number" : KEYWORDS.has(m[4]) ? "tl-hl-keyword" : null;
    if (!cls) continue;
    if (m.index > last) el.append(line.slice(last, m.index));
    el.append(h("span", { class: cls }, m[0]));
    last = m.index + m[0].length;
  }
  if (last < line.length) el.append(line.slice(last));
}

export const STEP_CSS = `
.thunderlab .tl-inputs code{font-family:var(--jp-code-font-family,ui-monospace,monospace)}
.thunderlab .tl-params{display:inline-block;margin-left:6px}
.thunderlab .tl-params summary{cursor:pointer;color:var(--jp-content-link-color,#1a6fc9)}
.thunderlab .tl-param-list{max-height:160px;overflow:auto;font-size:11px}
.thunderlab .tl-structural{opacity:.85}
.thunderlab .tl-notes{margin:4px 0;padding-left:18px}
.thunderlab .tl-saved summary,.thunderlab .tl-whynot-box summary{cursor:pointer;margin:4px 0}
.thunderlab .tl-saved-table td,.thunderlab .tl-saved-table th{padding:1px 6px}
.thunderlab .tl-saved-table{max-height:240px;display:block;overflow:auto}
.thunderlab .tl-whynot{padding-left:16px}
.thunderlab .tl-call-link{cursor:pointer}
.thunderlab .tl-hbar{display:inline-block;height:10px;background:var(--jp-brand-color1,#2f7ed8);border-radius:2px}
.thunderlab .tl-pass-times .tl-current,.thunderlab .tl-region-times .tl-current{background:var(--jp-layout-color2,#eef)}
.thunderlab .tl-program .tl-line{white-space:pre;min-height:1.35em}
.thunderlab .tl-program .tl-call-line{cursor:pointer}
.thunderlab .tl-program .tl-call-line:hover{background:var(--jp-layout-color2,rgba(0,0,0,.04))}
.thunderlab .tl-line-selected{background:var(--jp-brand-color3,#dbeaff) !important;outline:1px solid var(--jp-brand-color1,#2f7ed8)}
.thunderlab .tl-source-bar{min-height:1.4em;margin:4px 0;overflow-wrap:anywhere}
.thunderlab .tl-source-code{font-family:var(--jp-code-font-family,ui-monospace,monospace)}
.thunderlab .tl-hl-keyword{color:var(--jp-mirror-editor-keyword-color,#008000);font-weight:bold}
.thunderlab .tl-hl-string{color:var(--jp-mirror-editor-string-color,#ba2121)}
.thunderlab .tl-hl-number{color:var(--jp-mirror-editor-number-color,#080)}
.thunderlab .tl-hl-comment{color:var(--jp-mirror-editor-comment-color,#408080);font-style:italic}
.thunderlab .tl-calldiff{font-size:12px}
.thunderlab .tl-cd-summary{margin:4px 0;line-height:1.45}
.thunderlab .tl-sig summary{cursor:pointer;overflow-wrap:anywhere;font-family:var(--jp-code-font-family,ui-monospace,monospace);font-size:11px}
.thunderlab .tl-sig-text{white-space:pre-wrap;overflow-wrap:anywhere;font:11px var(--jp-code-font-family,ui-monospace,monospace);max-height:160px;overflow:auto}
.thunderlab .tl-cd-table{border-collapse:collapse;width:100%;table-layout:fixed;font:11px/1.35 var(--jp-code-font-family,ui-monospace,monospace)}
.thunderlab .tl-cd-table td,.thunderlab .tl-cd-table th{white-space:pre-wrap;overflow-wrap:anywhere;vertical-align:top;padding:1px 4px;border-bottom:1px solid var(--jp-border-color3,#eee)}
.thunderlab .tl-cd-why{color:var(--jp-warn-color0,#8a5a00);font-family:var(--jp-ui-font-family,system-ui,sans-serif)}
.thunderlab .tl-cd-exec{color:var(--jp-ui-font-color2,#666)}
.thunderlab .tl-cd-removed td:first-child,.thunderlab .tl-cd-changed td:first-child{background:rgba(248,81,73,.16)}
.thunderlab .tl-cd-added td:nth-child(2),.thunderlab .tl-cd-changed td:nth-child(2){background:rgba(46,160,67,.16)}
.thunderlab .tl-cd-fold button,.thunderlab .tl-cd-more{border:none;background:none;color:var(--jp-content-link-color,#1a6fc9);cursor:pointer;padding:2px 0;font:inherit}
` + KERNEL_CSS;
