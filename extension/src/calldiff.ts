// The diff of two steps' programs, call by call: calls are matched by their stable id (the same across
// passes), so a call that a pass rewrote, moved into a fusion region or handed to another executor shows
// as that one call changed, side by side, with what changed said in words. Shared by every view.
import type { Call } from "./payload";
import { h } from "./dom";

export type { Call, Source } from "./payload";

/** What the diff needs of one step's trace: its printed program and its calls. */
export interface TraceText { program: string; calls?: Call[] }

export interface CallSide { text: string; executor: string | null; region: string | null }
export interface CallRow { kind: "same" | "changed" | "added" | "removed"; id: string; a: CallSide | null; b: CallSide | null; why: string[] }

/** A printed call line without its trailing "# shape [executor]" comment and indentation. */
export function statementOf(line: string): string {
  const at = line.indexOf("  # ");
  return (at >= 0 ? line.slice(0, at) : line).trim();
}

function sides(t: TraceText): Map<string, CallSide> {
  const lines = t.program.split("\n");
  const out = new Map<string, CallSide>();
  for (const c of t.calls ?? []) {
    out.set(c.id, { text: c.line ? statementOf(lines[c.line - 1] ?? "") : c.op, executor: c.executor, region: c.region });
  }
  return out;
}

/** What changed between two sides of one call, in words (empty: nothing). */
export function changeWords(a: CallSide, b: CallSide): string[] {
  const why: string[] = [];
  if (a.region !== b.region) {
    why.push(b.region ? (a.region ? `moved from ${a.region} to ${b.region}` : `fused into ${b.region}`) : `taken out of ${a.region}`);
  }
  if (a.executor !== b.executor) why.push(`executor ${a.executor ?? "none"} → ${b.executor ?? "none"}`);
  if (a.text !== b.text) why.push("rewritten");
  return why;
}

/** The calls of two traces side by side, matched by stable id, in the order of the second; a removed call sits after the call that preceded it. */
export function alignCalls(before: TraceText, after: TraceText): CallRow[] {
  // the same two traces are aligned once (stepping back to a diff is instant)
  const cached = aligned.get(before)?.get(after);
  if (cached) return cached;
  const rows = align(before, after);
  if (!aligned.has(before)) aligned.set(before, new WeakMap());
  aligned.get(before)!.set(after, rows);
  return rows;
}
const aligned = new WeakMap<TraceText, WeakMap<TraceText, CallRow[]>>();

function align(before: TraceText, after: TraceText): CallRow[] {
  const A = sides(before), B = sides(after);
  const aOrder = (before.calls ?? []).map((c) => c.id), bOrder = (after.calls ?? []).map((c) => c.id);
  // removed calls, filed under the last call before them that survives (or "" for the very start)
  const removedAfter = new Map<string, string[]>();
  let anchor = "";
  for (const id of aOrder) {
    if (B.has(id)) { anchor = id; continue; }
    const list = removedAfter.get(anchor);
    if (list) list.push(id); else removedAfter.set(anchor, [id]);
  }
  const rows: CallRow[] = [];
  const pushRemoved = (key: string) => {
    for (const id of removedAfter.get(key) ?? []) rows.push({ kind: "removed", id, a: A.get(id)!, b: null, why: [] });
  };
  pushRemoved("");
  const seen = new Set<string>();
  for (const id of bOrder) {
    if (seen.has(id)) continue;
    seen.add(id);
    const a = A.get(id) ?? null, b = B.get(id)!;
    if (!a) rows.push({ kind: "added", id, a: null, b, why: [] });
    else {
      const why = changeWords(a, b);
      rows.push({ kind: why.length ? "changed" : "same", id, a, b, why });
    }
    pushRemoved(id);
  }
  return rows;
}

export interface DiffSummary { same: number; changed: number; added: number; removed: number; lines: string[] }

/** The diff in a few sentences: counts, executor hand-overs and what was fused into which region. */
export function summarizeCalls(rows: CallRow[], regionExecutor: (r: string) => string | null = () => null): DiffSummary {
  const count = { same: 0, changed: 0, added: 0, removed: 0 };
  const handed = new Map<string, number>();  // "none → torch" -> calls
  const fused = new Map<string, number>();  // region -> calls moved in
  const newRegion = new Map<string, number>();  // region -> members (added or moved)
  let rewritten = 0;
  for (const r of rows) {
    count[r.kind]++;
    if (r.kind === "changed" && r.a && r.b) {
      if (r.a.executor !== r.b.executor) { const k = `${r.a.executor ?? "none"} → ${r.b.executor ?? "none"}`; handed.set(k, (handed.get(k) ?? 0) + 1); }
      if (r.b.region && r.a.region !== r.b.region) fused.set(r.b.region, (fused.get(r.b.region) ?? 0) + 1);
      if (r.a.text !== r.b.text) rewritten++;
    }
    if (r.b?.region && r.kind === "added") newRegion.set(r.b.region, (newRegion.get(r.b.region) ?? 0) + 1);
  }
  const lines: string[] = [];
  const total = count.changed + count.added + count.removed;
  lines.push(total ? `${count.changed} calls changed, ${count.added} added, ${count.removed} removed, ${count.same} unchanged`
    : `no call changed (${count.same} calls, same text, executor and region)`);
  if (handed.size) lines.push("executor assignment: " + [...handed].map(([k, n]) => `${n} ${k}`).join(", "));
  if (fused.size) {
    const regions = [...fused.keys()];
    const calls = [...fused.values()].reduce((x, y) => x + y, 0);
    const names = regions.slice(0, 6).map((g) => `${g} (${fused.get(g)} calls${regionExecutor(g) ? `, ${regionExecutor(g)}` : ""})`).join(", ");
    lines.push(`fused ${calls} calls into ${regions.length} region${regions.length > 1 ? "s" : ""}: ${names}${regions.length > 6 ? ", …" : ""}`);
  }
  if (rewritten) lines.push(`${rewritten} calls rewritten (their printed text differs)`);
  return { ...count, lines };
}

