// The step panel: the selected step's panes (../../panes: program, diff, graph, what it did, timings), as the
// report draws them, with the program in JupyterLab's editor (read-only, Python highlighting) linked to the
// selection and to the notebook cells, and other steps' traces fetched from the kernel when a pane asks.
import { CodeEditor, type IEditorServices } from "@jupyterlab/codeeditor";
import { PanelWithToolbar } from "@jupyterlab/ui-components";
import { Widget } from "@lumino/widgets";
import { h } from "../../dom";
import { PANES, renderPane, type PaneState } from "../../panes";
import type { Call, Trace } from "../../payload";
import { problemsView } from "../../record";
import type { IThunderlabSidebar } from "../tokens";

class StepBody extends Widget {
  private view: string = PANES[0].title;  // the pane shown, by its title
  private paneState: PaneState = {};  // the panes' own state (the diff's chosen step, the graph's focus)
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

  /** The Program pane's view here: the source bar over JupyterLab's editor, its lines linked to the calls. */
  private _program(t: Trace): Node {
    if (this.model.sharedModel.getSource() !== t.program) this.model.sharedModel.setSource(t.program);
    this.calls = t.calls ?? [];
    this._showSource(this.tl.selection.selected);
    const both = document.createDocumentFragment();
    both.append(this.sourceBar, this._editor());
    return both;
  }

  paint(): void {
    const s = this.tl.step, p = s.payload;
    if (p && s.record !== this.shownRecord) {  // another record or notebook: its view as it was left
      this.shownRecord = s.record;
      const kept = this.tl.memory.get(this.tl.link.session?.path).view;
      if (kept && PANES.some((x) => x.title === kept)) this.view = kept;
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
    const pane = PANES.find((x) => x.title === this.view) ?? PANES[0];
    for (const v of PANES) {
      const b = h("button", { type: "button", class: v === pane ? "tl-active" : "", "data-view": v.title }, v.title);
      b.addEventListener("click", () => { this.view = v.title; this.tl.memory.set(this.tl.link.session?.path, { view: v.title }); this.paint(); });
      tabs.append(b);
    }
    const parts: Node[] = [head, ...(st.error ? [h("div", { class: "tl-error" }, st.error)] : []), tabs];
    if (s.problems.length) parts.push(problemsView(s.problems, `thunderlab cannot show step ${st.index}'s program`));
    else {
      parts.push(...renderPane(pane, st, { payload: p, trace: trace ?? "", selection: this.tl.selection, state: this.paneState,
        repaint: () => this.paint(), setTrace: (n) => s.setTrace(n), tracesOf: (i) => s.traces(i), load: (i) => void s.load(i),
        graph: this.tl.settings, program: (t) => this._program(t) }));
    }
    this.node.replaceChildren(...parts);
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
