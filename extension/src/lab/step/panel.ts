// The step panel: the selected step's program (JupyterLab's editor, read-only, Python highlighting),
// its diff side by side against the previous or any chosen step, its graph, and why calls were not fused.
import { CodeEditor, type IEditorServices } from "@jupyterlab/codeeditor";
import { PanelWithToolbar } from "@jupyterlab/ui-components";
import { Widget } from "@lumino/widgets";
import { alignLines, declinesAt, graphView, h, type Payload } from "../../views";
import type { IThunderlabSidebar } from "../tokens";
import { declines } from "./model";

const VIEWS = ["Program", "Diff", "Graph", "Why not fused"] as const;
type View = (typeof VIEWS)[number];

class StepBody extends Widget {
  private view: View = "Program";
  private focus: string | null = null;  // the graph node to show next (followed from the other trace)
  private against: number | null = null;  // the step the diff compares with (null: the previous one)
  private editor: CodeEditor.IEditor | null = null;
  private model = new CodeEditor.Model();
  private host = h("div", { class: "tl-editor" });

  constructor(private tl: IThunderlabSidebar, private editors: IEditorServices) {
    super();
    this.addClass("tl-step-view");
    this.model.mimeType = "text/x-python";
    tl.step.changed.connect(this.paint, this);
    this.paint();
  }

  private _editor(): HTMLElement {
    if (!this.editor) {
      this.editor = this.editors.factoryService.newInlineEditor({ host: this.host, model: this.model,
        config: { readOnly: true, lineNumbers: true, lineWrap: false } });
    }
    return this.host;
  }

  paint(): void {
    const s = this.tl.step, p = s.payload;
    if (s.error) { this.node.replaceChildren(h("div", { class: "tl-error" }, s.error)); return; }
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
      b.addEventListener("click", () => { this.view = v; this.paint(); });
      tabs.append(b);
    }
    const parts: (HTMLElement | null)[] = [head, st.error ? h("div", { class: "tl-error" }, st.error) : null, tabs];
    const t = traces && trace ? traces[trace] : null;
    if (traces === undefined) parts.push(h("div", { class: "tl-muted" }, "loading…"));
    else if (!t) parts.push(h("div", { class: "tl-muted" }, "(this step has no program)"));
    else if (this.view === "Program") {
      parts.push(h("div", { class: "tl-muted tl-stats" }, `${trace}: ${t.stats.symbols} symbols, ${t.stats.regions} fusion regions · ` +
        Object.entries(t.stats.executors).map(([k, v]) => `${k} ${v}`).join(", ")));
      if (this.model.sharedModel.getSource() !== t.program) this.model.sharedModel.setSource(t.program);
      parts.push(this._editor());
    } else if (this.view === "Diff") parts.push(this._diff(p, st.index, trace!));
    else if (this.view === "Graph") {
      const graphs = Object.fromEntries(Object.entries(traces!).map(([k, v]) => [k, v.graph]));
      const focus = this.focus;
      this.focus = null;
      parts.push(graphView(t.graph, t.changes, { ...this.tl.settings, trace, traces: graphs, focus,
        declines: declinesAt(p, st.index), onJump: (tr, id) => { this.focus = id; s.setTrace(tr); } }));
    }
    else parts.push(this._whyNot(p, st.index, t.graph.nodes));
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
      const before = a?.[trace]?.program ?? "", after = s.traces()?.[trace]?.program ?? "";
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

  private _whyNot(p: Payload, step: number, nodes: { id: string; label: string }[]): HTMLElement {
    const label = new Map(nodes.map((n) => [n.id, n.label]));
    const rows = declines(p, step);
    if (!rows.length) return h("div", { class: "tl-muted" }, "No executor declined a call up to this step (or claim has not run yet).");
    const list = h("ul", { class: "tl-whynot" });
    for (const r of rows) {
      list.append(h("li", {}, h("code", {}, label.get(r.id) ?? r.id),
        h("ul", {}, ...r.reasons.map(([ex, why]) => h("li", {}, h("strong", {}, ex), `: ${why}`)))));
    }
    return list;
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
