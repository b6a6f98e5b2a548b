// The step panel: the selected step's program (JupyterLab's editor, read-only, Python highlighting),
// its diff side by side against the previous or any chosen step, its graph, and why calls were not fused.
import { CodeEditor, type IEditorServices } from "@jupyterlab/codeeditor";
import { PanelWithToolbar } from "@jupyterlab/ui-components";
import { Widget } from "@lumino/widgets";
import { callDiffView, type Call } from "../../calldiff";
import { notesView, stepTimingsView } from "../../stepinfo";
import { alignLines, declinesAt, graphView, h, problemsView, type Payload } from "../../views";
import type { IThunderlabSidebar } from "../tokens";

const VIEWS = ["Program", "Diff", "Graph", "What it did", "Timings"] as const;
type View = (typeof VIEWS)[number];

class StepBody extends Widget {
  private view: View = "Program";
  private focus: string | null = null;  // the graph node to show next (followed from the other trace)
  private against: number | null = null;  // the step the diff compares with (null: the previous one)
  private editor: CodeEditor.IEditor | null = null;
  private model = new CodeEditor.Model();
  private host = h("div", { class: "tl-editor" });

  private calls: Call[] = [];  // the shown program's calls, for its line <-> call links
  private sourceBar = h("div", { class: "tl-source-bar tl-muted" });

  constructor(private tl: IThunderlabSidebar, private editors: IEditorServices) {
    super();
    this.addClass("tl-step-view");
    this.model.mimeType = "text/x-python";
    tl.step.changed.connect(this.paint, this);
    // a click on a program line selects its call; a call selected elsewhere (graph, diff) moves the cursor to it
    this.host.addEventListener("mouseup", () => setTimeout(() => this._fromCursor()));
    this.host.addEventListener("keyup", () => this._fromCursor());
    tl.selection.onChange((id, from) => { if (from !== "program") this._toCall(id); this._showSource(id); });
    this.paint();
  }

  private _fromCursor(): void {
    const line = this.editor?.getCursorPosition().line;
    if (line === undefined) return;
    const c = this.calls.find((x) => x.line === line + 1);
    if (c) this.tl.selection.selectNode(c.id, "program");
  }

  private _toCall(id: string | null): void {
    const c = id ? this.calls.find((x) => x.id === id) : undefined;
    if (!c?.line || !this.editor) return;
    const at = { line: c.line - 1, column: 0 };
    this.editor.setCursorPosition(at);
    this.editor.revealPosition(at);
  }

  private _showSource(id: string | null): void {
    const c = id ? this.calls.find((x) => x.id === id) : undefined;
    const bar = this.sourceBar;
    if (!c) { bar.replaceChildren(this.calls.length ? "click a call to see the line of your code it came from" : ""); return; }
    const s = c.source;
    bar.replaceChildren(h("code", {}, c.op), c.executor ? ` [${c.executor}${c.region ? ` · ${c.region}` : ""}]` : "",
      s ? " ← " : ` (no source line: made by ${c.origin ?? "a pass"})`);
    if (!s) return;
    const where = s.cell != null ? `cell [${s.cell}], line ${s.line}` : `${s.path ?? s.file}:${s.line}`;
    const a = h("a", { class: "tl-source-link", href: "#", title: "open this line" }, where);
    a.addEventListener("click", async (e) => {
      e.preventDefault();
      const problem = await this.tl.openSource(s);
      if (problem) bar.append(h("div", { class: "tl-error" }, problem));
    });
    bar.append(a, s.scope ? ` · ${s.scope}` : "", s.code ? h("div", {}, h("code", { class: "tl-source-code" }, s.code)) : "");
  }

  private _editor(): HTMLElement {
    if (!this.editor) {
      this.editor = this.editors.factoryService.newInlineEditor({ host: this.host, model: this.model,
        config: { readOnly: true, lineNumbers: true, lineWrap: false } });
    }
    return this.host;
  }

  private shownRecord: number | null = null;

