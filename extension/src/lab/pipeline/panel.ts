// The pipeline editor: the record's passes in order with what each did; drag to reorder, toggle, add,
// edit options; checked by the kernel's parser as the user edits; re-run; undo; the text to copy.
import { Clipboard } from "@jupyterlab/apputils";
import { PanelWithToolbar, ToolbarButton, copyIcon, runIcon, undoIcon } from "@jupyterlab/ui-components";
import { Widget } from "@lumino/widgets";
import { h, ms } from "../../dom";
import type { Step } from "../../payload";
import { verificationWords } from "../../stepinfo";
import type { PassInfo } from "../protocol";
import type { IThunderlabSidebar } from "../tokens";
import { printItem, stepOf, type PassItem } from "./model";

class PipelineBody extends Widget {
  registry = new Map<string, PassInfo>();
  private _open = new Set<number>();  // passes whose options are shown

  constructor(private tl: IThunderlabSidebar) {
    super();
    this.addClass("tl-pipeline-editor");
    this.node.tabIndex = 0;
    this.node.addEventListener("keydown", (e) => this._key(e));
    tl.pipeline.changed.connect(this.paint, this);
    tl.step.changed.connect(this.paint, this);
    this.paint();
  }

  private _key(e: KeyboardEvent): void {
    if ((e.target as HTMLElement).tagName === "INPUT" || (e.target as HTMLElement).tagName === "SELECT") return;
    const d = e.key === "ArrowDown" || e.key === "j" ? 1 : e.key === "ArrowUp" || e.key === "k" ? -1 : 0;
    if (!d) return;
    e.preventDefault();
    void this.tl.step.move(d);
  }

  paint(): void {
    const { pipeline: pm, step } = this.tl;
    const steps = step.payload?.steps ?? [];
    const list = h("ol", { class: "tl-passes", "aria-label": "passes" });
    const cap = steps[0];
    if (cap) list.append(this._row(h("span", { class: "tl-pass-name" }, "capture"), "the graph TorchDynamo captured", cap, -1, null));
    pm.items.forEach((item, i) => {
      const k = stepOf(pm.items, i, steps);
      const info = this.registry.get(item.name);
      const toggle = h("input", { type: "checkbox", class: "tl-pass-toggle", title: item.enabled ? "disable this pass" : "enable this pass" });
      toggle.checked = item.enabled;
      toggle.addEventListener("click", (e) => { e.stopPropagation(); pm.toggle(i); });
      const gear = h("button", { type: "button", class: "tl-pass-opts jp-Button jp-mod-minimal", title: "options" }, item.options.length ? `{${item.options.length}}` : "{ }");
      gear.addEventListener("click", (e) => { e.stopPropagation(); if (this._open.has(i)) this._open.delete(i); else this._open.add(i); this.paint(); });
      const del = h("button", { type: "button", class: "tl-pass-remove jp-Button jp-mod-minimal", title: "remove this pass" }, "✕");
      del.addEventListener("click", (e) => { e.stopPropagation(); pm.remove(i); });
      const name = h("span", { class: "tl-pass-name" }, h("span", { class: "tl-drag", title: "drag to reorder" }, "⠿"), toggle, printItem({ ...item, enabled: true }));
      const li = this._row(name, info?.summary ?? (this.registry.size ? "not a registered pass" : ""), k === null ? null : steps[k], i, k, gear, del);
      if (!item.enabled) li.classList.add("tl-disabled");
      if (this._open.has(i)) li.append(this._options(i, item, info));
      list.append(li);
    });
    // the check and the text first: they stay in view however long the pipeline is
    this.node.replaceChildren(this._status(), list, this._adder());
  }

