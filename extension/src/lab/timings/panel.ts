// The timings panel: per fusion region, which version ran, how often, median and min, updating while the
// notebook keeps calling the program; how each region's executor race went (the versions' fastest calls, the winner, why); each region opens to the kernels of one profiled call; and a comparison
// with another record (after a pipeline edit): programs side by side, step times paired, call times in words.
import { PanelWithToolbar } from "@jupyterlab/ui-components";
import { Widget } from "@lumino/widgets";
import { callDiffView } from "../../calldiff";
import { communicationView } from "../../communication";
import { h } from "../../dom";
import { raceView } from "../../race";
import { hasDevice, kernelRows, kernelTable, OUTSIDE, us } from "../../kernels";
import type { Comparison } from "../protocol";
import type { IThunderlabSidebar } from "../tokens";
import { pairSteps, regionGroups, speedWords, timingRows, totalCalls } from "./model";

const SVGNS = "http://www.w3.org/2000/svg";
const TOP = 8;  // kernels shown per region

function bars(rows: ReturnType<typeof timingRows>): SVGElement {
  const max = Math.max(1e-9, ...rows.map((r) => r.median_ms));
  const w = 260, bh = 15;
  const svg = document.createElementNS(SVGNS, "svg");
  svg.setAttribute("class", "tl-bars");
  svg.setAttribute("width", String(w));
  svg.setAttribute("height", String(rows.length * (bh + 3)));
  rows.forEach((r, i) => {
    const rect = document.createElementNS(SVGNS, "rect");
    rect.setAttribute("x", "0");
    rect.setAttribute("y", String(i * (bh + 3)));
    rect.setAttribute("height", String(bh));
    rect.setAttribute("width", String(Math.max(1, (w * r.median_ms) / max)));
    rect.setAttribute("class", r.running ? "tl-bar-running" : "tl-bar-old");
    const title = document.createElementNS(SVGNS, "title");
    title.textContent = `${r.region} (${r.version}): median ${r.median_ms.toFixed(3)} ms over ${r.count} calls`;
    rect.append(title);
    // each bar says what it is: region, version and median
    const label = document.createElementNS(SVGNS, "text");
    label.setAttribute("x", "4");
    label.setAttribute("y", String(i * (bh + 3) + bh - 4));
    label.setAttribute("class", "tl-bar-label");
    label.textContent = `${r.region} ${r.version}: ${r.median_ms.toFixed(3)} ms`;
    svg.append(rect, label);
  });
  return svg;
}

/** A bar `frac` of the cell's width, labelled with its milliseconds. */
function bar(frac: number, label: string, cls: string): HTMLElement {
  return h("div", { class: `tl-pbar ${cls}` }, h("span", { class: "tl-pbar-fill", style: `width:${Math.max(0.5, Math.min(100, frac * 100)).toFixed(1)}%` }),
    h("span", { class: "tl-pbar-label" }, label));
}

class TimingsBody extends Widget {
  comparison: Comparison | null = null;
  compareError = "";
  comparing = false;
  private open = new Set<string>();  // regions whose kernels are shown
  private trace = "forward";

  constructor(private tl: IThunderlabSidebar) {
    super();
    this.addClass("tl-timings-view");
    tl.timings.changed.connect(this.paint, this);
    tl.step.changed.connect(this.paint, this);
    this.paint();
  }

  /** The kernels to show: the profile taken here, else the one the record already keeps (thunderlab.profile in the notebook). */
  private kernels() {
    const record = this.tl.step.record;
    const prof = this.tl.timings.profileOf(record);
    return prof.kernels ?? (this.tl.step.payload?.kernels ?? null);
  }

