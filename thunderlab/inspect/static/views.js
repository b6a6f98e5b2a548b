"use strict";
var thunderlabViews = (() => {
  var __defProp = Object.defineProperty;
  var __getOwnPropDesc = Object.getOwnPropertyDescriptor;
  var __getOwnPropNames = Object.getOwnPropertyNames;
  var __hasOwnProp = Object.prototype.hasOwnProperty;
  var __export = (target, all) => {
    for (var name in all)
      __defProp(target, name, { get: all[name], enumerable: true });
  };
  var __copyProps = (to, from, except, desc) => {
    if (from && typeof from === "object" || typeof from === "function") {
      for (let key of __getOwnPropNames(from))
        if (!__hasOwnProp.call(to, key) && key !== except)
          __defProp(to, key, { get: () => from[key], enumerable: !(desc = __getOwnPropDesc(from, key)) || desc.enumerable });
    }
    return to;
  };
  var __toCommonJS = (mod) => __copyProps(__defProp({}, "__esModule", { value: true }), mod);

  // src/views.ts
  var views_exports = {};
  __export(views_exports, {
    startReport: () => startReport,
    widget: () => widget
  });

  // src/dom.ts
  function h(tag, attrs = {}, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
    for (const c of children) if (c) el.append(typeof c === "string" ? document.createTextNode(c) : c);
    return el;
  }
  var ms = (s) => (s * 1e3).toFixed(s < 0.01 ? 3 : 1);

  // src/calldiff.ts
  function statementOf(line) {
    const at = line.indexOf("  # ");
    return (at >= 0 ? line.slice(0, at) : line).trim();
  }
  function sides(t) {
    const lines = t.program.split("\n");
    const out = /* @__PURE__ */ new Map();
    for (const c of t.calls ?? []) {
      out.set(c.id, { text: c.line ? statementOf(lines[c.line - 1] ?? "") : c.op, executor: c.executor, region: c.region });
    }
    return out;
  }
  function changeWords(a, b) {
    const why = [];
    if (a.region !== b.region) {
      why.push(b.region ? a.region ? `moved from ${a.region} to ${b.region}` : `fused into ${b.region}` : `taken out of ${a.region}`);
    }
    if (a.executor !== b.executor) why.push(`executor ${a.executor ?? "none"} → ${b.executor ?? "none"}`);
    if (a.text !== b.text) why.push("rewritten");
    return why;
  }
  function alignCalls(before, after) {
    const cached = aligned.get(before)?.get(after);
    if (cached) return cached;
    const rows = align(before, after);
    if (!aligned.has(before)) aligned.set(before, /* @__PURE__ */ new WeakMap());
    aligned.get(before).set(after, rows);
    return rows;
  }
  var aligned = /* @__PURE__ */ new WeakMap();
  function align(before, after) {
    const A = sides(before), B = sides(after);
    const aOrder = (before.calls ?? []).map((c) => c.id), bOrder = (after.calls ?? []).map((c) => c.id);
    const removedAfter = /* @__PURE__ */ new Map();
    let anchor = "";
    for (const id of aOrder) {
      if (B.has(id)) {
        anchor = id;
        continue;
      }
      const list = removedAfter.get(anchor);
      if (list) list.push(id);
      else removedAfter.set(anchor, [id]);
    }
    const rows = [];
    const pushRemoved = (key) => {
      for (const id of removedAfter.get(key) ?? []) rows.push({ kind: "removed", id, a: A.get(id), b: null, why: [] });
    };
    pushRemoved("");
    const seen = /* @__PURE__ */ new Set();
    for (const id of bOrder) {
      if (seen.has(id)) continue;
      seen.add(id);
      const a = A.get(id) ?? null, b = B.get(id);
      if (!a) rows.push({ kind: "added", id, a: null, b, why: [] });
      else {
        const why = changeWords(a, b);
        rows.push({ kind: why.length ? "changed" : "same", id, a, b, why });
      }
      pushRemoved(id);
    }
    return rows;
  }
  function summarizeCalls(rows, regionExecutor = () => null) {
    const count = { same: 0, changed: 0, added: 0, removed: 0 };
    const handed = /* @__PURE__ */ new Map();
    const fused = /* @__PURE__ */ new Map();
    const newRegion = /* @__PURE__ */ new Map();
    let rewritten = 0;
    for (const r of rows) {
      count[r.kind]++;
      if (r.kind === "changed" && r.a && r.b) {
        if (r.a.executor !== r.b.executor) {
          const k = `${r.a.executor ?? "none"} → ${r.b.executor ?? "none"}`;
          handed.set(k, (handed.get(k) ?? 0) + 1);
        }
        if (r.b.region && r.a.region !== r.b.region) fused.set(r.b.region, (fused.get(r.b.region) ?? 0) + 1);
        if (r.a.text !== r.b.text) rewritten++;
      }
      if (r.b?.region && r.kind === "added") newRegion.set(r.b.region, (newRegion.get(r.b.region) ?? 0) + 1);
    }
    const lines = [];
    const total = count.changed + count.added + count.removed;
    lines.push(total ? `${count.changed} calls changed, ${count.added} added, ${count.removed} removed, ${count.same} unchanged` : `no call changed (${count.same} calls, same text, executor and region)`);
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
  function foldUnchanged(rows, context = 2) {
    const out = [];
    const keep = new Uint8Array(rows.length);
    rows.forEach((r, i) => {
      if (r.kind === "same") return;
      for (let k = Math.max(0, i - context); k <= Math.min(rows.length - 1, i + context); k++) keep[k] = 1;
    });
    let run = [];
    const flush = () => {
      if (run.length) {
        out.push(run.length === 1 ? { row: run[0] } : { fold: run });
        run = [];
      }
    };
    rows.forEach((r, i) => {
      if (keep[i] || r.kind !== "same") {
        flush();
        out.push({ row: r });
      } else run.push(r);
    });
    flush();
    return out;
  }
  function signatureOf(program) {
    const defs = program.split("\n").filter((l) => l.startsWith("def "));
    return defs.length ? defs[defs.length - 1] : "";
  }
  function signatureRow(a, b) {
    const count = (s) => {
      const m = /\(([^)]*)\)/.exec(s);
      return m && m[1].trim() ? m[1].split(",").filter((x) => x.trim()).length : 0;
    };
    const short = (s) => s.replace(/\(.*\)/, `(${count(s)} inputs)`);
    const same = a === b;
    const d = h(
      "details",
      { class: "tl-sig" },
      h("summary", {}, same ? `signature unchanged: ${short(b)}` : `signature changed: ${short(a)} → ${short(b)}`),
      h("div", { class: "tl-sig-text" }, same ? b : `before: ${a}
after:  ${b}`)
    );
    return d;
  }
  function side(s, why = []) {
    if (!s) return h("td", { class: "tl-cd-empty" });
    const tag = [s.executor, s.region].filter(Boolean).join(" · ");
    return h(
      "td",
      {},
      h("span", { class: "tl-cd-text" }, s.text),
      tag ? h("span", { class: "tl-cd-exec" }, ` [${tag}]`) : null,
      why.length ? h("div", { class: "tl-cd-why" }, why.join("; ")) : null
    );
  }
  var drawn_ = /* @__PURE__ */ new WeakMap();
  function callDiffView(before, after, opts = {}) {
    const limit = opts.limit ?? 60;
    const rows = alignCalls(before, after);
    let derived = drawn_.get(rows);
    if (!derived) {
      derived = { sum: summarizeCalls(rows, opts.regionExecutor), shown: foldUnchanged(rows, opts.context ?? 2) };
      drawn_.set(rows, derived);
    }
    const sum = derived.sum;
    const box = h("div", { class: "tl-calldiff" });
    box.append(h("div", { class: "tl-cd-summary" }, ...sum.lines.map((l) => h("div", {}, l))));
    box.append(signatureRow(signatureOf(before.program), signatureOf(after.program)));
    const table = h(
      "table",
      { class: "tl-cd-table" },
      h("colgroup", {}, h("col", { class: "tl-cd-col" }), h("col", { class: "tl-cd-col" })),
      h("thead", {}, h("tr", {}, h("th", {}, opts.beforeName ?? "before"), h("th", {}, opts.afterName ?? "after")))
    );
    const body = h("tbody");
    table.append(body);
    const shown = derived.shown;
    const rowEl = (r) => {
      const tr = h("tr", { class: `tl-cd-${r.kind}`, "data-id": r.id }, side(r.a), side(r.b, r.why));
      if (opts.onSelect) tr.addEventListener("click", () => opts.onSelect(r.id));
      return tr;
    };
    const foldEl = (run) => {
      const tr = h("tr", { class: "tl-cd-fold" }, h("td", { colspan: 2 }, h("button", { type: "button", class: "tl-cd-unfold" }, `⋯ ${run.length} unchanged calls`)));
      tr.querySelector("button").addEventListener("click", () => tr.replaceWith(...run.map(rowEl)));
      return tr;
    };
    let drawn = 0;
    const more = h("button", { type: "button", class: "tl-cd-more" });
    const drawUpTo = (n) => {
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

  // src/textdiff.ts
  function alignLines(a, b) {
    const n = a.length, m = b.length, max = n + m, off = max + 1;
    const v = new Int32Array(2 * max + 3);
    const trace = [];
    let found = n === 0 && m === 0;
    for (let d = 0; d <= max && !found; d++) {
      trace.push(v.slice());
      for (let k = -d; k <= d; k += 2) {
        let x2 = k === -d || k !== d && v[off + k - 1] < v[off + k + 1] ? v[off + k + 1] : v[off + k - 1] + 1;
        let y2 = x2 - k;
        while (x2 < n && y2 < m && a[x2] === b[y2]) {
          x2++;
          y2++;
        }
        v[off + k] = x2;
        if (x2 >= n && y2 >= m) {
          found = true;
          break;
        }
      }
    }
    const ops = [];
    let x = n, y = m;
    for (let d = trace.length - 1; d >= 0; d--) {
      const vd = trace[d], k = x - y;
      const pk = k === -d || k !== d && vd[off + k - 1] < vd[off + k + 1] ? k + 1 : k - 1;
      const px = vd[off + pk], py = px - pk;
      while (x > px && y > py) {
        ops.push("same");
        x--;
        y--;
      }
      if (d > 0) ops.push(x === px ? "add" : "del");
      x = px;
      y = py;
    }
    ops.reverse();
    const rows = [];
    let i = 0, j = 0;
    for (let t = 0; t < ops.length; ) {
      if (ops[t] === "same") {
        rows.push({ kind: "same", a: a[i++], b: b[j++] });
        t++;
        continue;
      }
      const dels = [], adds = [];
      while (t < ops.length && ops[t] !== "same") {
        if (ops[t] === "del") dels.push(a[i++]);
        else adds.push(b[j++]);
        t++;
      }
      for (let q = 0; q < Math.max(dels.length, adds.length); q++) {
        const l = dels[q] ?? null, r = adds[q] ?? null;
        rows.push({ kind: l !== null && r !== null ? "change" : l !== null ? "del" : "add", a: l, b: r });
      }
    }
    return rows;
  }

  // src/panes/diff.ts
  function linesView(a, b) {
    const rows = alignLines((a?.program ?? "").split("\n"), b.program.split("\n"));
    const changed = rows.filter((r) => r.kind !== "same").length;
    const table = h("table", { class: "tl-sbs-table" });
    for (const r of rows) {
      if (r.kind === "same" && changed && rows.length > 60) continue;
      table.append(h("tr", { class: `tl-sbs-${r.kind}` }, h("td", { class: "tl-sbs-a" }, r.a ?? ""), h("td", { class: "tl-sbs-b" }, r.b ?? "")));
    }
    return h(
      "div",
      { class: "tl-sbs" },
      h("div", { class: "tl-muted" }, changed ? `${changed} lines differ` : "the programs print the same (executor assignment shows in the graph)"),
      table
    );
  }
  function render(st, ctx) {
    const p = ctx.payload, trace = ctx.trace;
    const usable = (x) => !!x && x.index !== st.index && (!!ctx.tracesOf(x.index) || !!ctx.load && ctx.tracesOf(x.index) === void 0 && !x.error);
    const prev = [...p.steps].reverse().find((x) => x.index < st.index && usable(x))?.index;
    const against = ctx.state.against;
    const other = against !== void 0 && usable(p.steps[against]) ? against : prev;
    const sel = h("select", { class: "tl-diff-against", "aria-label": "compare with step" });
    for (const x of p.steps) if (usable(x)) sel.append(h("option", { value: x.index }, `vs step ${x.index}: ${x.spec}${x.index === prev ? " (previous)" : ""}`));
    const box = h("div", { class: "tl-diff-pane" }, sel);
    const b = st.traces?.[trace];
    if (other === void 0 || !b) {
      box.append(h("div", { class: "tl-muted" }, "(nothing to compare with: this is the first step)"));
      return box;
    }
    sel.value = String(other);
    sel.addEventListener("change", () => {
      ctx.state.against = Number(sel.value);
      ctx.repaint();
    });
    const theirs = ctx.tracesOf(other);
    if (theirs === void 0) {
      ctx.load?.(other);
      box.append(h("div", { class: "tl-loading tl-muted" }, "loading…"));
      return box;
    }
    const a = theirs?.[trace];
    if (!a) box.append(h("div", { class: "tl-muted" }, `step ${other} has no ${trace} trace: every call is new`));
    if (b.calls && (!a || a.calls)) {
      box.append(callDiffView(a ?? { program: "", calls: [] }, b, {
        beforeName: `step ${other}: ${p.steps[other].spec}`,
        afterName: `step ${st.index}: ${st.spec}`,
        onSelect: (id) => ctx.selection.selectNode(id, "diff"),
        regionExecutor: (r) => p.regions[r]?.executor ?? null
      }));
    } else box.append(linesView(a, b));
    return box;
  }
  var diffPane = {
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
`
  };

  // src/communication.ts
  var COMM_COLOR = "#f4a3c0";
  function communicationRows(c) {
    return Object.entries(c ?? {}).map(([collective, t]) => ({
      collective,
      count: t.count,
      median_ms: t.median_s * 1e3,
      min_ms: t.min_s * 1e3,
      total_ms: t.total_s * 1e3,
      blocked_median_ms: t.blocked_median_s * 1e3,
      blocked_total_ms: t.blocked_total_s * 1e3
    })).sort((a, b) => b.total_ms - a.total_ms || a.collective.localeCompare(b.collective));
  }
  function perCall(regions, c) {
    const rows = communicationRows(c);
    if (!rows.length) return null;
    let calls = 0, compute = 0, timed = false;
    for (const r of Object.values(regions)) {
      const ts = Object.values(r.timings);
      if (!ts.length) continue;
      timed = true;
      calls = Math.max(calls, ts.reduce((n, t) => n + t.count, 0));
      const running = r.timings[r.version] ?? ts[ts.length - 1];
      compute += running.median_s * 1e3;
    }
    const over = timed && calls > 0 ? calls : 1;
    const sum = (f) => rows.reduce((n, r) => n + f(r), 0) / over;
    return {
      calls: timed ? calls : null,
      compute_ms: timed ? compute : null,
      in_flight_ms: sum((r) => r.total_ms),
      blocked_ms: sum((r) => r.blocked_total_ms),
      exchanges: sum((r) => r.count)
    };
  }
  var f3 = (v) => v.toFixed(3);
  function bar(frac, color, label, cls) {
    return h(
      "div",
      { class: `tl-comm-bar ${cls}`, style: "position:relative;height:16px;margin:2px 0;border-radius:2px;overflow:hidden;background:var(--jp-layout-color2,#f0f0f3)" },
      h("span", { class: "tl-comm-fill", style: `position:absolute;left:0;top:0;bottom:0;width:${Math.max(0.5, Math.min(100, frac * 100)).toFixed(1)}%;background:${color}` }),
      h("span", { class: "tl-comm-label", style: "position:relative;padding-left:4px;font-size:11px;line-height:16px;white-space:nowrap" }, label)
    );
  }
  function communicationView(regions, c) {
    const b = perCall(regions, c);
    if (!b) return null;
    const box = h("div", { class: "tl-communication" });
    const per = b.calls !== null ? `per call (${b.calls} calls)` : "in all (no region timed: totals)";
    box.append(h("div", { class: "tl-muted" }, `compute and communication ${per}: the swatch is the graph's communication colour`));
    const max = Math.max(1e-9, b.compute_ms ?? 0, b.in_flight_ms);
    if (b.compute_ms !== null) box.append(bar(b.compute_ms / max, "var(--jp-brand-color2, #90caf9)", `compute (regions): ${f3(b.compute_ms)} ms`, "tl-comm-compute"));
    box.append(bar(b.in_flight_ms / max, COMM_COLOR, `communication: ${f3(b.in_flight_ms)} ms in flight, ${f3(b.blocked_ms)} ms blocked`, "tl-comm-total"));
    const table = h("table", { class: "tl-comm-times", style: "border-collapse:collapse;font-size:12px" }, h("thead", {}, h(
      "tr",
      {},
      ...["collective", "exchanges", "median ms", "min ms", "blocked median ms"].map((t, i) => h("th", { class: i ? "tl-num" : "" }, t))
    )));
    const body = h("tbody");
    for (const r of communicationRows(c)) {
      body.append(h(
        "tr",
        { "data-collective": r.collective },
        h("td", { style: "white-space:nowrap" }, h("span", { class: "tl-swatch", style: `display:inline-block;width:10px;height:10px;margin-right:4px;background:${COMM_COLOR}` }), r.collective),
        h("td", { class: "tl-num" }, String(r.count)),
        h("td", { class: "tl-num" }, f3(r.median_ms)),
        h("td", { class: "tl-num" }, f3(r.min_ms)),
        h("td", { class: "tl-num" }, f3(r.blocked_median_ms))
      ));
    }
    table.append(body);
    box.append(table, h("div", { class: "tl-muted" }, "in flight: from the collective's issue to its wait returning (computation overlaps it); blocked: the time the program stood in the wait"));
    return box;
  }

  // src/graph/groups.ts
  function scopeAt(scope, depth) {
    if (!scope) return null;
    const parts = scope.split(".");
    return parts.length >= depth ? parts.slice(0, depth).join(".") : null;
  }
  function groupOf(n, g) {
    if (g.by === "regions") return n.group;
    if (g.by === "modules") return scopeAt(n.scope, g.depth);
    return null;
  }
  function scopeDepth(graph) {
    let d = 0;
    for (const n of graph.nodes) if (n.scope) d = Math.max(d, n.scope.split(".").length);
    return d;
  }
  function defaultDepth(graph) {
    const max = scopeDepth(graph);
    for (let d = 1; d <= max; d++) {
      const count = /* @__PURE__ */ new Map();
      for (const n of graph.nodes) {
        const k = scopeAt(n.scope, d);
        if (k) count.set(k, (count.get(k) ?? 0) + 1);
      }
      if ([...count.values()].filter((c) => c >= 2).length >= 2) return d;
    }
    return Math.max(1, max);
  }
  function defaultGrouping(graph) {
    if (graph.nodes.some((n) => n.group)) return { by: "regions" };
    if (graph.nodes.some((n) => n.scope)) return { by: "modules", depth: defaultDepth(graph) };
    return { by: "none" };
  }
  function collapseGroups(graph, grouping, collapsed) {
    const byId = new Map(graph.nodes.map((n) => [n.id, n]));
    const rep = (id) => {
      const n = byId.get(id);
      const k = n ? groupOf(n, grouping) : null;
      return k && collapsed.has(k) ? `group:${k}` : id;
    };
    const nodes = [];
    const seen = /* @__PURE__ */ new Map();
    const members = /* @__PURE__ */ new Map();
    for (const n of graph.nodes) {
      const id = rep(n.id);
      if (id !== n.id) members.set(id, (members.get(id) ?? 0) + 1);
      if (seen.has(id)) continue;
      const node = id === n.id ? n : {
        id,
        label: "",
        kind: "region",
        executor: grouping.by === "regions" ? n.executor : null,
        source: null,
        group: null,
        scope: grouping.by === "modules" ? groupOf(n, grouping) : null
      };
      seen.set(id, node);
      nodes.push(node);
    }
    for (const [id, count] of members) seen.get(id).label = `▸ ${id.slice(6)} (${count})`;
    const edges = [];
    const dedup = /* @__PURE__ */ new Set();
    for (const e of graph.edges) {
      const src = rep(e.src), dst = rep(e.dst);
      if (src === dst) continue;
      const key = `${src}\0${dst}\0${e.value}`;
      if (dedup.has(key)) continue;
      dedup.add(key);
      edges.push({ ...e, src, dst });
    }
    return { nodes, edges };
  }
  var PALETTE = ["#cfe3ff", "#d5f5d5", "#ffe2b8", "#f3d0f7", "#fff3a6", "#c9f1ee", "#ffd0d0", "#e2e2e2"];
  function executorColor(executor) {
    if (!executor) return "#ffffff";
    let h2 = 0;
    for (let i = 0; i < executor.length; i++) h2 = h2 * 31 + executor.charCodeAt(i) >>> 0;
    return PALETTE[h2 % PALETTE.length];
  }

  // src/graph/layout.ts
  function layers(items, edges, floatSources) {
    const preds = /* @__PURE__ */ new Map(), succs = /* @__PURE__ */ new Map();
    for (const it of items) {
      preds.set(it.id, []);
      succs.set(it.id, []);
    }
    for (const e of edges) {
      if (e.src === e.dst || !preds.has(e.src) || !preds.has(e.dst)) continue;
      preds.get(e.dst).push(e.src);
      succs.get(e.src).push(e.dst);
    }
    const indeg = /* @__PURE__ */ new Map();
    for (const it of items) indeg.set(it.id, preds.get(it.id).length);
    const order = [];
    const queue = items.filter((it) => indeg.get(it.id) === 0).map((it) => it.id);
    for (let i = 0; i < queue.length; i++) {
      const id = queue[i];
      order.push(id);
      for (const s of succs.get(id)) {
        const d = indeg.get(s) - 1;
        indeg.set(s, d);
        if (d === 0) queue.push(s);
      }
    }
    if (order.length < items.length) {
      const placed = new Set(order);
      for (const it of items) if (!placed.has(it.id)) order.push(it.id);
    }
    const layer = /* @__PURE__ */ new Map();
    for (const id of order) {
      let l = 0;
      for (const p of preds.get(id)) {
        const lp = layer.get(p);
        if (lp !== void 0 && lp + 1 > l) l = lp + 1;
      }
      layer.set(id, l);
    }
    if (floatSources) {
      for (const id of order) {
        if (preds.get(id).length || !floatSources(id)) continue;
        let first = Infinity;
        for (const s of succs.get(id)) first = Math.min(first, layer.get(s));
        if (Number.isFinite(first) && first > 0) layer.set(id, first - 1);
      }
    }
    return layer;
  }
  function layered(items, edges, gapX, gapY, floatSources) {
    var _a;
    const layer = layers(items, edges, floatSources);
    const byId = new Map(items.map((it) => [it.id, it]));
    const rows = [];
    for (const it of items) (rows[_a = layer.get(it.id)] ?? (rows[_a] = [])).push(it.id);
    for (let i = 0; i < rows.length; i++) rows[i] ?? (rows[i] = []);
    const up = /* @__PURE__ */ new Map(), down = /* @__PURE__ */ new Map();
    for (const it of items) {
      up.set(it.id, []);
      down.set(it.id, []);
    }
    for (const e of edges) {
      if (e.src === e.dst || !byId.has(e.src) || !byId.has(e.dst)) continue;
      up.get(e.dst).push(e.src);
      down.get(e.src).push(e.dst);
    }
    const x = /* @__PURE__ */ new Map();
    const place = (row, want) => {
      let right = -Infinity;
      const centres = [];
      for (const id of row) {
        const w = byId.get(id).width;
        let c = want.get(id) ?? 0;
        if (c - w / 2 < right + gapX) c = right + gapX + w / 2;
        centres.push(c);
        right = c + w / 2;
      }
      let shift = 0, n = 0;
      row.forEach((id, i) => {
        const wnt = want.get(id);
        if (wnt !== void 0) {
          shift += centres[i] - wnt;
          n++;
        }
      });
      const s = n ? shift / n : 0;
      row.forEach((id, i) => x.set(id, centres[i] - s));
    };
    const sweep = (rowsInOrder, nb) => {
      for (const row of rowsInOrder) {
        const want = /* @__PURE__ */ new Map();
        for (const id of row) {
          let sum = 0, n = 0;
          for (const o of nb.get(id)) {
            const ox = x.get(o);
            if (ox !== void 0) {
              sum += ox;
              n++;
            }
          }
          if (n) want.set(id, sum / n);
        }
        const prev = new Map(row.map((id, i) => [id, i]));
        let last = -Infinity;
        const key = /* @__PURE__ */ new Map();
        for (const id of row) {
          const w = want.get(id);
          if (w !== void 0) last = w;
          key.set(id, w ?? last);
        }
        row.sort((a, b) => key.get(a) - key.get(b) || prev.get(a) - prev.get(b));
        if (want.size === 0) {
          let c = 0;
          for (const id of row) {
            const w = byId.get(id).width;
            want.set(id, c + w / 2);
            c += w + gapX;
          }
        } else {
          for (const id of row) if (!want.has(id)) want.set(id, key.get(id) === -Infinity ? 0 : key.get(id));
        }
        place(row, want);
      }
    };
    sweep(rows, up);
    sweep([...rows].reverse(), down);
    sweep(rows, up);
    let minX = Infinity, maxX = -Infinity;
    for (const it of items) {
      const c = x.get(it.id);
      minX = Math.min(minX, c - it.width / 2);
      maxX = Math.max(maxX, c + it.width / 2);
    }
    if (!items.length) {
      minX = 0;
      maxX = 0;
    }
    const pos = /* @__PURE__ */ new Map();
    let y = 0;
    for (const row of rows) {
      let hmax = 0;
      for (const id of row) hmax = Math.max(hmax, byId.get(id).height);
      for (const id of row) {
        const it = byId.get(id);
        pos.set(id, { x: x.get(id) - it.width / 2 - minX, y: y + (hmax - it.height) / 2 });
      }
      y += hmax + gapY;
    }
    return { pos, width: maxX - minX, height: Math.max(0, y - gapY) };
  }
  function layoutCompound(nodes, edges, opts = {}) {
    const gapX = opts.gapX ?? 18, gapY = opts.gapY ?? 34, pad = opts.pad ?? 16, gpad = opts.groupPad ?? 10, title = opts.groupTitle ?? 16;
    const groupOf2 = new Map(nodes.map((n) => [n.id, n.group]));
    const members = /* @__PURE__ */ new Map();
    for (const n of nodes) if (n.group) (members.get(n.group) ?? members.set(n.group, []).get(n.group)).push(n);
    const blockOf = (id) => {
      const g = groupOf2.get(id);
      return g ? `\0${g}` : id;
    };
    const inner = /* @__PURE__ */ new Map();
    const innerEdges = /* @__PURE__ */ new Map();
    for (const e of edges) {
      const g = groupOf2.get(e.src);
      if (g && g === groupOf2.get(e.dst)) (innerEdges.get(g) ?? innerEdges.set(g, []).get(g)).push(e);
    }
    for (const [g, ms2] of members) inner.set(g, layered(ms2, innerEdges.get(g) ?? [], gapX, gapY, () => true));
    const items = [];
    const seen = /* @__PURE__ */ new Set();
    for (const n of nodes) {
      const b = blockOf(n.id);
      if (seen.has(b)) continue;
      seen.add(b);
      if (n.group) {
        const l = inner.get(n.group);
        items.push({ id: b, width: l.width + 2 * gpad, height: l.height + 2 * gpad + title });
      } else items.push({ id: b, width: n.width, height: n.height });
    }
    const outerEdges = [];
    const dedup = /* @__PURE__ */ new Set();
    for (const e of edges) {
      const s = blockOf(e.src), d = blockOf(e.dst);
      if (s === d) continue;
      const k = `${s}${d}`;
      if (dedup.has(k)) continue;
      dedup.add(k);
      outerEdges.push({ src: s, dst: d });
    }
    const fs = opts.floatSources;
    const outer = layered(items, outerEdges, gapX * 1.5, gapY, fs ? (id) => !id.startsWith("\0") && fs(id) : void 0);
    const out = /* @__PURE__ */ new Map();
    const groups = [];
    const size = new Map(nodes.map((n) => [n.id, n]));
    for (const it of items) {
      const p = outer.pos.get(it.id);
      const x0 = p.x + pad, y0 = p.y + pad;
      if (it.id.startsWith("\0")) {
        const g = it.id.slice(1), l = inner.get(g);
        groups.push({ name: g, x: x0, y: y0, width: it.width, height: it.height, members: members.get(g).map((m) => m.id) });
        for (const m of members.get(g)) {
          const q = l.pos.get(m.id);
          out.set(m.id, { x: x0 + gpad + q.x, y: y0 + gpad + title + q.y, width: m.width, height: m.height });
        }
      } else {
        const n = size.get(it.id);
        out.set(it.id, { x: x0, y: y0, width: n.width, height: n.height });
      }
    }
    return { nodes: out, groups, width: outer.width + 2 * pad, height: outer.height + 2 * pad };
  }

  // src/graph/model.ts
  function changeMarks(changes) {
    const marks = /* @__PURE__ */ new Map();
    if (!changes) return marks;
    for (const id of changes.regrouped ?? []) marks.set(id, "regrouped");
    for (const id of changes.changed) marks.set(id, "changed");
    for (const id of changes.executor ?? []) marks.set(id, "executor");
    for (const id of changes.added) marks.set(id, "added");
    return marks;
  }
  function changeLegend(changes) {
    if (!changes) return [];
    const ex = changes.executor?.length ?? 0, other = changes.changed.length - ex;
    const rows = [
      { kind: "added", count: changes.added.length, text: "added" },
      { kind: "executor", count: ex, text: "executor assigned or changed" },
      { kind: "changed", count: other, text: "changed (what it computes)" },
      { kind: "regrouped", count: changes.regrouped?.length ?? 0, text: "moved into, out of or between fusion regions" },
      { kind: "removed", count: changes.removed.length, text: "removed (not drawn)" }
    ];
    return rows.filter((r) => r.count > 0);
  }
  function changeSummary(changes) {
    if (!changes) return "first step: nothing to compare with";
    const ex = changes.executor?.length ?? 0, rg = changes.regrouped?.length ?? 0;
    const parts = [
      `+${changes.added.length} added`,
      `~${changes.changed.length} changed` + (ex ? ` (${ex} by executor assignment)` : ""),
      `−${changes.removed.length} removed`
    ];
    if (rg) parts.push(`${rg} moved into or between fusion regions`);
    return "vs previous step: " + parts.join(", ");
  }
  function executorsIn(g) {
    return [...new Set(g.nodes.map((n) => n.executor).filter((e) => !!e))].sort();
  }
  function shortType(t) {
    const m = /^\S+\s+(\S.*)$/.exec(t);
    return m && m[1].includes("[") ? m[1] : t;
  }
  function typeLine(n) {
    const outs = n.outputs ?? [];
    if (!outs.length) return "";
    return shortType(outs[0][1]) + (outs.length > 1 ? ` +${outs.length - 1}` : "");
  }
  var CHAR_W = 7.3;
  var NODE_H2 = 36;
  var MIN_W = 90;
  var MAX_W = 460;
  function nodeWidth(n) {
    const chars = Math.max(n.label.length, typeLine(n).length);
    return Math.round(Math.min(MAX_W, Math.max(MIN_W, chars * CHAR_W + 16)));
  }
  function searchNodes(g, query) {
    const words = query.toLowerCase().split(/\s+/).filter(Boolean);
    if (!words.length) return [];
    const out = [];
    for (const n of g.nodes) {
      const hay = [
        n.id,
        n.label,
        n.scope ?? "",
        n.executor ?? "",
        n.group ?? "",
        n.source ?? "",
        ...(n.outputs ?? []).flatMap((o) => o)
      ].join("").toLowerCase();
      if (words.every((w) => hay.includes(w))) out.push(n.id);
    }
    return out;
  }
  function nextMatch(matches, current, step = 1) {
    if (!matches.length) return null;
    const i = current === null ? -1 : matches.indexOf(current);
    if (i < 0) return step === 1 ? matches[0] : matches[matches.length - 1];
    return matches[(i + step + matches.length) % matches.length];
  }
  function crossLinks(trace, node, traces) {
    const out = [];
    if (node.derived_from) {
      for (const [name, g] of Object.entries(traces)) {
        if (name === trace) continue;
        const f = g.nodes.find((m) => m.id === node.derived_from);
        if (f) out.push({ trace: name, id: f.id, label: f.label });
      }
    }
    for (const [name, g] of Object.entries(traces)) {
      if (name === trace) continue;
      for (const m of g.nodes) if (m.derived_from === node.id) out.push({ trace: name, id: m.id, label: m.label });
    }
    return out;
  }
  function nodeDetails(g, n, opts = {}) {
    const rows = [["op", n.label], ["id", n.id], ["kind", n.kind]];
    const ins = g.edges.filter((e) => e.dst === n.id);
    for (const e of ins) rows.push(["input", `${e.value}: ${e.type}`]);
    for (const [name, type] of n.outputs ?? []) rows.push(["output", `${name}: ${type}`]);
    if (!n.outputs) for (const e of g.edges.filter((e2) => e2.src === n.id)) rows.push(["output", `${e.value}: ${e.type}`]);
    if (n.executor) rows.push(["executor", n.executor]);
    if (n.group) rows.push(["region", n.group]);
    if (n.scope) rows.push(["module", n.scope]);
    if (n.source) rows.push(["source", n.source]);
    if (n.derived_from) rows.push(["derived from", n.derived_from]);
    if (opts.mark) rows.push(["this step", MARK_TEXT[opts.mark]]);
    for (const [ex, why] of opts.declines ?? []) rows.push(["not fused", `${ex}: ${why}`]);
    return rows;
  }
  var MARK_TEXT = {
    added: "added by this step",
    executor: "executor assigned or changed by this step",
    changed: "changed by this step",
    regrouped: "moved into, out of or between fusion regions by this step"
  };

  // src/graph/view.ts
  var SVGNS = "http://www.w3.org/2000/svg";
  function sv(tag, attrs = {}, text) {
    const el = document.createElementNS(SVGNS, tag);
    for (const k in attrs) el.setAttribute(k, String(attrs[k]));
    if (text !== void 0) el.textContent = text;
    return el;
  }
  var MARK_COLOR = {
    added: "#1a7f37",
    executor: "#0969da",
    changed: "#bf8700",
    regrouped: "#8250df",
    removed: "#cf222e"
  };
  var COLLAPSE_ABOVE = 300;
  var CULL_ABOVE = 500;
  var FAR = 0.45;
  var GRAPH_CSS = `
.thunderlab .tl-graph-view{display:flex;flex-direction:column;gap:4px}
.thunderlab .tl-graph-bar input.tl-graph-search{width:16em}
.thunderlab .tl-graph-legend{display:flex;flex-wrap:wrap;gap:4px 12px;align-items:center;font-size:12px}
.thunderlab .tl-swatch{display:inline-block;width:12px;height:12px;border:1px solid #666;border-radius:2px;vertical-align:-2px;margin-right:3px}
.thunderlab .tl-graph-main{display:flex;flex-wrap:wrap;gap:6px;align-items:flex-start}
.thunderlab .tl-graph-wrap{position:relative;flex:1 1 420px;min-width:280px;height:620px;overflow:hidden;border:1px solid var(--jp-border-color2,#d0d0d0);background:var(--jp-layout-color0,#fff);touch-action:none;cursor:grab}
.thunderlab .tl-graph-wrap.tl-panning{cursor:grabbing}
.thunderlab svg.tl-graph{display:block;width:100%;height:100%}
.thunderlab svg.tl-graph text{font:12px ui-monospace,Menlo,Consolas,monospace;pointer-events:none}
.thunderlab svg.tl-graph text.tl-type{font-size:11px;fill:#3a3a3a}
.thunderlab svg.tl-graph text.tl-name{fill:#111}
.thunderlab svg.tl-graph.tl-far text{display:none}
.thunderlab svg.tl-graph .tl-node{cursor:pointer}
.thunderlab svg.tl-graph .tl-edge{fill:none;stroke:var(--jp-ui-font-color3,#9a9a9a);stroke-width:1.2}
.thunderlab svg.tl-graph .tl-edge.tl-near{stroke:var(--jp-brand-color1,#1f6feb);stroke-width:2.4}
.thunderlab svg.tl-graph .tl-group rect{fill:rgba(120,120,200,.06);stroke:#7a7ac0;stroke-dasharray:5,3}
.thunderlab svg.tl-graph .tl-group text{fill:var(--jp-ui-font-color2,#55559a);cursor:pointer;pointer-events:auto}
.thunderlab svg.tl-graph .tl-match rect{stroke:#e3b341 !important;stroke-width:4 !important}
.thunderlab svg.tl-graph .tl-selected rect{stroke:var(--jp-brand-color1,#1f6feb) !important;stroke-width:4 !important}
.thunderlab .tl-minimap{position:absolute;right:6px;bottom:6px;border:1px solid var(--jp-border-color1,#aaa);background:var(--jp-layout-color1,#fafafa);opacity:.92;cursor:crosshair}
.thunderlab .tl-graph-details{flex:0 1 320px;min-width:220px;max-height:620px;overflow:auto;font-size:12px;border:1px solid var(--jp-border-color2,#d0d0d0);padding:6px}
.thunderlab .tl-graph-details table{width:100%}
.thunderlab .tl-graph-details td{overflow-wrap:anywhere;font-family:ui-monospace,monospace}
.thunderlab .tl-graph-details td:first-child{white-space:nowrap;font-family:inherit;color:var(--jp-ui-font-color2,#555)}
.thunderlab .tl-graph-details button{margin:2px 0;text-align:left}
`;
  function graphView(g, changes, opts = {}) {
    const collapseAbove = opts.collapseAbove ?? COLLAPSE_ABOVE;
    const wrap = h("div", { class: "tl-graph-view" }, h("style", {}, GRAPH_CSS));
    const wanted = opts.grouping ?? "auto";
    let grouping = wanted === "regions" ? { by: "regions" } : wanted === "none" ? { by: "none" } : wanted === "modules" && scopeDepth(g) ? { by: "modules", depth: defaultDepth(g) } : defaultGrouping(g);
    const collapsed = /* @__PURE__ */ new Set();
    const byId = new Map(g.nodes.map((n) => [n.id, n]));
    const names = () => [...new Set(g.nodes.map((n) => groupOf(n, grouping)).filter((k) => !!k))];
    const collapseAll = () => {
      collapsed.clear();
      for (const k of names()) collapsed.add(k);
    };
    const marks = changeMarks(changes);
    const trace = opts.trace ?? "";
    const traces = opts.traces ?? (trace ? { [trace]: g } : {});
    const bar2 = h("div", { class: "tl-bar tl-graph-bar" });
    const bySel = h(
      "select",
      { class: "tl-group-by", title: "what the outlined groups are" },
      h("option", { value: "regions" }, "group: fusion regions"),
      h("option", { value: "modules" }, "group: modules"),
      h("option", { value: "none" }, "group: none")
    );
    const maxDepth = scopeDepth(g);
    if (!maxDepth) bySel.querySelector('option[value="modules"]').setAttribute("disabled", "");
    const depthSel = h("select", { class: "tl-depth", title: "module depth" });
    for (let d = 1; d <= maxDepth; d++) depthSel.append(h("option", { value: d }, `depth ${d}`));
    const collapseBtn = h("button", { class: "tl-collapse-all", type: "button" }, "collapse all");
    const expandBtn = h("button", { class: "tl-expand-all", type: "button" }, "expand all");
    const search = h("input", { class: "tl-graph-search", type: "search", placeholder: "search name, op, module, shape…", "aria-label": "search the graph" });
    const prevBtn = h("button", { class: "tl-search-prev", type: "button", title: "previous match (Shift+Enter)" }, "↑");
    const nextBtn = h("button", { class: "tl-search-next", type: "button", title: "next match (Enter)" }, "↓");
    const found = h("span", { class: "tl-muted tl-search-count" });
    const zoomOut = h("button", { class: "tl-zoom-out", type: "button", title: "zoom out" }, "−");
    const zoomIn = h("button", { class: "tl-zoom-in", type: "button", title: "zoom in" }, "+");
    const fitBtn = h("button", { class: "tl-fit", type: "button", title: "show the whole graph" }, "fit");
    bar2.append(bySel, depthSel, collapseBtn, expandBtn, search, prevBtn, nextBtn, found, zoomOut, zoomIn, fitBtn);
    const legend = h("div", { class: "tl-graph-legend" });
    for (const ex of executorsIn(g)) legend.append(h(
      "span",
      { class: "tl-legend-executor", "data-executor": ex },
      h("span", { class: "tl-swatch", style: `background:${executorColor(ex)}` }),
      ex
    ));
    if (g.nodes.some((n) => n.kind === "communication")) legend.append(h(
      "span",
      { class: "tl-legend-communication" },
      h("span", { class: "tl-swatch", style: `background:${COMM_COLOR}` }),
      "communication (torch.distributed)"
    ));
    legend.append(h("span", { class: "tl-muted tl-changes" }, changeSummary(changes)));
    for (const row of changeLegend(changes)) legend.append(h(
      "span",
      { class: `tl-legend-mark tl-legend-${row.kind}` },
      h("span", { class: "tl-swatch", style: `background:transparent;border:3px solid ${MARK_COLOR[row.kind]}` }),
      `${row.count} ${row.text}`
    ));
    const main = h("div", { class: "tl-graph-main" });
    const port = h("div", { class: "tl-graph-wrap" });
    const svg = sv("svg", { class: "tl-graph", xmlns: SVGNS });
    const defs = sv("defs");
    const marker = sv("marker", { id: "tl-arrow", viewBox: "0 0 8 8", refX: 8, refY: 4, markerWidth: 8, markerHeight: 8, markerUnits: "userSpaceOnUse", orient: "auto" });
    marker.append(sv("path", { d: "M0,0 L8,4 L0,8 z", fill: "#888" }));
    defs.append(marker);
    const scene = sv("g", { class: "tl-scene" });
    svg.append(defs, scene);
    const mini = h("canvas", { class: "tl-minimap", width: 180, height: 140 });
    port.append(svg, mini);
    const details = h("div", { class: "tl-graph-details" }, h("div", { class: "tl-muted" }, "Click a node for its details."));
    main.append(port, details);
    wrap.append(bar2, legend, main);
    let lay = null;
    let shown = g;
    let view = { x: 0, y: 0, k: 1 };
    let selected = null;
    let matches = [];
    const nodeEls = /* @__PURE__ */ new Map();
    const edgeEls = [];
    let fitted = false;
    let pending = false;
    const matchShown = /* @__PURE__ */ new Set();
    const portSize = () => ({ w: port.clientWidth || 800, h: port.clientHeight || 600 });
    const apply = () => {
      scene.setAttribute("transform", `translate(${view.x},${view.y}) scale(${view.k})`);
      svg.classList.toggle("tl-far", view.k < FAR);
      svg.setAttribute("data-zoom", view.k.toFixed(3));
      paintMini();
      if (culled && !pending && typeof requestAnimationFrame === "function") {
        pending = true;
        requestAnimationFrame(() => {
          pending = false;
          renderScene();
        });
      }
    };
    const fit = () => {
      if (!lay) return;
      const { w, h: ht } = portSize();
      const k = Math.min(w / lay.width, ht / lay.height, 1.5);
      view = { k, x: (w - lay.width * k) / 2, y: Math.max(0, (ht - lay.height * k) / 2) };
      apply();
    };
    const zoomAt = (factor, cx, cy) => {
      const k = Math.max(0.02, Math.min(4, view.k * factor));
      view = { k, x: cx - (cx - view.x) * k / view.k, y: cy - (cy - view.y) * k / view.k };
      apply();
    };
    const centre = (id) => {
      const b = lay?.nodes.get(id);
      if (!b) return;
      const { w, h: ht } = portSize();
      const k = Math.max(view.k, 0.9);
      view = { k, x: w / 2 - (b.x + b.width / 2) * k, y: ht / 2 - (b.y + b.height / 2) * k };
      apply();
      renderScene();
    };
    let miniScale = 1, miniOff = { x: 0, y: 0 };
    function paintMini() {
      const ctx = mini.getContext("2d");
      if (!ctx || !lay) return;
      const W = mini.width, H = mini.height;
      miniScale = Math.min(W / lay.width, H / lay.height);
      miniOff = { x: (W - lay.width * miniScale) / 2, y: (H - lay.height * miniScale) / 2 };
      ctx.clearRect(0, 0, W, H);
      ctx.fillStyle = "rgba(122,122,192,.15)";
      for (const gb of lay.groups) ctx.fillRect(miniOff.x + gb.x * miniScale, miniOff.y + gb.y * miniScale, gb.width * miniScale, gb.height * miniScale);
      for (const n of shown.nodes) {
        const b = lay.nodes.get(n.id);
        ctx.fillStyle = marks.has(n.id) ? MARK_COLOR[marks.get(n.id)] : n.kind === "communication" ? COMM_COLOR : n.executor ? executorColor(n.executor) : "#999";
        ctx.fillRect(miniOff.x + b.x * miniScale, miniOff.y + b.y * miniScale, Math.max(1.5, b.width * miniScale), Math.max(1.5, b.height * miniScale));
      }
      const { w, h: ht } = portSize();
      ctx.strokeStyle = "#1f6feb";
      ctx.lineWidth = 1.5;
      ctx.strokeRect(miniOff.x + -view.x / view.k * miniScale, miniOff.y + -view.y / view.k * miniScale, w / view.k * miniScale, ht / view.k * miniScale);
    }
    const miniPan = (ev) => {
      const r = mini.getBoundingClientRect();
      const gx = (ev.clientX - r.left - miniOff.x) / miniScale, gy = (ev.clientY - r.top - miniOff.y) / miniScale;
      const { w, h: ht } = portSize();
      view = { ...view, x: w / 2 - gx * view.k, y: ht / 2 - gy * view.k };
      apply();
    };
    mini.addEventListener("pointerdown", (ev) => {
      ev.stopPropagation();
      miniPan(ev);
      mini.setPointerCapture?.(ev.pointerId);
    });
    mini.addEventListener("pointermove", (ev) => {
      if (ev.buttons & 1) miniPan(ev);
    });
    let drag = null;
    port.addEventListener("pointerdown", (ev) => {
      if (ev.button !== 0) return;
      drag = { x: ev.clientX, y: ev.clientY, vx: view.x, vy: view.y, moved: false };
    });
    port.addEventListener("pointermove", (ev) => {
      if (!drag) return;
      const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
      if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
      if (!drag.moved) {
        drag.moved = true;
        port.classList.add("tl-panning");
        port.setPointerCapture?.(ev.pointerId);
      }
      view = { ...view, x: drag.vx + dx, y: drag.vy + dy };
      apply();
    });
    const endDrag = () => {
      setTimeout(() => {
        drag = null;
      }, 0);
      port.classList.remove("tl-panning");
    };
    port.addEventListener("pointerup", endDrag);
    port.addEventListener("pointercancel", endDrag);
    port.addEventListener("wheel", (ev) => {
      ev.preventDefault();
      const r = port.getBoundingClientRect();
      zoomAt(Math.exp(-ev.deltaY * 15e-4), ev.clientX - r.left, ev.clientY - r.top);
    }, { passive: false });
    const centreOfPort = () => {
      const { w, h: ht } = portSize();
      return [w / 2, ht / 2];
    };
    zoomIn.addEventListener("click", () => zoomAt(1.25, ...centreOfPort()));
    zoomOut.addEventListener("click", () => zoomAt(0.8, ...centreOfPort()));
    fitBtn.addEventListener("click", fit);
    const wasDrag = () => !!drag?.moved;
    const declinesOf = (id) => opts.declines?.[id.replace(/^b/, "")] ?? [];
    const showDetails = (id) => {
      details.replaceChildren();
      const n = id ? byId.get(id) ?? shown.nodes.find((m) => m.id === id) : null;
      if (!n) {
        details.append(h("div", { class: "tl-muted" }, "Click a node for its details."));
        return;
      }
      if (n.id.startsWith("group:")) {
        const name = n.id.slice(6);
        const open = h("button", { type: "button", class: "tl-expand-group" }, `expand ${name}`);
        open.addEventListener("click", () => {
          collapsed.delete(name);
          draw();
        });
        details.append(h("strong", {}, name), h("div", {}, n.label), open);
        return;
      }
      const body = h("tbody");
      for (const [k, v] of nodeDetails(g, n, { mark: marks.get(n.id), declines: declinesOf(n.id) }))
        body.append(h("tr", { "data-key": k }, h("td", {}, k), h("td", {}, v)));
      details.append(h("strong", { class: "tl-details-title" }, n.label), h("table", { class: "tl-details" }, body));
      const links = crossLinks(trace, n, traces);
      if (links.length) {
        const box = h("div", { class: "tl-links" }, h("div", { class: "tl-muted" }, n.derived_from ? "comes from (forward):" : "derived in other traces:"));
        for (const l of links.slice(0, 40)) {
          const b = h("button", { type: "button", class: "tl-jump", "data-trace": l.trace, "data-id": l.id }, `→ ${l.trace}: ${l.label} (${l.id})`);
          b.addEventListener("click", () => opts.onJump ? opts.onJump(l.trace, l.id) : void 0);
          box.append(b);
        }
        if (links.length > 40) box.append(h("div", { class: "tl-muted" }, `and ${links.length - 40} more`));
        details.append(box);
      }
    };
    const select = (id, centreIt = false) => {
      if (selected) nodeEls.get(selected)?.classList.remove("tl-selected");
      for (const e of edgeEls) e.el.classList.remove("tl-near");
      selected = id;
      if (id) {
        nodeEls.get(id)?.classList.add("tl-selected");
        for (const e of edgeEls) if (e.src === id || e.dst === id) e.el.classList.add("tl-near");
        if (centreIt) {
          centre(id);
          nodeEls.get(id)?.classList.add("tl-selected");
        }
      }
      wrap.setAttribute("data-selected", id ?? "");
      showDetails(id);
    };
    const reveal = (id) => {
      const n = byId.get(id);
      const k = n ? groupOf(n, grouping) : null;
      if (k && collapsed.has(k)) {
        collapsed.delete(k);
        draw();
      }
      select(lay?.nodes.has(id) ? id : k && lay?.nodes.has(`group:${k}`) ? `group:${k}` : null, true);
    };
    const markMatches = () => {
      for (const el of scene.querySelectorAll(".tl-match")) el.classList.remove("tl-match");
      matchShown.clear();
      for (const id of matches) {
        const n = byId.get(id), k = groupOf(n, grouping);
        matchShown.add(k && collapsed.has(k) ? `group:${k}` : id);
      }
      for (const id of matchShown) nodeEls.get(id)?.classList.add("tl-match");
    };
    const runSearch = () => {
      matches = searchNodes(g, search.value);
      found.textContent = search.value.trim() ? `${matches.length} found` : "";
      markMatches();
    };
    const step = (dir) => {
      if (!matches.length) runSearch();
      const next = nextMatch(matches, selected, dir);
      if (next) {
        reveal(next);
        found.textContent = `${matches.indexOf(next) + 1} of ${matches.length}`;
        markMatches();
      }
    };
    search.addEventListener("input", runSearch);
    search.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter") {
        ev.preventDefault();
        step(ev.shiftKey ? -1 : 1);
      }
    });
    nextBtn.addEventListener("click", () => step(1));
    prevBtn.addEventListener("click", () => step(-1));
    const sync = () => {
      bySel.value = grouping.by;
      depthSel.style.display = grouping.by === "modules" ? "" : "none";
      if (grouping.by === "modules") depthSel.value = String(grouping.depth);
    };
    const regroup = (next) => {
      grouping = next;
      collapsed.clear();
      if (g.nodes.length > collapseAbove) collapseAll();
      sync();
      draw();
    };
    bySel.addEventListener("change", () => {
      const by = bySel.value;
      regroup(by === "modules" ? { by: "modules", depth: defaultDepth(g) } : by === "regions" ? { by: "regions" } : { by: "none" });
    });
    depthSel.addEventListener("change", () => regroup({ by: "modules", depth: Number(depthSel.value) }));
    collapseBtn.addEventListener("click", () => {
      collapseAll();
      draw();
    });
    expandBtn.addEventListener("click", () => {
      collapsed.clear();
      draw();
    });
    scene.addEventListener("click", (ev) => {
      if (wasDrag()) return;
      const t = ev.target;
      const node = t.closest?.("g.tl-node"), group = t.closest?.("g.tl-group");
      const id = node?.getAttribute("data-id");
      if (id) {
        if (id.startsWith("group:")) {
          collapsed.delete(id.slice(6));
          draw();
        } else select(id);
      } else if (group) {
        collapsed.add(group.getAttribute("data-group"));
        draw();
      }
    });
    let edgeItems = [];
    let nodeMarks = /* @__PURE__ */ new Map();
    let culled = false;
    let drawnRect = { x0: 0, y0: 0, x1: 0, y1: 0 };
    function draw() {
      shown = collapseGroups(g, grouping, collapsed);
      nodeMarks = new Map(marks);
      for (const n of g.nodes) {
        const k = groupOf(n, grouping);
        if (k && collapsed.has(k) && marks.has(n.id) && !nodeMarks.has(`group:${k}`)) nodeMarks.set(`group:${k}`, "changed");
      }
      lay = layoutCompound(
        shown.nodes.map((n) => ({ id: n.id, width: nodeWidth(n), height: NODE_H2, group: n.id.startsWith("group:") ? null : groupOf(n, grouping) })),
        shown.edges,
        { floatSources: (id) => byId.get(id)?.kind === "input" }
      );
      edgeItems = [];
      for (const e of shown.edges) {
        const a = lay.nodes.get(e.src), b = lay.nodes.get(e.dst);
        if (!a || !b) continue;
        const x1 = a.x + a.width / 2, y1 = a.y + a.height, x2 = b.x + b.width / 2, y2 = b.y;
        const my = (y1 + y2) / 2;
        edgeItems.push({
          src: e.src,
          dst: e.dst,
          d: `M${x1},${y1} C${x1},${my} ${x2},${my} ${x2},${y2}`,
          x0: Math.min(x1, x2),
          y0: Math.min(y1, y2),
          x1: Math.max(x1, x2),
          y1: Math.max(y1, y2)
        });
      }
      culled = shown.nodes.length > CULL_ABOVE;
      if (selected && !lay.nodes.has(selected)) selected = null;
      if (!fitted || !port.isConnected) {
        fitted = true;
        initialView();
      } else apply();
      renderScene(true);
      if (selected) select(selected);
    }
    function wantedRect() {
      if (!culled || !lay) return { x0: -Infinity, y0: -Infinity, x1: Infinity, y1: Infinity };
      const { w, h: ht } = portSize();
      const x0 = -view.x / view.k, y0 = -view.y / view.k, vw = w / view.k, vh = ht / view.k;
      return { x0: x0 - vw / 2, y0: y0 - vh / 2, x1: x0 + vw * 1.5, y1: y0 + vh * 1.5 };
    }
    function renderScene(force = false) {
      if (!lay) return;
      const r = wantedRect();
      if (!force && culled) {
        const { w, h: ht } = portSize();
        const x0 = -view.x / view.k, y0 = -view.y / view.k;
        const inside = x0 >= drawnRect.x0 && y0 >= drawnRect.y0 && x0 + w / view.k <= drawnRect.x1 && y0 + ht / view.k <= drawnRect.y1;
        if (inside) return;
      }
      if (!force && !culled) return;
      drawnRect = r;
      const hit = (x0, y0, x1, y1) => x1 >= r.x0 && x0 <= r.x1 && y1 >= r.y0 && y0 <= r.y1;
      const frag = document.createDocumentFragment();
      for (const gb of lay.groups) {
        if (!hit(gb.x, gb.y, gb.x + gb.width, gb.y + gb.height)) continue;
        const box = sv("g", { class: "tl-group", "data-group": gb.name });
        box.append(sv("rect", { x: gb.x, y: gb.y, width: gb.width, height: gb.height, rx: 6 }));
        box.append(sv("title", {}, `${gb.name}: click to collapse`), sv("text", { x: gb.x + 6, y: gb.y + 13 }, `▾ ${gb.name}`));
        frag.append(box);
      }
      edgeEls.length = 0;
      const edgeLayer = sv("g", { class: "tl-edges" });
      for (const e of edgeItems) {
        if (!hit(e.x0, e.y0, e.x1, e.y1)) continue;
        const near = selected !== null && (e.src === selected || e.dst === selected);
        const el = sv("path", { class: near ? "tl-edge tl-near" : "tl-edge", d: e.d, "marker-end": "url(#tl-arrow)" });
        edgeEls.push({ src: e.src, dst: e.dst, el });
        edgeLayer.append(el);
      }
      frag.append(edgeLayer);
      nodeEls.clear();
      for (const n of shown.nodes) {
        const b = lay.nodes.get(n.id);
        if (!hit(b.x, b.y, b.x + b.width, b.y + b.height)) continue;
        const mark = nodeMarks.get(n.id);
        const cls = `tl-node tl-kind-${n.kind}${mark ? ` tl-mark-${mark}` : ""}${mark === "executor" ? " tl-mark-changed" : ""}${n.id === selected ? " tl-selected" : ""}${matchShown.has(n.id) ? " tl-match" : ""}`;
        const node = sv("g", { class: cls, "data-id": n.id });
        node.append(sv("rect", {
          x: b.x,
          y: b.y,
          width: b.width,
          height: b.height,
          rx: n.kind === "input" || n.kind === "output" ? 17 : 4,
          fill: n.kind === "input" || n.kind === "output" ? "#eeeeee" : n.kind === "communication" ? COMM_COLOR : executorColor(n.executor),
          stroke: mark ? MARK_COLOR[mark] : "#666",
          "stroke-width": mark ? 3 : 1
        }));
        node.append(sv("text", { class: "tl-name", x: b.x + b.width / 2, y: b.y + 15, "text-anchor": "middle" }, n.label));
        const tl = typeLine(n);
        if (tl) node.append(sv("text", { class: "tl-type", x: b.x + b.width / 2, y: b.y + 29, "text-anchor": "middle" }, tl));
        nodeEls.set(n.id, node);
        frag.append(node);
      }
      scene.replaceChildren(frag);
      svg.setAttribute("data-drawn", String(nodeEls.size));
    }
    function initialView() {
      if (!lay) return;
      const { w, h: ht } = portSize();
      const k = Math.min(w / lay.width, ht / lay.height, 1.2);
      if (k >= 0.6) {
        fit();
        return;
      }
      view = { k: 0.85, x: Math.min(10, (w - lay.width * 0.85) / 2), y: 10 };
      apply();
    }
    sync();
    regroup(grouping);
    const ready = () => {
      if (!port.isConnected || !port.clientWidth) return false;
      initialView();
      if (opts.focus) reveal(opts.focus);
      return true;
    };
    if (typeof requestAnimationFrame === "function") {
      let tries = 0;
      const wait = () => {
        if (!ready() && tries++ < 600) requestAnimationFrame(wait);
      };
      requestAnimationFrame(wait);
    }
    return wrap;
  }

  // src/kernels.ts
  var OUTSIDE = "(outside regions)";
  function collapse(s, open, close, by) {
    let out = "", depth = 0;
    for (const c of s) {
      if (c === open) {
        if (depth++ === 0) out += by;
        continue;
      }
      if (c === close && depth > 0) {
        depth--;
        continue;
      }
      if (depth === 0) out += c;
    }
    return out;
  }
  function shortKernelName(name, max = 44) {
    let s = name.trim();
    const marker = /^##\s*(.*?)\s*##$/.exec(s);
    if (marker) s = /^Call CompiledFxGraph\b/.test(marker[1]) ? "Inductor graph call" : marker[1];
    s = s.replace(/^void\s+/, "").replace(/^graph_\d+_/, "");
    s = collapse(collapse(s, "<", ">", ""), "(", ")", "").trim();
    if (!s.startsWith("aten::")) s = s.split("::").filter(Boolean).pop() ?? s;
    if (!s) s = name.trim();
    return s.length > max ? s.slice(0, max - 1) + "…" : s;
  }
  var cost = (k) => k.device_us || k.self_cpu_us;
  function kernelTable(kernels, top = 8) {
    if (!kernels) return [];
    const out = [];
    for (const [region, rows] of Object.entries(kernels)) {
      const sorted = [...rows].sort((x, y) => cost(y) - cost(x));
      const shown = sorted.slice(0, top), rest = sorted.slice(top);
      const sum = (rs, f) => rs.reduce((n, k) => n + f(k), 0);
      out.push({
        region,
        cpu_us: sum(rows, (k) => k.self_cpu_us),
        device_us: sum(rows, (k) => k.device_us),
        kernels: shown.map((k) => ({ name: k.name, short: shortKernelName(k.name), count: k.count, cpu_us: k.self_cpu_us, device_us: k.device_us })),
        hidden: rest.length,
        hidden_cpu_us: sum(rest, (k) => k.self_cpu_us),
        hidden_device_us: sum(rest, (k) => k.device_us)
      });
    }
    const rank = (r) => r.region === OUTSIDE ? 1 : 0;
    return out.sort((x, y) => rank(x) - rank(y) || (y.device_us || y.cpu_us) - (x.device_us || x.cpu_us));
  }
  var us = (v) => v < 100 ? v.toFixed(1) : Math.round(v).toLocaleString("en-US");
  function hasDevice(regions) {
    return regions.some((r) => r.device_us > 0);
  }
  function kernelRows(r, device) {
    const rows = r.kernels.map((k) => h(
      "tr",
      { class: "tl-kernel", "data-kernel": k.name },
      h("td", { class: "tl-kernel-name", title: k.name }, k.short),
      h("td", { class: "tl-num" }, String(k.count)),
      h("td", { class: "tl-num" }, us(k.cpu_us)),
      device ? h("td", { class: "tl-num" }, k.device_us > 0 ? us(k.device_us) : "–") : null
    ));
    if (r.hidden) {
      rows.push(h(
        "tr",
        { class: "tl-kernel tl-muted" },
        h("td", {}, `… ${r.hidden} more`),
        h("td", {}),
        h("td", { class: "tl-num" }, us(r.hidden_cpu_us)),
        device ? h("td", { class: "tl-num" }, us(r.hidden_device_us)) : null
      ));
    }
    return rows;
  }
  function kernelsView(kernels, top = 8) {
    const regions = kernelTable(kernels, top);
    if (!regions.length) return h("div", { class: "tl-muted" }, "(no kernels recorded)");
    const device = hasDevice(regions);
    const heads = ["kernel", "calls", "CPU µs", ...device ? ["device µs"] : []];
    const table = h("table", { class: "tl-kernels" }, h("thead", {}, h("tr", {}, ...heads.map((t, i) => h("th", { class: i ? "tl-num" : "" }, t)))));
    for (const r of regions) {
      const body = h("tbody", { "data-region": r.region });
      body.append(h(
        "tr",
        { class: "tl-kernel-region" },
        h("th", {}, r.region),
        h("th", {}),
        h("th", { class: "tl-num" }, us(r.cpu_us)),
        device ? h("th", { class: "tl-num" }, us(r.device_us)) : null
      ));
      body.append(...kernelRows(r, device));
      table.append(body);
    }
    return h(
      "div",
      { class: "tl-kernels-box" },
      h("div", { class: "tl-muted" }, `kernels of one profiled call, by fusion region (top ${top} each; hover a name for all of it). CPU µs is time spent in the kernel itself` + (device ? "; device µs, on the GPU." : ".")),
      h("div", { class: "tl-kernels-wrap" }, table)
    );
  }
  var KERNEL_CSS = `
.thunderlab .tl-kernels-wrap{overflow-x:auto;max-width:100%}
.thunderlab .tl-kernels{border-collapse:collapse;width:100%;font-size:12px}
.thunderlab .tl-kernels td,.thunderlab .tl-kernels th{padding:1px 6px}
.thunderlab .tl-kernel-name{font-family:var(--jp-code-font-family,ui-monospace,monospace);font-size:11px;overflow-wrap:anywhere}
.thunderlab .tl-kernel td:first-child{padding-left:14px}
.thunderlab .tl-kernel-region th{text-align:left;font-weight:600;background:var(--jp-layout-color2,#f4f4f6)}
.thunderlab .tl-kernel-region th.tl-num{text-align:right}
`;

  // src/race.ts
  function layoutsLine(l) {
    if (!l || !l.compiled && !l.compiling && !l.fallback_calls) return "";
    const parts = [];
    if (l.compiled) parts.push(`kernel compiled again for ${l.compiled} more input layout${l.compiled === 1 ? "" : "s"}`);
    if (l.compiling) parts.push("one more compiling now");
    if (l.fallback_calls) parts.push(`${l.fallback_calls} call${l.fallback_calls === 1 ? "" : "s"} ran torch meanwhile (left out of the race)`);
    return parts.join("; ");
  }
  function gemmLine(g) {
    if (!g || !g.length) return "";
    const dnn = g.filter((x) => x.library === "onednn");
    const timed = dnn.filter((x) => x.mkl_us != null && x.onednn_us != null);
    const mkl = timed.reduce((a, x) => a + x.mkl_us, 0), one = timed.reduce((a, x) => a + x.onednn_us, 0);
    let out = `linear layers: ${dnn.length} of ${g.length} product${g.length === 1 ? "" : "s"} on oneDNN`;
    if (timed.length && mkl > 0) out += ` (${Math.round(100 * (1 - one / mkl))}% less time than MKL there)`;
    if (g.length > dnn.length) out += `, ${g.length - dnn.length} on MKL`;
    const gelu = dnn.filter((x) => x.gelu).length;
    if (gelu) out += `; GELU fused into ${gelu}`;
    return out;
  }
  function gemmDetail(g) {
    const us2 = (v) => v == null ? "not timed here" : `${(v / 1e3).toFixed(3)} ms`;
    return (g ?? []).map((x) => `${x.m}×${x.k} @ ${x.k}×${x.n}${x.bias ? " + bias" : ""}: ${x.library === "onednn" ? "oneDNN" : "MKL"} (MKL ${us2(x.mkl_us)}, oneDNN ${us2(x.onednn_us)})${x.gelu ? `, GELU (${x.gelu}) fused` : ""}`).join("\n");
  }
  function raceRows(regions) {
    const rows = [];
    for (const [region, r] of Object.entries(regions)) {
      const race = r.race;
      if (!race) continue;
      const versions = race.versions.length ? race.versions : Object.keys(race.times);
      const lanes = versions.map((version) => {
        const t = race.times[version];
        return {
          version,
          median_ms: t ? t.median_s * 1e3 : null,
          min_ms: t ? t.min_s * 1e3 : null,
          count: t ? t.count : 0,
          winner: race.winner === version,
          frac: 0
        };
      });
      const max = Math.max(1e-12, ...lanes.map((l) => l.min_ms ?? 0));
      for (const l of lanes) l.frac = l.min_ms === null ? 0 : l.min_ms / max;
      lanes.sort((a, b) => (a.min_ms ?? Infinity) - (b.min_ms ?? Infinity));
      rows.push({
        region,
        state: race.state,
        winner: race.winner,
        why: race.why,
        lanes,
        layouts: layoutsLine(r.layouts),
        gemm: gemmLine(r.gemm),
        gemmDetail: gemmDetail(r.gemm)
      });
    }
    return rows;
  }
  function raceSummary(rows) {
    if (!rows.length) return "";
    const done = rows.filter((r) => r.state === "done");
    const torch = done.filter((r) => r.winner === "torch").length;
    const parts = [`${done.length} of ${rows.length} region${rows.length === 1 ? "" : "s"} raced`];
    if (done.length) parts.push(`${done.length - torch} kept a kernel, ${torch} back to torch`);
    const racing = rows.filter((r) => r.state === "racing").length, waiting = rows.filter((r) => r.state === "waiting").length;
    const paused = rows.filter((r) => r.state === "paused").length, off = rows.filter((r) => r.state === "off").length;
    if (racing) parts.push(`${racing} racing now`);
    if (paused) parts.push(`${paused} paused (not called lately)`);
    if (waiting) parts.push(`${waiting} waiting for their kernels`);
    if (off) parts.push(`${off} not raced`);
    return parts.join("; ");
  }
  var WIN = "var(--jp-success-color1, #4caf50)";
  var LOSE = "var(--jp-layout-color3, #bdbdbd)";
  function raceView(regions) {
    const rows = raceRows(regions);
    if (!rows.length) return null;
    const box = h("div", { class: "tl-race" }, h(
      "div",
      { class: "tl-muted tl-race-summary" },
      `executor race: ${raceSummary(rows)} (each version by its fastest call; the fastest is kept)`
    ));
    for (const r of rows) {
      const block = h(
        "div",
        { class: `tl-race-region tl-race-${r.state}`, "data-region": r.region, style: "margin:4px 0 6px" },
        h("div", { class: "tl-race-why", style: "font-size:12px" }, h("b", {}, r.region), `: ${r.why}`)
      );
      if (r.layouts) block.append(h("div", { class: "tl-muted tl-race-layouts", style: "font-size:11px" }, r.layouts));
      if (r.gemm) block.append(h("div", { class: "tl-muted tl-race-gemm", style: "font-size:11px", title: r.gemmDetail }, r.gemm));
      for (const l of r.lanes) {
        const label = l.median_ms === null ? `${l.version}: not timed yet` : `${l.version}${l.winner ? " ✓" : ""}: ${l.min_ms.toFixed(3)} ms fastest, ${l.median_ms.toFixed(3)} median (${l.count} calls)`;
        block.append(h(
          "div",
          {
            class: `tl-race-lane${l.winner ? " tl-race-winner" : ""}`,
            "data-version": l.version,
            style: "position:relative;height:16px;margin:2px 0;border-radius:2px;overflow:hidden;background:var(--jp-layout-color2,#f0f0f3)"
          },
          h("span", { style: `position:absolute;left:0;top:0;bottom:0;width:${Math.max(0.5, l.frac * 100).toFixed(1)}%;background:${l.winner ? WIN : LOSE}` }),
          h("span", { style: "position:relative;padding-left:4px;font-size:11px;line-height:16px;white-space:nowrap" }, label)
        ));
      }
      box.append(block);
    }
    return box;
  }

  // ../thunderlab/inspect/schema/record-v1.json
  var record_v1_default = {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    $id: "thunderlab.record/v1",
    title: "thunderlab compile record",
    description: "One compilation of one captured graph: the pipeline, every pass as a step, fusion regions and their timings.",
    type: "object",
    required: ["schema", "name", "inputs", "pipeline", "created", "error", "compile_seconds", "steps", "regions"],
    additionalProperties: false,
    properties: {
      schema: { const: "thunderlab.record/v1" },
      name: { type: "string" },
      inputs: { type: "array", items: { type: "string" } },
      input_names: {
        type: "array",
        description: "the captured program's inputs by name, with their type",
        items: {
          type: "object",
          required: ["name", "type"],
          additionalProperties: false,
          properties: { name: { type: "string" }, type: { type: "string" } }
        }
      },
      pipeline: { type: "string" },
      created: { type: "number" },
      error: { type: ["string", "null"] },
      compile_seconds: { type: "number", minimum: 0 },
      steps: { type: "array", minItems: 1, items: { $ref: "#/$defs/step" } },
      regions: { type: "object", additionalProperties: { $ref: "#/$defs/region" } },
      kernels: {
        description: "the latest kernel-level profile of one call (thunderlab.profile), by fusion region ('(outside regions)' for the calls between them); null or absent when never profiled",
        oneOf: [{ type: "null" }, { type: "object", additionalProperties: { type: "array", items: { $ref: "#/$defs/kernel" } } }]
      },
      communication: {
        description: "per collective (all_reduce, all_gather, reduce_scatter, broadcast), its exchanges as timed with timing=True: from issue to its wait returning (in flight), and blocked in the wait; empty or absent when none were timed",
        type: "object",
        additionalProperties: { $ref: "#/$defs/exchange" }
      }
    },
    $defs: {
      step: {
        type: "object",
        required: ["index", "spec", "seconds", "symbols_before", "symbols_after", "error", "verification", "notes", "traces"],
        additionalProperties: false,
        properties: {
          index: { type: "integer", minimum: 0 },
          spec: { type: "string", description: "the pass as written in the pipeline, options included; step 0 is 'capture'" },
          seconds: { type: "number", minimum: 0 },
          symbols_before: { type: "integer", minimum: 0 },
          symbols_after: { type: "integer", minimum: 0 },
          error: { type: ["string", "null"] },
          verification: {
            oneOf: [
              { type: "null" },
              {
                type: "object",
                required: ["ok", "structural", "max_error", "detail"],
                additionalProperties: false,
                properties: {
                  ok: { type: "boolean" },
                  structural: { type: "string" },
                  max_error: { type: ["number", "null"] },
                  detail: { type: "string" }
                }
              }
            ]
          },
          notes: {
            type: "object",
            description: "what the pass did: {summary, facts, declines} (thunderlab.core.notes.Notes); files written before notes were typed hold the pass's facts as one object, which readers take as its facts",
            properties: {
              summary: { type: "string", description: "one line, in words" },
              facts: { type: "object", description: "named facts: numbers, names, small tables" },
              declines: {
                description: "per call, an executor that said no: [call id, executor, reason] (older files: call id -> [[executor, reason]])",
                oneOf: [
                  { type: "array", items: { type: "array", prefixItems: [{ type: "integer" }, { type: "string" }, { type: "string" }], minItems: 3, maxItems: 3 } },
                  { type: "object" }
                ]
              }
            }
          },
          traces: {
            description: "null when the step failed, or in a summary before the step's detail is loaded",
            oneOf: [{ type: "null" }, { type: "object", additionalProperties: { $ref: "#/$defs/trace" } }]
          }
        }
      },
      trace: {
        type: "object",
        required: ["program", "diff", "graph", "stats"],
        additionalProperties: false,
        properties: {
          program: { type: "string", description: "the trace after this step as runnable Python" },
          diff: { type: ["string", "null"], description: "unified diff against the previous step's trace; null at capture" },
          graph: { $ref: "#/$defs/graph" },
          changes: {
            description: "graph nodes (by stable id) added, removed and changed against the previous step; null at capture",
            oneOf: [
              { type: "null" },
              {
                type: "object",
                required: ["added", "removed", "changed"],
                additionalProperties: false,
                properties: {
                  added: { type: "array", items: { type: "string" } },
                  removed: { type: "array", items: { type: "string" } },
                  changed: { type: "array", items: { type: "string" } },
                  executor: { type: "array", items: { type: "string" }, description: "of the changed nodes, those whose executor assignment changed" },
                  regrouped: { type: "array", items: { type: "string" }, description: "calls moved into, out of or between fusion regions" }
                }
              }
            ]
          },
          stats: {
            type: "object",
            required: ["symbols", "regions", "executors"],
            additionalProperties: false,
            properties: {
              symbols: { type: "integer" },
              regions: { type: "integer" },
              executors: { type: "object", additionalProperties: { type: "integer" } }
            }
          },
          calls: {
            type: "array",
            description: "every call (fusion-region members included) in print order, by stable id",
            items: { $ref: "#/$defs/call" }
          },
          saved: {
            type: "object",
            description: "a training program's forward trace: the values it keeps for backward",
            required: ["values", "bytes"],
            additionalProperties: false,
            properties: {
              bytes: { type: "integer", minimum: 0 },
              values: { type: "array", items: {
                type: "object",
                required: ["name", "type", "bytes"],
                additionalProperties: false,
                properties: {
                  name: { type: "string" },
                  type: { type: "string" },
                  bytes: { type: "integer", minimum: 0 }
                }
              } }
            }
          }
        }
      },
      call: {
        type: "object",
        required: ["id", "line", "op", "executor", "region", "origin", "source"],
        additionalProperties: false,
        properties: {
          id: { type: "string", description: "b<stable bound-symbol id>, the graph node's id" },
          line: { type: ["integer", "null"], description: "the 1-based line of the trace's program text it prints on" },
          op: { type: "string" },
          executor: { type: ["string", "null"] },
          region: { type: ["string", "null"], description: "the fusion region it is a member of" },
          origin: { type: ["string", "null"], description: "the pass that made or last rewrote it" },
          source: { oneOf: [
            { type: "null" },
            {
              type: "object",
              required: ["file", "line", "code", "scope", "cell", "path"],
              additionalProperties: false,
              properties: {
                file: { type: "string", description: "the file's base name" },
                line: { type: "integer" },
                code: { type: "string" },
                scope: { type: ["string", "null"] },
                cell: { type: ["integer", "null"], description: "the notebook cell's execution count, when written in a cell" },
                path: { type: ["string", "null"], description: "the file relative to the kernel's working directory, when inside it" }
              }
            }
          ] }
        }
      },
      graph: {
        type: "object",
        required: ["nodes", "edges"],
        additionalProperties: false,
        properties: {
          nodes: { type: "array", items: {
            type: "object",
            required: ["id", "label", "kind", "executor", "source", "group"],
            additionalProperties: false,
            properties: {
              id: { type: "string", description: "b<stable bound-symbol id>, in:<input name> or out" },
              label: { type: "string" },
              kind: { enum: ["call", "input", "output", "region", "communication"], description: "communication: a collective or its wait (torch.distributed)" },
              executor: { type: ["string", "null"] },
              source: { type: ["string", "null"] },
              group: { type: ["string", "null"], description: "the fusion region this call belongs to" },
              scope: { type: ["string", "null"], description: "the module the call came from, a dotted path such as transformer.h.0.attn" },
              derived_from: { type: ["string", "null"], description: "in a backward trace: the id of the forward node this call differentiates (or recomputes)" },
              outputs: {
                type: "array",
                description: "the tensors the node produces: [value name, type string such as 'cpu f32[4, 64]']",
                items: { type: "array", prefixItems: [{ type: "string" }, { type: "string" }], minItems: 2, maxItems: 2 }
              }
            }
          } },
          edges: { type: "array", items: {
            type: "object",
            required: ["src", "dst", "value", "type"],
            additionalProperties: false,
            properties: { src: { type: "string" }, dst: { type: "string" }, value: { type: "string" }, type: { type: "string" } }
          } }
        }
      },
      kernel: {
        type: "object",
        required: ["name", "count", "self_cpu_us", "device_us"],
        additionalProperties: false,
        properties: {
          name: { type: "string", description: "as the torch profiler names it: aten::mm, a fused kernel such as cpp_fused_add_mul_0, a CUDA kernel" },
          count: { type: "integer", minimum: 0 },
          self_cpu_us: { type: "number", minimum: 0, description: "CPU microseconds in the kernel itself, summed over its calls" },
          device_us: { type: "number", minimum: 0, description: "device (GPU) microseconds, summed; 0 on CPU" }
        }
      },
      exchange: {
        type: "object",
        required: ["count", "median_s", "min_s", "total_s", "blocked_median_s", "blocked_total_s"],
        properties: {
          count: { type: "integer", minimum: 1 },
          median_s: { type: "number", minimum: 0 },
          min_s: { type: "number", minimum: 0 },
          total_s: { type: "number", minimum: 0 },
          blocked_median_s: { type: "number", minimum: 0 },
          blocked_total_s: { type: "number", minimum: 0 }
        }
      },
      region: {
        type: "object",
        required: ["executor", "version", "error", "history", "timings", "code"],
        additionalProperties: false,
        properties: {
          executor: { type: "string" },
          version: { type: "string", description: "the version running now: 'torch' until the fused kernel is ready" },
          error: { type: ["string", "null"] },
          history: { type: "array", items: { type: "array", prefixItems: [{ type: "number" }, { type: "string" }], minItems: 2, maxItems: 2 } },
          timings: { type: "object", additionalProperties: {
            type: "object",
            required: ["count", "median_s", "min_s"],
            properties: { count: { type: "integer" }, median_s: { type: "number" }, min_s: { type: "number" } }
          } },
          code: { type: ["string", "null"], description: "generated kernel source or the nvFuser definition text" },
          race: { $ref: "#/$defs/race" },
          layouts: {
            type: "object",
            required: ["compiled", "compiling", "fallback_calls"],
            additionalProperties: false,
            description: "a kernel compiled in the worker process for its first call's input strides, compiled again for others it was called with (up to four): absent for other kernels",
            properties: {
              compiled: { type: "integer", minimum: 0, description: "input layouts compiled besides the first" },
              compiling: { type: "boolean", description: "whether one is compiling now" },
              fallback_calls: { type: "integer", minimum: 0, description: "calls torch ran while their layout compiled, or after its compile failed" }
            }
          },
          gemm: {
            type: "array",
            description: "an Inductor kernel's linear layers, one per product: the GEMM library its module calls and the times that chose it (thunderlab/executors/gemm.py); absent where no choice was made in this process (another executor, or Inductor's cache had the module)",
            items: {
              type: "object",
              required: ["m", "k", "n", "bias", "library"],
              additionalProperties: false,
              properties: {
                m: { type: "integer" },
                k: { type: "integer" },
                n: { type: "integer" },
                bias: { type: "boolean" },
                library: { enum: ["mkl", "onednn"] },
                x: { enum: ["rows", "cols"], description: "the product is x @ w.t(), x (m x k) and w (n x k) each row-major ('rows') or the transpose of a row-major tensor ('cols')" },
                w: { enum: ["rows", "cols"] },
                mkl_us: { type: ["number", "null"], description: "MKL's fastest call on this shape, microseconds (null: not timed in this process)" },
                onednn_us: { type: ["number", "null"], description: "oneDNN's fastest call on this shape" },
                gelu: { type: ["string", "null"], description: "a GELU that follows the product and became oneDNN's post-op: its approximate ('none' or 'tanh')" }
              }
            }
          }
        }
      },
      race: {
        type: "object",
        description: "a region's race: once its kernels compiled, its next calls took turns between torch and each fusion executor's kernel, and the version with the fastest call was kept; absent when compiled with race=False or written before regions were raced",
        required: ["state", "versions", "calls", "times", "winner", "why"],
        additionalProperties: false,
        properties: {
          state: { enum: ["waiting", "racing", "paused", "done", "off"], description: "waiting: kernels still compiling (or the region not called yet); racing: calls taking turns; paused: racing, but the region has not been called for a while (it goes on at the next call); done: winner kept; off: not raced (why says)" },
          versions: { type: "array", items: { type: "string" }, description: "the versions raced, in the order calls take them" },
          calls: { type: "integer", minimum: 1, description: "timed calls per version (after one warm-up call each)" },
          times: { type: "object", additionalProperties: {
            type: "object",
            required: ["count", "median_s", "min_s"],
            additionalProperties: false,
            properties: {
              count: { type: "integer" },
              median_s: { type: "number" },
              min_s: { type: "number" },
              samples_s: { type: "array", items: { type: "number" } }
            }
          } },
          winner: { type: ["string", "null"] },
          why: { type: "string", description: "the verdict in words, e.g. 'inductor 0.41 ms vs torch 0.62 ms, fastest of 4 calls each: kept inductor'" },
          left_out: { type: "object", additionalProperties: { type: "string" }, description: "versions not raced, and why (their compile failed)" },
          started: { type: ["number", "null"], description: "when the race began (seconds since the epoch)" }
        }
      }
    }
  };

  // src/payload.ts
  var SCHEMA = "thunderlab.record/v1";
  function readNotes(notes) {
    const n = notes && typeof notes === "object" ? notes : {};
    const keys = Object.keys(n);
    if (keys.length === 3 && typeof n.summary === "string" && Array.isArray(n.declines) && n.facts && typeof n.facts === "object") {
      return n;
    }
    const { summary, declines, left_out, ...facts } = n;
    const out = [];
    for (const [id, reasons] of Object.entries(declines && typeof declines === "object" ? declines : {})) {
      for (const [ex, why] of reasons) out.push([Number(id), ex, why]);
    }
    for (const [id, why] of Object.entries(left_out && typeof left_out === "object" ? left_out : {})) out.push([Number(id), "fuse", String(why)]);
    return { summary: typeof summary === "string" ? summary : "", facts, declines: out };
  }
  var MAX_PROBLEMS = 100;
  var ROOT = record_v1_default;
  function resolve(ref) {
    if (!ref.startsWith("#/")) throw new Error(`the record schema refers outside itself (${ref})`);
    const found = ref.slice(2).split("/").reduce((s, k) => s?.[k], ROOT);
    if (found === void 0) throw new Error(`the record schema refers to ${ref}, which it does not define`);
    return found;
  }
  var defName = (ref) => ref.split("/").pop().replace(/_/g, " ");
  var article = (w) => /^[aeiou]/i.test(w) ? `an ${w}` : `a ${w}`;
  var plural = (n, w) => `${n} ${w}${n === 1 ? "" : "s"}`;
  function expectedWords(s) {
    if (s === true) return "anything";
    if (s === false) return "nothing";
    if (s.$ref) return article(defName(s.$ref));
    if ("const" in s) return JSON.stringify(s.const);
    if (s.enum) return `one of ${s.enum.map((x) => JSON.stringify(x)).join(", ")}`;
    if (s.oneOf) return s.oneOf.map(expectedWords).join(" or ");
    const types = s.type === void 0 ? [] : [].concat(s.type);
    if (!types.length) return "anything";
    return types.map((t) => typeWords(t, s)).join(" or ");
  }
  function typeWords(t, s) {
    switch (t) {
      case "integer":
        return s.minimum !== void 0 ? `a whole number ≥ ${s.minimum}` : "a whole number";
      case "number":
        return s.minimum !== void 0 ? `a number ≥ ${s.minimum}` : "a number";
      case "null":
        return "null";
      case "boolean":
        return "true or false";
      case "array":
        if (s.prefixItems) return `a list [${s.prefixItems.map(expectedWords).join(", ")}]`;
        if (s.minItems) return `a list of at least ${plural(s.minItems, "item")}`;
        return "a list";
      case "object":
        if (!s.properties && s.additionalProperties && s.additionalProperties !== true) return `an object (name → ${expectedWords(s.additionalProperties)})`;
        return "an object";
      default:
        return article(t);
    }
  }
  function gotWords(v) {
    if (v === void 0) return "nothing (the field is missing)";
    if (v === null) return "null";
    if (typeof v === "string") return `the string ${JSON.stringify(v.length > 60 ? v.slice(0, 59) + "…" : v)}`;
    if (typeof v === "number" || typeof v === "boolean") return `${typeof v === "number" ? "the number " : ""}${v}`;
    if (Array.isArray(v)) return `a list of ${plural(v.length, "item")}`;
    const keys = Object.keys(v);
    const shown = keys.slice(0, 4).map((k) => JSON.stringify(k)).join(", ") + (keys.length > 4 ? ", …" : "");
    return keys.length ? `an object with ${plural(keys.length, "field")} (${shown})` : "an empty object";
  }
  function joinPath(path, key) {
    if (typeof key === "number") return `${path}[${key}]`;
    if (/^[A-Za-z_$][\w$]*$/.test(key)) return path ? `${path}.${key}` : key;
    return `${path}[${JSON.stringify(key)}]`;
  }
  function jsonType(v) {
    if (v === null) return "null";
    if (Array.isArray(v)) return "array";
    if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
    return typeof v;
  }
  function pathOf(at, base) {
    const keys = [];
    for (let x = at; x; x = x.up) keys.push(x.key);
    return keys.reverse().reduce((p, k) => joinPath(p, k), base);
  }
  var Found = class {
    constructor(base) {
      this.base = base;
      this.problems = [];
    }
    get full() {
      return this.problems.length >= MAX_PROBLEMS;
    }
    add(at, expected, v) {
      if (!this.full) this.problems.push({ path: pathOf(at, this.base), expected, got: gotWords(v) });
    }
  };
  var checks = /* @__PURE__ */ new Map();
  var fitters = /* @__PURE__ */ new Map();
  function fitsOf(s) {
    let f = fitters.get(s);
    if (f) return f;
    if (typeof s === "boolean") f = () => s;
    else if (s.$ref) {
      const ref = s.$ref;
      let t;
      f = (v) => (t ?? (t = fitsOf(resolve(ref))))(v);
    } else if ("const" in s) f = (v) => v === s.const;
    else if (s.enum) f = (v) => s.enum.includes(v);
    else if (s.oneOf) {
      const bs = s.oneOf.map(fitsOf);
      f = (v) => bs.some((b) => b(v));
    } else if (s.type === void 0) f = () => true;
    else {
      const types = new Set([].concat(s.type));
      const number = types.has("number");
      f = (v) => {
        const t = jsonType(v);
        return types.has(t) || number && t === "integer";
      };
    }
    fitters.set(s, f);
    return f;
  }
  function checkOf(s) {
    let c = checks.get(s);
    if (!c) {
      checks.set(s, (v, at, found, label) => c(v, at, found, label));
      c = compile(s);
      checks.set(s, c);
    }
    return c;
  }
  function compile(s) {
    if (s === true) return () => {
    };
    if (s === false) return (v, at, found) => found.add(at, "no value here", v);
    if (s.$ref) {
      const words2 = expectedWords(s), ref = s.$ref;
      let target;
      return (v, at, found, label) => (target ?? (target = checkOf(resolve(ref))))(v, at, found, label ?? words2);
    }
    const fits = fitsOf(s), words = expectedWords(s);
    if (s.oneOf) {
      const branches = s.oneOf.map((b) => ({ fits: fitsOf(b), check: checkOf(b) }));
      return (v, at, found, label) => {
        if (found.full) return;
        const take = branches.filter((b) => b.fits(v));
        if (!take.length) {
          found.add(at, label ?? words, v);
          return;
        }
        if (take.length === 1) {
          take[0].check(v, at, found);
          return;
        }
        const tries = take.map((b) => {
          const f = new Found(found.base);
          b.check(v, at, f);
          return f.problems;
        });
        const matched = tries.filter((p) => !p.length).length;
        if (matched > 1) found.add(at, `exactly one of: ${words}`, v);
        else if (!matched) {
          for (const p of tries.reduce((a, b) => b.length < a.length ? b : a)) if (!found.full) found.problems.push(p);
        }
      };
    }
    const min = s.minimum, minItems = s.minItems, maxItems = s.maxItems;
    const prefix = (s.prefixItems ?? []).map(checkOf);
    const items = s.items === void 0 ? null : checkOf(s.items);
    const props = new Map(Object.entries(s.properties ?? {}).map(([k, x]) => [k, checkOf(x)]));
    const required = (s.required ?? []).map((k) => ({ k, words: expectedWords(s.properties?.[k] ?? true) }));
    const extra = s.additionalProperties === void 0 || s.additionalProperties === false ? null : checkOf(s.additionalProperties);
    const closed = s.additionalProperties === false, names = Object.keys(s.properties ?? {}).join(", ");
    return (v, at, found, label) => {
      if (found.full) return;
      if (!fits(v)) {
        found.add(at, label ?? words, v);
        return;
      }
      if (typeof v === "number") {
        if (min !== void 0 && v < min) found.add(at, label ?? words, v);
        return;
      }
      if (Array.isArray(v)) {
        if (minItems !== void 0 && v.length < minItems || maxItems !== void 0 && v.length > maxItems) {
          found.add(at, label ?? words, v);
          return;
        }
        for (let i = 0; i < v.length && !found.full; i++) {
          const c = i < prefix.length ? prefix[i] : items;
          if (c) c(v[i], { up: at, key: i }, found);
        }
        return;
      }
      if (v === null || typeof v !== "object") return;
      const o = v;
      for (const r of required) if (!(r.k in o)) found.add({ up: at, key: r.k }, r.words, void 0);
      for (const k of Object.keys(o)) {
        const c = props.get(k);
        if (c) c(o[k], { up: at, key: k }, found);
        else if (closed) found.add({ up: at, key: k }, `no such field (${label ?? (at ? "this object" : "a record")} has ${names})`, o[k]);
        else if (extra) extra(o[k], { up: at, key: k }, found);
      }
    };
  }
  function checkPayload(p) {
    const o = p;
    if (o !== null && typeof o === "object" && !Array.isArray(o) && "schema" in o && o.schema !== SCHEMA) {
      return [{
        path: "schema",
        expected: `${JSON.stringify(SCHEMA)} (the version this viewer reads)`,
        got: gotWords(o.schema),
        hint: "the record was written by another version of thunderlab: write it again (rec.to_html) with the thunderlab that shows it"
      }];
    }
    const found = new Found("");
    checkOf(ROOT)(p, null, found, "a thunderlab record (a JSON object)");
    return found.problems;
  }

  // src/stepinfo.ts
  var PARAM = /(^|_)(weight|bias|running_mean|running_var|num_batches_tracked|inv_freq|in_proj_weight|in_proj_bias)(_\d+)?$/;
  function splitInputs(names) {
    const args = [], params = [];
    for (const n of names) (PARAM.test(n.name) ? params : args).push(n);
    return { args, params };
  }
  function bytes(n) {
    if (n < 1024) return `${n} B`;
    if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
    if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
    return `${(n / 1024 ** 3).toFixed(2)} GiB`;
  }
  function verificationWords(v) {
    if (!v) return { text: "not checked", cls: "tl-muted", title: "" };
    if (!v.ok) return { text: `✗ ${v.detail || v.structural}`, cls: "tl-fail", title: v.detail || v.structural };
    if (v.max_error != null) return { text: `✓ numbers match eager (max err ${v.max_error.toExponential(1)})`, cls: "tl-ok", title: "outputs compared with eager PyTorch on the captured inputs" };
    return { text: "✓ structure only", cls: "tl-ok tl-structural", title: "the program is well formed; numbers were not compared (thunderlab.jit(..., verify=True) compares them)" };
  }
  function factText(v) {
    const scalar = (x) => x === null || ["string", "number", "boolean"].includes(typeof x);
    let text;
    if (scalar(v)) text = String(v);
    else if (Array.isArray(v)) text = v.every(scalar) ? v.join(", ") || "none" : `${v.length} entries`;
    else {
      const entries = Object.entries(v);
      text = entries.length <= 8 && entries.every(([, x]) => scalar(x)) ? entries.map(([k, x]) => `${k} ${x}`).join(", ") || "none" : `${entries.length} entries`;
    }
    return text.length > 200 ? text.slice(0, 199) + "…" : text;
  }
  function noteLines(notes) {
    const n = readNotes(notes);
    const out = [];
    if (n.summary) out.push(n.summary);
    for (const [k, v] of Object.entries(n.facts)) if (k !== "traceback") out.push(`${k.replace(/_/g, " ")}: ${factText(v)}`);
    const declined = new Set(n.declines.map(([id]) => id)).size;
    if (declined) out.push(`${declined} calls were declined by at least one executor (see "why not fused" below)`);
    return out;
  }
  function declineRows(p, step) {
    const by = /* @__PURE__ */ new Map();
    for (let i = 0; i <= Math.min(step, p.steps.length - 1); i++) {
      for (const [id, ex, why] of readNotes(p.steps[i].notes).declines) {
        const list = by.get(`b${id}`) ?? [];
        if (!list.some(([e, w]) => e === ex && w === why)) list.push([ex, why]);
        by.set(`b${id}`, list);
      }
    }
    return [...by].map(([id, reasons]) => ({ id, reasons }));
  }
  function switches(history) {
    if (!history.length) return [];
    const t0 = history[0][0];
    return history.map(([t, v]) => ({ version: v, after_s: t - t0 }));
  }
  function inputsLine(p) {
    const names = p.input_names;
    if (!names || !names.length) return h("span", { class: "tl-inputs" }, `inputs: ${p.inputs.join(", ") || "(none)"}`);
    const { args, params } = splitInputs(names);
    const line = h("span", { class: "tl-inputs" }, "inputs: ");
    args.forEach((a, i) => line.append(i ? ", " : "", h("code", { class: "tl-input" }, a.name), ` ${a.type}`));
    if (params.length) {
      line.append(h(
        "details",
        { class: "tl-params" },
        h("summary", {}, `${args.length ? "+ " : ""}${params.length} parameters and buffers`),
        h("div", { class: "tl-param-list" }, ...params.map((x) => h("div", {}, h("code", {}, x.name), ` ${x.type}`)))
      ));
    }
    return line;
  }
  function savedView(saved) {
    const rows = saved.values.slice().sort((a, b) => b.bytes - a.bytes);
    return h(
      "details",
      { class: "tl-saved" },
      h("summary", {}, `saved for backward: ${saved.values.length} values, ${bytes(saved.bytes)}`),
      h(
        "table",
        { class: "tl-saved-table" },
        h("thead", {}, h("tr", {}, h("th", {}, "value"), h("th", {}, "type"), h("th", { class: "tl-num" }, "bytes"))),
        h("tbody", {}, ...rows.map((v) => h("tr", {}, h("td", {}, h("code", {}, v.name)), h("td", {}, v.type), h("td", { class: "tl-num" }, bytes(v.bytes)))))
      )
    );
  }
  function notesView(p, st, labels, onSelect) {
    const box = h("div", { class: "tl-notes-view" });
    const v = verificationWords(st.verification);
    box.append(h(
      "div",
      {},
      h("strong", {}, `step ${st.index}: ${st.spec}`),
      ` · ${ms(st.seconds)} ms · ${st.symbols_before} → ${st.symbols_after} symbols · `,
      h("span", { class: v.cls, title: v.title }, v.text)
    ));
    const lines = noteLines(st.notes);
    box.append(lines.length ? h("ul", { class: "tl-notes" }, ...lines.map((l) => h("li", {}, l))) : h("div", { class: "tl-muted" }, st.index === 0 ? "the program TorchDynamo captured" : "this pass reported nothing more"));
    const fw = st.traces?.forward;
    if (fw?.saved) box.append(savedView(fw.saved));
    const rows = declineRows(p, st.index);
    if (rows.length) {
      const list = h("ul", { class: "tl-whynot" });
      for (const r of rows.slice(0, 500)) {
        const name = h("code", { class: "tl-call-link", "data-id": r.id }, labels.get(r.id) ?? r.id);
        if (onSelect) name.addEventListener("click", () => onSelect(r.id));
        list.append(h("li", {}, name, h("ul", {}, ...r.reasons.map(([ex, why]) => h("li", {}, h("strong", {}, ex), `: ${why}`)))));
      }
      box.append(h(
        "details",
        { class: "tl-whynot-box", ...rows.length <= 30 ? { open: "" } : {} },
        h("summary", {}, `why not fused: ${rows.length} calls declined by an executor`),
        list,
        rows.length > 500 ? h("div", { class: "tl-muted" }, `… and ${rows.length - 500} more`) : null
      ));
    }
    return box;
  }
  function stepTimingsView(p, st) {
    const box = h("div", { class: "tl-step-timings" });
    const max = Math.max(1e-9, ...p.steps.map((s) => s.seconds));
    const passes = h("table", { class: "tl-pass-times" }, h("thead", {}, h("tr", {}, h("th", {}, "#"), h("th", {}, "pass"), h("th", { class: "tl-num" }, "ms"), h("th", {}, ""))));
    const body = h("tbody");
    for (const s of p.steps) {
      body.append(h(
        "tr",
        { class: s.index === st.index ? "tl-current" : "" },
        h("td", { class: "tl-num" }, String(s.index)),
        h("td", {}, s.spec),
        h("td", { class: "tl-num" }, ms(s.seconds)),
        h("td", { class: "tl-bar-cell" }, h("span", { class: "tl-hbar", style: `width:${Math.max(1, Math.round(80 * s.seconds / max))}px` }))
      ));
    }
    passes.append(body);
    box.append(h("div", { class: "tl-muted" }, `compile time by pass (total ${ms(p.compile_seconds)} ms); this step is marked`), passes);
    const regions = Object.entries(p.regions);
    const here = st.traces ? Object.values(st.traces).reduce((n, t) => n + t.stats.regions, 0) : null;
    if (here === 0 || !regions.length) {
      const fuse = p.steps.find((s) => /^fuse\b/.test(s.spec));
      box.append(h("div", { class: "tl-muted" }, regions.length && fuse ? `no fusion region at this step: regions run from step ${fuse.index} (${fuse.spec}) on` : "(no fusion regions)"));
      const comm2 = communicationView(p.regions, p.communication);
      if (comm2) box.append(comm2);
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
      const rows = versions.length ? versions : [[r.version, null]];
      for (const [ver, t] of rows) {
        tb.append(h(
          "tr",
          {},
          h("td", {}, name),
          h("td", {}, `${r.executor}/${ver}${ver === r.version ? " ●" : ""}`),
          h("td", { class: "tl-num" }, t ? String(t.count) : "–"),
          h("td", { class: "tl-num" }, t ? ms(t.median_s) : "–"),
          h("td", { class: "tl-num" }, t ? ms(t.min_s) : "–"),
          h("td", {}, sw || (r.error ? `failed: ${r.error}` : "–"))
        ));
      }
    }
    table.append(tb);
    box.append(h("div", { class: "tl-muted" }, timed ? "per fusion region (● the version running now)" : "regions not timed: compile with thunderlab.jit(..., timing=True) to time each region"), table);
    const race = raceView(p.regions);
    if (race) box.append(race);
    const comm = communicationView(p.regions, p.communication);
    if (comm) box.append(comm);
    box.append(p.kernels ? kernelsView(p.kernels) : h("div", { class: "tl-muted tl-kernels-none" }, "per-kernel times: not profiled yet (thunderlab.profile(f, *args), or the sidebar's Profile one call)"));
    return box;
  }
  function sourceText(s) {
    return s.cell != null ? `cell [${s.cell}] line ${s.line}` : `${s.path ?? s.file}:${s.line}`;
  }
  var FIRST_LINES = 150;
  var SLICE_LINES = 1e3;
  function programView(t, opts = {}) {
    const box = h("div", { class: "tl-program-view" });
    const byLine = /* @__PURE__ */ new Map();
    for (const c of t.calls ?? []) if (c.line) byLine.set(c.line, c);
    const bar2 = h("div", { class: "tl-source-bar tl-muted" }, t.calls ? "click a call to see where it came from" : "");
    const pre = h("pre", { class: "tl-program" });
    const lines = t.program.replace(/\n$/, "").split("\n");
    const draw = (from, to) => {
      const frag = document.createDocumentFragment();
      for (let i = from; i < Math.min(to, lines.length); i++) {
        const c = byLine.get(i + 1);
        const el = h("div", { class: c ? "tl-line tl-call-line" : "tl-line", ...c ? { "data-id": c.id } : {} });
        highlightInto(el, lines[i] || " ");
        frag.append(el);
      }
      pre.append(frag);
      if (to < lines.length) setTimeout(() => {
        if (pre.isConnected) draw(to, to + SLICE_LINES);
      }, 0);
    };
    draw(0, FIRST_LINES);
    const show = (id) => {
      pre.querySelector(".tl-line-selected")?.classList.remove("tl-line-selected");
      const c = id ? (t.calls ?? []).find((x) => x.id === id) : void 0;
      if (!c) {
        bar2.replaceChildren(t.calls ? "click a call to see where it came from" : "");
        return;
      }
      const el = pre.querySelector(`[data-id="${c.id}"]`);
      el?.classList.add("tl-line-selected");
      const s = c.source;
      bar2.replaceChildren(
        h("code", {}, c.op),
        c.executor ? ` [${c.executor}${c.region ? ` · ${c.region}` : ""}]` : "",
        s ? " ← " : " (no source line: made by a pass" + (c.origin ? `, ${c.origin}` : "") + ")"
      );
      if (s) {
        const where = opts.openSource ? h("a", { class: "tl-source-link", href: "#", title: "open the source" }, sourceText(s)) : h("span", { class: "tl-source-link" }, sourceText(s));
        if (opts.openSource) where.addEventListener("click", (e) => {
          e.preventDefault();
          opts.openSource(s);
        });
        bar2.append(where, s.scope ? ` · ${s.scope}` : "", s.code ? h("div", {}, h("code", { class: "tl-source-code" }, s.code)) : "");
      }
    };
    pre.addEventListener("click", (e) => {
      const el = e.target.closest("[data-id]");
      if (!el) return;
      opts.selection?.selectNode(el.dataset.id, "program");
      if (!opts.selection) show(el.dataset.id);
    });
    if (opts.selection) {
      const stop = opts.selection.onChange((id) => {
        if (!box.isConnected) {
          stop();
          return;
        }
        show(id);
      });
      if (opts.selection.selected) show(opts.selection.selected);
    }
    box.append(bar2, pre);
    return box;
  }
  var KEYWORDS = /* @__PURE__ */ new Set(["def", "return", "import", "from", "as", "del", "None", "True", "False", "if", "else", "for", "in", "lambda", "not", "and", "or"]);
  var TOKEN = /(#.*$)|('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|(\b\d+(?:\.\d+)?(?:e[-+]?\d+)?\b)|([A-Za-z_][A-Za-z0-9_]*)/g;
  function highlightInto(el, line) {
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
  var STEP_CSS = `
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

  // src/panes/graph.ts
  function declinesAt(p, step) {
    return Object.fromEntries(declineRows(p, step).map(({ id, reasons }) => [id.replace(/^b/, ""), reasons]));
  }
  var graphPane = {
    id: "graph",
    title: "Graph",
    order: 30,
    needsTrace: true,
    render(step, ctx) {
      const traces = step.traces, t = traces[ctx.trace];
      const graphs = Object.fromEntries(Object.entries(traces).map(([k, v]) => [k, v.graph]));
      const focus = ctx.state.focus;
      ctx.state.focus = null;
      return graphView(t.graph, t.changes, {
        ...ctx.graph,
        trace: ctx.trace,
        traces: graphs,
        focus,
        declines: declinesAt(ctx.payload, step.index),
        onJump: (tr, id) => {
          ctx.state.focus = id;
          ctx.setTrace(tr);
        }
      });
    }
  };

  // src/panes/notes.ts
  var notesPane = {
    id: "notes",
    title: "What it did",
    order: 40,
    needsTrace: false,
    render(step, ctx) {
      const labels = new Map((step.traces?.[ctx.trace]?.graph.nodes ?? []).map((n) => [n.id, n.label]));
      return notesView(ctx.payload, step, labels, (id) => ctx.selection.selectNode(id, "notes"));
    }
  };

  // src/panes/program.ts
  var programPane = {
    id: "program",
    title: "Program",
    order: 10,
    needsTrace: true,
    render(step, ctx) {
      const t = step.traces[ctx.trace];
      return ctx.program ? ctx.program(t) : programView(t, { selection: ctx.selection, openSource: ctx.openSource });
    }
  };

  // src/panes/timings.ts
  var timingsPane = {
    id: "timings",
    title: "Timings",
    order: 50,
    needsTrace: false,
    render: (step, ctx) => stepTimingsView(ctx.payload, step)
  };

  // src/panes/registry.ts
  function renderPane(pane, st, ctx) {
    const traces = ctx.tracesOf(st.index);
    const step = { ...st, traces: traces ?? null };
    if (!pane.needsTrace) return [pane.render(step, ctx)];
    if (traces === void 0 && !st.error) return [h("div", { class: "tl-loading tl-muted" }, "loading…")];
    if (!traces) return [h("div", { class: "tl-muted" }, st.error ? "(no traces: the step failed)" : "(this step has no program)")];
    const t = traces[ctx.trace];
    if (!t) return [h("div", { class: "tl-muted" }, "(no traces)")];
    return [
      h("div", { class: "tl-muted tl-stats" }, `${ctx.trace}: ${t.stats.symbols} symbols, ${t.stats.regions} regions · ` + Object.entries(t.stats.executors).map(([k, v]) => `${k} ${v}`).join(", ")),
      pane.render(step, ctx)
    ];
  }

  // src/panes/index.ts
  var PANES = [programPane, diffPane, graphPane, notesPane, timingsPane];
  var PANE_CSS = PANES.map((p) => p.css ?? "").join("");

  // src/selection.ts
  var SelectionModel = class {
    constructor() {
      this._id = null;
      this._listeners = /* @__PURE__ */ new Set();
    }
    /** The selected node's id ("b<stable id>"), or null. */
    get selected() {
      return this._id;
    }
    /** Select node `id` (null: none); `source` names the view that asked, so it need not react to itself. */
    selectNode(id, source = "") {
      if (id === this._id) return;
      this._id = id;
      for (const fn of [...this._listeners]) fn(id, source);
    }
    /** Call `fn` on every change; returns the function that stops it. */
    onChange(fn) {
      this._listeners.add(fn);
      return () => {
        this._listeners.delete(fn);
      };
    }
  };
  var models = /* @__PURE__ */ new WeakMap();
  function selectionOf(owner) {
    let m = models.get(owner);
    if (!m) {
      m = new SelectionModel();
      models.set(owner, m);
    }
    return m;
  }

  // src/record.ts
  var checked = /* @__PURE__ */ new WeakMap();
  function payloadProblems(p) {
    if (p === null || typeof p !== "object") return checkPayload(p);
    let found = checked.get(p);
    if (!found) checked.set(p, found = checkPayload(p));
    return found;
  }
  function passName(spec) {
    return spec.trim().replace(/^-/, "").split("{")[0].trim();
  }
  function pipelinePasses(pipeline) {
    return pipeline.replace(/\{[^{}]*\}/g, "").split(",").map((x) => x.trim()).filter((x) => x && !x.startsWith("-")).map(passName);
  }
  var CSS = `
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
  function problemsView(problems, cannot = "thunderlab cannot show this record", name, shown = 12) {
    const list = h("ul", { class: "tl-problems-list" });
    for (const p of problems.slice(0, shown)) {
      list.append(h(
        "li",
        { class: "tl-problem" },
        h("code", { class: "tl-problem-path" }, p.path || "the record"),
        `: expected ${p.expected}, got ${p.got}`
      ));
    }
    const more = problems.length - shown;
    const hints = [...new Set(problems.map((p) => p.hint).filter((x) => !!x))];
    return h(
      "div",
      { class: "tl-problems", role: "alert" },
      h("div", { class: "tl-problems-title" }, `${cannot}${typeof name === "string" ? ` (${JSON.stringify(name)})` : ""}: its data does not follow the schema ${SCHEMA}`),
      list,
      more > 0 ? h("div", { class: "tl-problems-more tl-muted" }, `… and ${more}${problems.length >= MAX_PROBLEMS ? " or more" : ""} more`) : null,
      ...hints.map((x) => h("div", { class: "tl-problems-hint" }, x))
    );
  }
  function showProblems(root, problems, cannot, name) {
    root.classList.add("thunderlab");
    root.removeAttribute("data-step");
    root.replaceChildren(h("style", {}, CSS), problemsView(problems, cannot, name));
  }
  function origin(p) {
    const notes = readNotes(p.steps[0]?.notes);
    if (!notes.summary) return null;
    const brk = notes.facts.graph_break;
    return { text: `from ${notes.summary}`, detail: typeof brk?.detail === "string" ? brk.detail : "" };
  }
  function originLine(p) {
    const o = origin(p);
    return o && h("div", { class: "tl-meta tl-origin", ...o.detail ? { title: o.detail } : {} }, o.text);
  }
  function header(p, opts) {
    const err = [p.error, opts.error].filter(Boolean).join("\n");
    return h(
      "div",
      { class: "tl-header" },
      h("h2", {}, p.name),
      originLine(p),
      h("div", { class: "tl-meta" }, inputsLine(p)),
      h("div", { class: "tl-meta" }, `pipeline: ${p.pipeline} · total ${ms(p.compile_seconds)} ms · ${p.steps.length} steps`),
      h("div", { class: "tl-status" }, opts.status ?? ""),
      h("div", { class: "tl-error" }, err)
    );
  }
  function controls(p, cur, opts) {
    const bar2 = h("div", { class: "tl-bar" });
    const prev = h("button", { class: "tl-prev", type: "button" }, "◀ Prev");
    const next = h("button", { class: "tl-next", type: "button" }, "Next ▶");
    prev.disabled = cur <= 0;
    next.disabled = cur >= p.steps.length - 1;
    prev.addEventListener("click", () => opts.onSelect?.(cur - 1));
    next.addEventListener("click", () => opts.onSelect?.(cur + 1));
    bar2.append(prev, next, h("span", { class: "tl-muted" }, `step ${cur} / ${p.steps.length - 1}`));
    if (opts.onRunTo) {
      const sel = h("select", { class: "tl-runto" }, h("option", { value: "" }, "run to…"));
      const names = [...new Set(pipelinePasses(p.pipeline).filter(Boolean))];
      for (const n of names) sel.append(h("option", { value: n }, n));
      sel.addEventListener("change", () => {
        if (sel.value) opts.onRunTo(sel.value);
      });
      bar2.append(sel);
    }
    if (opts.onRerun) {
      const input = h("input", { class: "tl-pipeline", type: "text", spellcheck: "false" });
      input.value = p.pipeline;
      const btn = h("button", { class: "tl-rerun", type: "button" }, "Re-run");
      const go = () => opts.onRerun(input.value);
      btn.addEventListener("click", go);
      input.addEventListener("keydown", (e) => {
        if (e.key === "Enter") go();
      });
      bar2.append(input, btn);
    }
    return bar2;
  }
  function stepTable(p, cur, opts) {
    const body = h("tbody");
    const anyError = p.steps.some((st) => st.error);
    for (const st of p.steps) {
      const vw = verificationWords(st.verification);
      const ver = h("span", { class: vw.cls, title: vw.title }, vw.text);
      const row = h(
        "tr",
        { class: st.index === cur ? "tl-step tl-current" : "tl-step", "data-index": st.index },
        h("td", { class: "tl-num" }, String(st.index)),
        h("td", {}, st.spec),
        h("td", { class: "tl-num" }, ms(st.seconds)),
        h("td", { class: "tl-num" }, `${st.symbols_before} → ${st.symbols_after}`),
        h("td", {}, ver),
        anyError ? h("td", { class: "tl-error" }, st.error ?? "") : null
      );
      row.addEventListener("click", () => opts.onSelect?.(st.index));
      body.append(row);
    }
    const heads = ["#", "pass", "ms", "symbols", "verified", ...anyError ? ["error"] : []];
    return h("div", { class: "tl-steps-wrap" }, h(
      "table",
      { class: "tl-steps" },
      h("thead", {}, h("tr", {}, ...heads.map((t) => h("th", {}, t)))),
      body
    ));
  }
  function tabs(labels, active, onPick) {
    const bar2 = h("div", { class: "tl-tabs" });
    for (const l of labels) {
      const b = h("button", { type: "button", class: l === active ? "tl-active" : "", "data-tab": l }, l);
      b.addEventListener("click", () => onPick(l));
      bar2.append(b);
    }
    return bar2;
  }
  var viewState = /* @__PURE__ */ new WeakMap();
  function stepDetail(root, p, st) {
    const box = h("div", { class: "tl-detail" });
    const state = viewState.get(root) ?? { pane: PANES[0].title, panes: {} };
    viewState.set(root, state);
    const paint = () => {
      box.replaceChildren();
      if (st.error) box.append(h("div", { class: "tl-error" }, `step ${st.index} (${st.spec}) failed: ${st.error}`));
      const names = st.traces ? Object.keys(st.traces) : [];
      const trace = state.trace && names.includes(state.trace) ? state.trace : names[0];
      const setTrace = (t) => {
        state.trace = t;
        paint();
      };
      if (names.length) box.append(tabs(names, trace, setTrace));
      const pane = PANES.find((x) => x.title === state.pane) ?? PANES[0];
      box.append(tabs(PANES.map((x) => x.title), pane.title, (title) => {
        state.pane = title;
        paint();
      }));
      box.append(...renderPane(pane, st, {
        payload: p,
        trace: trace ?? "",
        selection: selectionOf(root),
        state: state.panes,
        repaint: paint,
        setTrace,
        // a step's traces are in the payload, or not yet (the widget sends them when the step is shown), or never (it failed)
        tracesOf: (i) => p.steps[i]?.traces ?? (p.steps[i]?.error ? null : void 0)
      }));
    };
    paint();
    return box;
  }
  var STYLES = CSS + STEP_CSS + PANE_CSS;
  function renderRecord(root, data, opts = {}) {
    const problems = payloadProblems(data);
    if (problems.length) {
      showProblems(root, problems, opts.cannot, data?.name);
      return;
    }
    const payload = data;
    const n = payload.steps.length;
    const cur = Math.max(0, Math.min(n - 1, opts.current ?? n - 1));
    root.classList.add("thunderlab");
    root.setAttribute("data-step", String(cur));
    const style = h("style", {}, STYLES);
    const parts = [style, header(payload, opts), controls(payload, cur, opts), stepTable(payload, cur, opts)];
    if (n) parts.push(stepDetail(root, payload, payload.steps[cur]));
    root.replaceChildren(...parts);
  }

  // src/report.ts
  var CANNOT = "thunderlab cannot show this report";
  function start() {
    const root = document.getElementById("thunderlab-root");
    const data = document.getElementById("thunderlab-payload");
    if (!root || !data) return;
    let payload;
    try {
      payload = JSON.parse(data.textContent ?? "");
    } catch (e) {
      showProblems(root, [{ path: "", expected: "a thunderlab record as JSON text", got: `text that is not JSON (${e instanceof Error ? e.message : String(e)})` }], CANNOT);
      return;
    }
    const show = (current) => renderRecord(root, payload, { current, onSelect: show, cannot: CANNOT });
    show(Number.MAX_SAFE_INTEGER);
  }
  function startReport() {
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
    else start();
  }

  // src/widget.ts
  function render2({ model, el }) {
    const paint = () => {
      const payload = model.get("payload");
      if (payload == null || typeof payload === "object" && !Object.keys(payload).length) {
        el.textContent = "thunderlab: no record yet";
        return;
      }
      renderRecord(el, payload, {
        current: Number(model.get("current") ?? 0),
        status: String(model.get("status") ?? ""),
        error: String(model.get("error") ?? ""),
        onSelect: (step) => model.send({ type: "goto", step }),
        onRunTo: (pass) => model.send({ type: "run_to", pass }),
        onRerun: (pipeline) => model.send({ type: "rerun", pipeline })
      });
    };
    const events = ["change:payload", "change:current", "change:status", "change:error"];
    for (const ev of events) model.on(ev, paint);
    paint();
    return () => {
      for (const ev of events) model.off?.(ev, paint);
    };
  }
  var widget = { render: render2 };
  return __toCommonJS(views_exports);
})();