  paint(): void {
    const s = this.tl.step, p = s.payload;
    if (p && s.record !== this.shownRecord) {  // another record or notebook: its view as it was left
      this.shownRecord = s.record;
      const kept = this.tl.memory.get(this.tl.link.session?.path).view as View | undefined;
      if (kept && VIEWS.includes(kept)) this.view = kept;
    }
    if (s.error) { this.node.replaceChildren(h("div", { class: "tl-error" }, s.error)); return; }
    if (!p && s.problems.length) { this.node.replaceChildren(problemsView(s.problems, `thunderlab cannot show record ${s.record}`)); return; }
    if (!p) { this.node.replaceChildren(h("div", { class: "tl-empty" }, s.record === null ? "Choose a record above." : "loading…")); return; }
    const st = p.steps[s.step];
    const traces = s.traces();
    const names = traces ? Object.keys(traces) : [];
    const trace = names.includes(s.trace) ? s.trace : names[0];
    const head = h("div", { class: "tl-step-head" },
      h("strong", {}, `step ${st.index} of ${p.steps.length - 1}: ${st.spec}`),
      h("span", { class: "tl-muted" }, "  ↑/↓ or j/k in the pipeline move between passes"));
    const tabs = h("div", { class: "tl-tabs" });
    for (const n of names) {
      const b = h("button", { type: "button", class: n === trace ? "tl-active" : "", "data-trace": n }, n);
      b.addEventListener("click", () => s.setTrace(n));
      tabs.append(b);
    }
    tabs.append(h("span", { class: "tl-tab-gap" }));
    for (const v of VIEWS) {
      const b = h("button", { type: "button", class: v === this.view ? "tl-active" : "", "data-view": v }, v);
      b.addEventListener("click", () => { this.view = v; this.tl.memory.set(this.tl.link.session?.path, { view: v }); this.paint(); });
      tabs.append(b);
    }
    const parts: (HTMLElement | null)[] = [head, st.error ? h("div", { class: "tl-error" }, st.error) : null, tabs];
    const t = traces && trace ? traces[trace] : null;
    if (s.problems.length) parts.push(problemsView(s.problems, `thunderlab cannot show step ${st.index}'s program`));
    else if (traces === undefined) parts.push(h("div", { class: "tl-muted" }, "loading…"));
    else if (!t) parts.push(h("div", { class: "tl-muted" }, "(this step has no program)"));
    else if (this.view === "Program") {
      parts.push(h("div", { class: "tl-muted tl-stats" }, `${trace}: ${t.stats.symbols} symbols, ${t.stats.regions} fusion regions · ` +
        Object.entries(t.stats.executors).map(([k, v]) => `${k} ${v}`).join(", ")));
      if (this.model.sharedModel.getSource() !== t.program) this.model.sharedModel.setSource(t.program);
      this.calls = t.calls ?? [];
      this._showSource(this.tl.selection.selected);
      parts.push(this.sourceBar, this._editor());
    } else if (this.view === "Diff") parts.push(this._diff(p, st.index, trace!));
    else if (this.view === "Graph") {
      const graphs = Object.fromEntries(Object.entries(traces!).map(([k, v]) => [k, v.graph]));
      const focus = this.focus;
      this.focus = null;
      parts.push(graphView(t.graph, t.changes, { ...this.tl.settings, trace, traces: graphs, focus,
        declines: declinesAt(p, st.index), onJump: (tr, id) => { this.focus = id; s.setTrace(tr); } }));
    }
    else if (this.view === "Timings") parts.push(stepTimingsView(p, st));
    else {
      const labels = new Map(t.graph.nodes.map((n) => [n.id, n.label]));
      parts.push(notesView(p, { ...st, traces: traces ?? null }, labels, (id) => this.tl.selection.selectNode(id, "notes")));
    }
    this.node.replaceChildren(...parts.filter((x): x is HTMLElement => !!x));
  }

  private _diff(p: Payload, step: number, trace: string): HTMLElement {
    const s = this.tl.step;
    const prev = [...p.steps].reverse().find((x) => x.index < step && !x.error)?.index ?? 0;
    const other = this.against !== null && this.against !== step ? this.against : prev;
    const sel = h("select", { class: "tl-diff-against", "aria-label": "compare with step" });
    for (const x of p.steps) if (x.index !== step) sel.append(h("option", { value: x.index }, `vs step ${x.index}: ${x.spec}${x.index === prev ? " (previous)" : ""}`));
    sel.value = String(other);
    sel.addEventListener("change", () => { this.against = Number(sel.value); this.paint(); });
    const box = h("div", { class: "tl-sbs" });
    const a = s.traces(other);
    if (a === undefined) { void s.load(other); box.append(h("div", { class: "tl-muted" }, "loading…")); }
    else {
      const ta = a?.[trace], tb = s.traces()?.[trace];
      if (tb?.calls && (!ta || ta.calls)) {
        box.append(callDiffView(ta ?? { program: "", calls: [] }, tb, { beforeName: `step ${other}: ${p.steps[other].spec}`,
          afterName: `step ${step}: ${p.steps[step].spec}`, onSelect: (id) => this.tl.selection.selectNode(id, "diff"),
          regionExecutor: (r) => p.regions[r]?.executor ?? null }));
        return h("div", { class: "tl-diff-view" }, sel, box);
      }
      const before = ta?.program ?? "", after = tb?.program ?? "";
      const rows = alignLines(before.split("\n"), after.split("\n"));
      const changed = rows.filter((r) => r.kind !== "same").length;
      box.append(h("div", { class: "tl-muted" }, changed ? `${changed} lines differ` : "the programs print the same" +
        " (executor assignment shows in the graph)"));
      const table = h("table", { class: "tl-sbs-table" });
      for (const r of rows) {
        if (r.kind === "same" && changed && rows.length > 60) continue;  // long programs: only what changed
        table.append(h("tr", { class: `tl-sbs-${r.kind}` }, h("td", { class: "tl-sbs-a" }, r.a ?? ""), h("td", { class: "tl-sbs-b" }, r.b ?? "")));
      }
      box.append(table);
    }
    return h("div", { class: "tl-diff-view" }, sel, box);
  }
}

export function stepPanel(tl: IThunderlabSidebar, editors: IEditorServices): PanelWithToolbar {
  const panel = new PanelWithToolbar();
  panel.id = "thunderlab-step";
  panel.title.label = "Step";
  panel.addClass("tl-panel");
  panel.addWidget(new StepBody(tl, editors));
  return panel;
}