  private _row(name: HTMLElement, summary: string, st: Step | null, i: number, k: number | null, ...tools: HTMLElement[]): HTMLLIElement {
    const current = st && st.index === this.tl.step.step;
    const v = st?.verification;
    const mark = !st ? h("span", { class: "tl-muted" }, "not run")
      : st.error ? h("span", { class: "tl-fail", title: st.error }, "✗ failed")
      // the same words as the report and widget: numbers compared with eager PyTorch, or structure only
      : v ? (({ text, cls, title }) => h("span", { class: cls, title }, text))(verificationWords(v)) : h("span", { class: "tl-muted" }, "");
    const stats = st ? h("span", { class: "tl-pass-stats" }, `${ms(st.seconds)} ms · ${st.symbols_before} → ${st.symbols_after} symbols · `, mark) : h("span", { class: "tl-pass-stats" }, mark);
    const li = h("li", { class: `tl-pass${current ? " tl-selected" : ""}`, "data-pass": i, ...(k !== null ? { "data-step": k } : {}) },
      h("div", { class: "tl-pass-head" }, name, h("span", { class: "tl-pass-tools" }, ...tools)),
      h("div", { class: "tl-pass-summary", title: summary }, summary), stats);
    if (st) li.addEventListener("click", () => void this.tl.step.select(st.index));
    if (i >= 0) {
      li.draggable = true;
      li.addEventListener("dragstart", (e) => { e.dataTransfer?.setData("text/x-thunderlab-pass", String(i)); li.classList.add("tl-dragging"); });
      li.addEventListener("dragend", () => li.classList.remove("tl-dragging"));
      li.addEventListener("dragover", (e) => { e.preventDefault(); li.classList.add("tl-drop"); });
      li.addEventListener("dragleave", () => li.classList.remove("tl-drop"));
      li.addEventListener("drop", (e) => {
        e.preventDefault();
        const from = Number(e.dataTransfer?.getData("text/x-thunderlab-pass"));
        if (Number.isInteger(from) && from !== i) this.tl.pipeline.move(from, i);
      });
    }
    return li;
  }

  private _options(i: number, item: PassItem, info: PassInfo | undefined): HTMLElement {
    const box = h("div", { class: "tl-pass-options" });
    const given = new Map(item.options);
    const known = info ? Object.entries(info.options) : [];
    if (!known.length) box.append(h("span", { class: "tl-muted" }, info ? "this pass has no options" : "unknown pass: no options to show"));
    for (const [key, o] of known) {
      const typ = o.type;
      const dflt = Array.isArray(o.default) ? o.default.join("+") : String(o.default);
      let input: HTMLInputElement | HTMLSelectElement;
      if (typ === "bool") {
        input = h("select", { class: "tl-opt", "data-option": key }, h("option", { value: "" }, `default (${dflt})`), h("option", { value: "true" }, "true"), h("option", { value: "false" }, "false"));
      } else {
        input = h("input", { class: "tl-opt jp-mod-styled", "data-option": key, type: typ === "int" || typ === "float" ? "number" : "text",
          placeholder: `default: ${dflt}`, spellcheck: "false", ...(typ === "float" ? { step: "any" } : {}) });
      }
      input.value = given.get(key) ?? "";
      input.addEventListener("change", () => this.tl.pipeline.setOption(i, key, input.value.trim()));
      box.append(h("label", { class: "tl-opt-row" }, h("span", {}, `${key} `, h("span", { class: "tl-muted" }, typ)), input));
    }
    return box;
  }

  private _adder(): HTMLElement {
    const sel = h("select", { class: "tl-add-pass jp-mod-styled", "aria-label": "add a pass" }, h("option", { value: "" }, "+ add a pass…"));
    for (const p of this.registry.values()) sel.append(h("option", { value: p.name, title: p.summary }, `${p.name}: ${p.summary}`));
    sel.addEventListener("change", () => {
      if (!sel.value) return;
      const items = this.tl.pipeline.items;
      const last = items.length && this.registry.get(items[items.length - 1].name)?.last;
      this.tl.pipeline.insert(sel.value, last ? items.length - 1 : items.length);  // before a pass that must come last
    });
    return sel;
  }