  paint(): void {
    const ev = this.tl.timings.latest;
    const rows = timingRows(ev);
    const parts: HTMLElement[] = [];
    const record = this.tl.step.record;
    if (record === null) {
      parts.push(h("div", { class: "tl-empty" }, "Choose a record to see its regions' timings."));
      this.node.replaceChildren(...parts);
      return;
    }
    const kernels = this.kernels();
    if (!rows.length) {
      parts.push(h("div", { class: "tl-empty" }, "No fusion region has been timed yet: compile with thunderlab.jit(..., timing=True) and call it."));
    } else {
      parts.push(h("div", { class: "tl-calls", "data-calls": totalCalls(ev) }, `${totalCalls(ev)} timed region calls so far (live)`));
    }
    parts.push(this._profileBar(record));
    const groups = regionGroups(rows, kernels, TOP);
    if (groups.length) {
      const device = hasDevice(kernelTable(kernels, TOP));
      const table = h("table", { class: "tl-timings-table" },
        h("thead", {}, h("tr", {}, ...["region", "version", "calls", "median ms", "min ms"].map((t, i) => h("th", { class: i > 1 ? "tl-num" : "" }, t)))));
      for (const g of groups) {
        const body = h("tbody", { class: "tl-region-group", "data-region": g.region });
        const isOpen = this.open.has(g.region);
        const toggle = g.kernels ? h("button", { type: "button", class: "tl-kernels-toggle", "aria-expanded": String(isOpen),
          title: isOpen ? "hide this region's kernels" : "show the kernels this region ran in the profiled call" },
          `${isOpen ? "▾" : "▸"}\u00a0${g.region}`) : null;  // the arrow stays with the name's first word
        toggle?.addEventListener("click", () => { if (this.open.has(g.region)) this.open.delete(g.region); else this.open.add(g.region); this.paint(); });
        const name = (first: boolean) => h("td", { class: "tl-region-name" }, first ? (toggle ?? g.region) : "");
        if (g.rows.length) {
          g.rows.forEach((r, i) => body.append(h("tr", { class: r.running ? "tl-running" : "" }, name(i === 0),
            h("td", {}, `${r.executor}/${r.version}${r.running ? " ●" : ""}`),
            h("td", { class: "tl-num" }, String(r.count)), h("td", { class: "tl-num" }, r.median_ms.toFixed(3)), h("td", { class: "tl-num" }, r.min_ms.toFixed(3)))));
        } else {
          const what = g.region === OUTSIDE ? "calls between regions" : "not timed";
          body.append(h("tr", {}, name(true), h("td", { class: "tl-muted", colspan: 4 }, what)));
        }
        if (isOpen && g.kernels) {
          const k = g.kernels;
          const inner = h("table", { class: "tl-kernels" }, h("thead", {}, h("tr", {}, ...["kernel", "calls", "CPU µs", ...(device ? ["device µs"] : [])]
            .map((t, i) => h("th", { class: i ? "tl-num" : "" }, t)))), h("tbody", {}, ...kernelRows(k, device)));
          body.append(h("tr", { class: "tl-kernels-row" }, h("td", { colspan: 5 }, inner,
            h("div", { class: "tl-muted" }, `this region: ${us(k.cpu_us)} µs CPU${device ? `, ${us(k.device_us)} µs device` : ""} in one call`))));
        }
        table.append(body);
      }
      parts.push(table);
      if (rows.length) {
        parts.push(h("div", { class: "tl-muted" }, "median time per region and version (executor/version; ● running now: a region runs its torch version until its fused kernel is compiled); the bars below compare them"));
        parts.push(bars(rows) as unknown as HTMLElement);
      }
    }
    // each region's executor race: the versions' fastest calls, the one kept and why (raced whether timing is on or not)
    const race = ev ? raceView(ev.regions) : null;
    if (race) parts.push(h("h4", {}, "Executor race"), race);
    // the collectives beside the regions: communication against compute, in the graph's communication colour
    const comm = ev ? communicationView(ev.regions, ev.communication) : null;
    if (comm) parts.push(h("h4", {}, "Communication"), comm);
    parts.push(this._compare());
    this.node.replaceChildren(...parts);
  }

