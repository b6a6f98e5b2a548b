// Line lists side by side: the shortest edit script between two programs (or two pipelines), for the
// diff pane's fallback and the sidebar's record comparison. Pure; imports nothing.

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