  private _status(): HTMLElement {
    const pm = this.tl.pipeline, c = pm.check;
    const words = this.tl.step.record === null ? "Choose a record to edit its pipeline." : c.state === "invalid" ? c.error : c.state === "checking" || c.state === "unchecked" ? "checking…"
      : pm.edited ? "valid: re-run to see what it does" : "the record's own pipeline";
    const text = h("input", { class: "tl-pipeline-text jp-mod-styled", type: "text", spellcheck: "false", "aria-label": "pipeline text" });
    text.value = pm.text;
    text.addEventListener("change", () => pm.setText(text.value));
    return h("div", { class: "tl-pipeline-foot" },
      h("div", { class: `tl-check tl-check-${c.state}`, role: "status" }, words), text);
  }
}

/** Loads the selected record's pipeline; checks every edit with the kernel's parser; re-runs. */
export function pipelinePanel(tl: IThunderlabSidebar): PanelWithToolbar {
  const panel = new PanelWithToolbar();
  panel.id = "thunderlab-pipeline";
  panel.title.label = "Pipeline";
  panel.addClass("tl-panel");
  const body = new PipelineBody(tl);
  const rerun = new ToolbarButton({ icon: runIcon, label: "Re-run", tooltip: "Run the edited pipeline on the captured program",
    className: "tl-rerun", onClick: () => void doRerun() });
  const undo = new ToolbarButton({ icon: undoIcon, tooltip: "Undo the last edit", className: "tl-undo", onClick: () => tl.pipeline.undo() });
  const copy = new ToolbarButton({ icon: copyIcon, tooltip: "Copy the pipeline string (for thunderlab.jit(..., pipeline=...))",
    className: "tl-copy", onClick: () => Clipboard.copyToSystem(tl.pipeline.text) });
  panel.toolbar.addItem("rerun", rerun);
  panel.toolbar.addItem("undo", undo);
  panel.toolbar.addItem("copy", copy);
  panel.addWidget(body);
  const sync = () => {
    const c = tl.pipeline.check;
    rerun.enabled = tl.link.ready && c.state === "ok" && tl.step.record !== null;
    undo.enabled = tl.pipeline.canUndo;
    panel.node.classList.toggle("tl-invalid", c.state === "invalid");
  };

  let asked = 0;
  const check = async () => {
    if (tl.pipeline.check.state !== "unchecked") { sync(); return; }
    const text = tl.pipeline.text, mine = ++asked;
    tl.pipeline.setCheck({ state: "checking" });
    try {
      const r = await tl.link.request("pipeline.validate", { pipeline: text });
      if (mine === asked && text === tl.pipeline.text) tl.pipeline.setCheck(r.ok ? { state: "ok" } : { state: "invalid", error: r.error ?? "invalid" });
    } catch (e) {
      if (mine === asked) tl.pipeline.setCheck({ state: "invalid", error: e instanceof Error ? e.message : String(e) });
    }
  };
  tl.pipeline.changed.connect(() => { void check(); sync(); });
  tl.link.stateChanged.connect(sync);

  const doRerun = async () => {
    const record = tl.step.record;
    if (record === null) return;
    const text = tl.pipeline.text;
    try {
      const r = await tl.link.request("record.rerun", { record, pipeline: text });
      tl.records.select(r.record);
    } catch (e) {
      tl.pipeline.setCheck({ state: "invalid", error: e instanceof Error ? e.message : String(e) });
    }
  };

  let loaded: number | null = null;
  tl.step.changed.connect(() => {
    const p = tl.step.payload;
    if (p && tl.step.record !== loaded) { loaded = tl.step.record; tl.pipeline.load(p.pipeline); }
  });
  tl.link.connected.connect(async () => {
    const r = await tl.link.request("passes.list", {});
    body.registry = new Map(r.passes.map((p) => [p.name, p]));
    body.paint();
  });
  sync();
  return panel;
}