  private _profileBar(record: number): HTMLElement {
    const prof = this.tl.timings.profileOf(record);
    const btn = h("button", { type: "button", class: "tl-profile jp-Button jp-mod-styled jp-mod-reject",
      title: "Run one call of this record's compiled program under the torch profiler, on the inputs it was compiled for" },
      prof.state === "running" ? "Profiling…" : "Profile one call");
    btn.disabled = prof.state === "running" || !this.tl.link.ready;
    btn.addEventListener("click", () => void this.profile(record));
    const kernels = this.kernels();
    const say = prof.state === "error" ? h("div", { class: "tl-error tl-profile-error" }, prof.error)
      : h("span", { class: "tl-muted" }, kernels ? "kernels of one profiled call: ▸ opens a region, ▾ closes it"
        : "to see the kernels each region runs");
    return h("div", { class: "tl-profile-bar" }, btn, say);
  }

  private async profile(record: number): Promise<void> {
    this.tl.timings.setProfile(record, { state: "running" });
    try {
      const r = await this.tl.link.request("record.profile", { record });
      const p = this.tl.step.payload;
      if (p && this.tl.step.record === record) p.kernels = r.kernels;  // the step's Timings view shows it too
      // open the costliest region at once, so the first profile shows what it found
      const first = kernelTable(r.kernels, TOP).find((k) => k.region !== OUTSIDE) ?? kernelTable(r.kernels, TOP)[0];
      if (first) this.open.add(first.region);
      this.tl.timings.setProfile(record, { state: "idle", kernels: r.kernels });
    } catch (e) {
      this.tl.timings.setProfile(record, { state: "error", error: `could not profile: ${e instanceof Error ? e.message : String(e)}` });
    }
  }

  private _compare(): HTMLElement {
    const box = h("div", { class: "tl-compare" }, h("h4", {}, "Compare with another record"));
    const s = this.tl.step;
    if (s.record === null) return box;
    const sel = h("select", { class: "tl-compare-with", "aria-label": "record to compare with" }, h("option", { value: "" }, "choose a record…"));
    for (const r of this.tl.records.view().rows) if (r.record !== s.record) sel.append(h("option", { value: r.record }, `#${r.record} ${r.name}: ${r.pipeline}`));
    const c = this.comparison;
    if (c && c.b === s.record) sel.value = String(c.a);
    sel.addEventListener("change", async () => {
      if (!sel.value) return;
      this.comparing = true;
      this.paint();
      try {
        this.comparison = await this.tl.link.request("records.compare", { a: Number(sel.value), b: s.record!, time: true });
        this.compareError = "";
      } catch (e) { this.comparison = null; this.compareError = e instanceof Error ? e.message : String(e); }
      this.comparing = false;
      this.paint();
    });
    box.append(sel);
    if (this.comparing) box.append(h("div", { class: "tl-muted" }, "comparing: timing both compiled programs (24 calls each)…"));
    if (this.compareError) box.append(h("div", { class: "tl-error" }, this.compareError));
    if (c && c.b === s.record && !this.comparing) box.append(this._comparison(c));
    return box;
  }