/** The rows to draw: every changed row with `context` unchanged rows around it; longer unchanged runs fold into one. */
export type Shown = { row: CallRow } | { fold: CallRow[] };
export function foldUnchanged(rows: CallRow[], context = 2): Shown[] {
  const out: Shown[] = [];
  const keep = new Uint8Array(rows.length);
  rows.forEach((r, i) => {
    if (r.kind === "same") return;
    for (let k = Math.max(0, i - context); k <= Math.min(rows.length - 1, i + context); k++) keep[k] = 1;
  });
  let run: CallRow[] = [];
  const flush = () => { if (run.length) { out.push(run.length === 1 ? { row: run[0] } : { fold: run }); run = []; } };
  rows.forEach((r, i) => {
    if (keep[i] || r.kind !== "same") { flush(); out.push({ row: r }); } else run.push(r);
  });
  flush();
  return out;
}

/** The main function's signature line of a printed program ("def forward(a, b, ...):"). */
export function signatureOf(program: string): string {
  const defs = program.split("\n").filter((l) => l.startsWith("def "));
  return defs.length ? defs[defs.length - 1] : "";
}

function signatureRow(a: string, b: string): HTMLElement {
  const count = (s: string) => { const m = /\(([^)]*)\)/.exec(s); return m && m[1].trim() ? m[1].split(",").filter((x) => x.trim()).length : 0; };
  const short = (s: string) => s.replace(/\(.*\)/, `(${count(s)} inputs)`);
  const same = a === b;
  const d = h("details", { class: "tl-sig" },
    h("summary", {}, same ? `signature unchanged: ${short(b)}` : `signature changed: ${short(a)} → ${short(b)}`),
    h("div", { class: "tl-sig-text" }, same ? b : `before: ${a}\nafter:  ${b}`));
  return d;
}

function side(s: CallSide | null, why: string[] = []): HTMLElement {
  if (!s) return h("td", { class: "tl-cd-empty" });
  const tag = [s.executor, s.region].filter(Boolean).join(" · ");
  return h("td", {}, h("span", { class: "tl-cd-text" }, s.text), tag ? h("span", { class: "tl-cd-exec" }, ` [${tag}]`) : null,
    why.length ? h("div", { class: "tl-cd-why" }, why.join("; ")) : null);
}

const drawn_ = new WeakMap<CallRow[], { sum: DiffSummary; shown: Shown[] }>();

export interface CallDiffOptions {
  /** Rows drawn before a "show more" button (the rest are drawn when asked: long diffs stay quick). */
  limit?: number; context?: number; onSelect?: (id: string) => void; regionExecutor?: (r: string) => string | null;
  beforeName?: string; afterName?: string;
}

/** The side-by-side diff of two traces by stable call id; null `before` means there is nothing to compare with. */
export function callDiffView(before: TraceText, after: TraceText, opts: CallDiffOptions = {}): HTMLElement {
  const limit = opts.limit ?? 60;  // more than a screenful; the rest on request
  const rows = alignCalls(before, after);
  let derived = drawn_.get(rows);  // the summary and folding of one alignment are made once too
  if (!derived) { derived = { sum: summarizeCalls(rows, opts.regionExecutor), shown: foldUnchanged(rows, opts.context ?? 2) }; drawn_.set(rows, derived); }
  const sum = derived.sum;
  const box = h("div", { class: "tl-calldiff" });
  box.append(h("div", { class: "tl-cd-summary" }, ...sum.lines.map((l) => h("div", {}, l))));
  box.append(signatureRow(signatureOf(before.program), signatureOf(after.program)));
  const table = h("table", { class: "tl-cd-table" },
    h("colgroup", {}, h("col", { class: "tl-cd-col" }), h("col", { class: "tl-cd-col" })),
    h("thead", {}, h("tr", {}, h("th", {}, opts.beforeName ?? "before"), h("th", {}, opts.afterName ?? "after"))));
  const body = h("tbody");
  table.append(body);
  const shown = derived.shown;
  const rowEl = (r: CallRow): HTMLElement => {
    const tr = h("tr", { class: `tl-cd-${r.kind}`, "data-id": r.id }, side(r.a), side(r.b, r.why));
    if (opts.onSelect) tr.addEventListener("click", () => opts.onSelect!(r.id));
    return tr;
  };
  const foldEl = (run: CallRow[]): HTMLElement => {
    const tr = h("tr", { class: "tl-cd-fold" }, h("td", { colspan: 2 }, h("button", { type: "button", class: "tl-cd-unfold" }, `⋯ ${run.length} unchanged calls`)));
    tr.querySelector("button")!.addEventListener("click", () => tr.replaceWith(...run.map(rowEl)));
    return tr;
  };
  let drawn = 0;
  const more = h("button", { type: "button", class: "tl-cd-more" });
  const drawUpTo = (n: number) => {
    const frag = document.createDocumentFragment();
    for (; drawn < Math.min(n, shown.length); drawn++) {
      const s = shown[drawn];
      frag.append("row" in s ? rowEl(s.row) : foldEl(s.fold));
    }
    body.append(frag);
    const left = shown.length - drawn;
    more.textContent = `show ${Math.min(left, limit)} more rows (${left} left)`;
    more.style.display = left > 0 ? "" : "none";
  };
  more.addEventListener("click", () => drawUpTo(drawn + limit));
  drawUpTo(limit);
  if (!rows.length) box.append(h("div", { class: "tl-muted" }, "(no calls)"));
  else box.append(table, more);
  return box;
}