  private _comparison(c: Comparison): HTMLElement {
    const A = `#${c.a}`, B = `#${c.b}`;
    const pipe = (r: number) => this.tl.records.view().rows.find((x) => x.record === r)?.pipeline ?? "";
    const out = h("div", { class: "tl-comparison" },
      h("div", { class: "tl-cmp-legend" },
        h("div", {}, h("span", { class: "tl-swatch tl-a" }), h("b", {}, `a = ${A}`), " (chosen): ", h("code", {}, pipe(c.a))),
        h("div", {}, h("span", { class: "tl-swatch tl-b" }), h("b", {}, `b = ${B}`), " (this record): ", h("code", {}, pipe(c.b)))));
    // call time
    out.append(h("h5", {}, "Call time (median of 20 calls of each compiled program)"));
    if (c.seconds) {
      const [sa, sb] = c.seconds, max = Math.max(sa, sb);
      out.append(h("div", { class: "tl-call-time" }, speedWords(sa, sb, A, B)),
        h("div", { class: "tl-pair" }, bar(sa / max, `a ${A}: ${(sa * 1e3).toFixed(3)} ms`, "tl-a"), bar(sb / max, `b ${B}: ${(sb * 1e3).toFixed(3)} ms`, "tl-b")));
    } else out.append(h("div", { class: "tl-muted" }, c.note ? `not timed: ${c.note}` : "not timed"));
    // step times
    if (c.a_steps && c.b_steps) {
      out.append(h("h5", {}, "Compile time per pass (ms)"));
      const list = h("div", { class: "tl-step-pairs" });
      for (const p of pairSteps(c.a_steps, c.b_steps)) {
        const spec = p.a?.spec ?? p.b!.spec;
        const shared = p.b?.shared ? " (one step for both: the re-run reused it)" : "";
        const only = !p.a ? ` (only in b ${B})` : !p.b ? ` (only in a ${A})` : "";
        list.append(h("div", { class: "tl-step-pair", "data-spec": spec }, h("div", { class: "tl-step-spec", title: spec }, spec, h("span", { class: "tl-muted" }, only + shared)),
          h("div", { class: "tl-pair" }, p.a ? bar(p.a_frac, `a ${p.a.ms.toFixed(1)}`, "tl-a") : h("div", { class: "tl-pbar tl-none" }, "a: —"),
            p.b ? bar(p.b_frac, `b ${p.b.ms.toFixed(1)}`, `tl-b${p.b.shared ? " tl-shared" : ""}`) : h("div", { class: "tl-pbar tl-none" }, "b: —"))));
      }
      out.append(list);
    }
    // final programs side by side, by stable call id
    out.append(h("h5", {}, "Final programs, call by call"),
      h("div", {}, `symbols ${c.symbols[0]} → ${c.symbols[1]} · fusion regions ${c.regions[0]} → ${c.regions[1]}`));
    const pa = c.programs?.a, pb = c.programs?.b;
    if (pa && pb) {
      const names = Object.keys(pb).filter((n) => n in pa);
      const trace = names.includes(this.trace) ? this.trace : names[0];
      if (names.length > 1) {
        const tsel = h("select", { class: "tl-compare-trace", "aria-label": "trace to compare" }, ...names.map((n) => h("option", { value: n }, n)));
        tsel.value = trace;
        tsel.addEventListener("change", () => { this.trace = tsel.value; this.paint(); });
        out.append(tsel);
      }
      if (trace) {
        out.append(callDiffView(pa[trace], pb[trace], { beforeName: `a ${A}`, afterName: `b ${B}`, limit: 40,
          onSelect: (id) => this.tl.selection.selectNode(id, "diff") }));
      }
    } else {
      const lines = c.program_diff ? c.program_diff.split("\n").length : 0;
      out.append(h("div", { class: "tl-muted" }, lines ? `final programs differ (${lines} diff lines)` : "final programs print the same"));
      if (c.program_diff) out.append(h("pre", { class: "tl-compare-diff" }, c.program_diff));
    }
    return out;
  }
}

export function timingsPanel(tl: IThunderlabSidebar): PanelWithToolbar {
  const panel = new PanelWithToolbar();
  panel.id = "thunderlab-timings";
  panel.title.label = "Timings";
  panel.addClass("tl-panel");
  panel.addWidget(new TimingsBody(tl));
  const subscribe = async (record: number | null) => {
    tl.timings.clear();
    if (!tl.link.ready) return;
    try {
      const r = await tl.link.request("timings.subscribe", { record });
      if (r.record !== null) tl.timings.update(r as any);
    } catch { /* said by the link's state */ }
  };
  tl.records.selectedChanged.connect((_, r) => void subscribe(r));
  tl.link.pushed.connect((_, ev) => { if (ev.type === "timings" && ev.record === tl.records.selected) tl.timings.update(ev); });
  return panel;
}
