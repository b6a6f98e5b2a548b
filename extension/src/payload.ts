// The record payload ("thunderlab.record/v1") every view draws: its types, and the check each host (report,
// widget, sidebar) runs before drawing one. The check reads the committed JSON schema itself
// (thunderlab/inspect/schema/record-v1.json, the file the Python side validates against), so the views and
// the writer share one definition; it implements the keywords that schema uses (KEYWORDS) and a unit test
// fails when the schema starts using another. Bottom of the views: imports nothing but that schema.
import RECORD_SCHEMA from "../../thunderlab/inspect/schema/record-v1.json";

export const SCHEMA = "thunderlab.record/v1";

// ---------------------------------------------------------------- the payload's types (mirror the schema)

export interface Source { file: string; line: number; code: string; scope: string | null; cell: number | null; path: string | null }
export interface Call { id: string; line: number | null; op: string; executor: string | null; region: string | null; origin: string | null; source: Source | null }
export interface InputName { name: string; type: string }
export interface Saved { values: { name: string; type: string; bytes: number }[]; bytes: number }
/** One kernel as the payload has it ("kernels"): summed over its calls in one profiled call. */
export interface KernelRow { name: string; count: number; self_cpu_us: number; device_us: number }
export type Kernels = Record<string, KernelRow[]>;

export interface GraphNode {
  id: string; label: string; kind: string; executor: string | null; source: string | null;
  group: string | null;  // the fusion region a call belongs to
  scope?: string | null;  // the module it came from: "transformer.h.0.attn"
  derived_from?: string | null;  // in a backward trace: the forward node this call comes from
  outputs?: [string, string][];  // what it produces: [value name, type string]
}
export interface GraphEdge { src: string; dst: string; value: string; type: string }
export interface Graph { nodes: GraphNode[]; edges: GraphEdge[] }
export interface Changes { added: string[]; removed: string[]; changed: string[]; executor?: string[]; regrouped?: string[] }
export interface Trace { program: string; diff: string | null; graph: Graph; changes?: Changes | null; stats: { symbols: number; regions: number; executors: Record<string, number> }; calls?: Call[]; saved?: Saved }
export interface Verification { ok: boolean; structural: string; max_error: number | null; detail: string }
export interface Step {
  index: number; spec: string; seconds: number; symbols_before: number; symbols_after: number;
  error: string | null; verification: Verification | null; notes: Notes | Record<string, unknown>; traces: Record<string, Trace> | null;
}
/** What a pass did (thunderlab.core.notes.Notes): one line, named facts, and per call an executor's no: [call id, executor, reason]. */
export interface Notes { summary: string; facts: Record<string, unknown>; declines: [number, string, string][] }

/** A step's notes in the one shape every view reads. Files written before notes were typed kept a plain dict of facts
 *  (claim's declines as {id: [[executor, reason]]}, fuse's left_out as {id: reason}, ddp's summary among them). */
export function readNotes(notes: unknown): Notes {
  const n = (notes && typeof notes === "object" ? notes : {}) as Record<string, any>;
  const keys = Object.keys(n);
  if (keys.length === 3 && typeof n.summary === "string" && Array.isArray(n.declines) && n.facts && typeof n.facts === "object") {
    return n as Notes;
  }
  const { summary, declines, left_out, ...facts } = n;
  const out: [number, string, string][] = [];
  for (const [id, reasons] of Object.entries(declines && typeof declines === "object" ? declines : {})) {
    for (const [ex, why] of reasons as [string, string][]) out.push([Number(id), ex, why]);
  }
  for (const [id, why] of Object.entries(left_out && typeof left_out === "object" ? left_out : {})) out.push([Number(id), "fuse", String(why)]);
  return { summary: typeof summary === "string" ? summary : "", facts, declines: out };
}
/** A region's race: once its kernels compiled, its calls took turns between torch and each kernel; the fastest call was kept. */
export interface Race {
  state: "waiting" | "racing" | "paused" | "done" | "off";
  versions: string[];  // in the order calls take them
  calls: number;  // timed calls per version (after one warm-up call each)
  times: Record<string, { count: number; median_s: number; min_s: number; samples_s?: number[] }>;
  winner: string | null;
  why: string;  // the verdict in words: "inductor 0.41 ms vs torch 0.62 ms, fastest of 4 calls each: kept inductor"
  left_out?: Record<string, string>;  // versions not raced, and why
  started?: number | null;
}
export interface Region {
  executor: string; version: string; error: string | null; history: [number, string][];
  timings: Record<string, { count: number; median_s: number; min_s: number }>; code: string | null;
  /** absent when compiled with race=False, and in payloads written before regions were raced */
  race?: Race;
  /** a worker's kernel compiled again for input strides its first compile did not take; absent for other kernels */
  layouts?: Layouts;
  /** an Inductor kernel's linear layers: per product, the GEMM library its module calls and the times that chose it */
  gemm?: Gemm[];
}
/** One linear layer's product (m x k by k x n): the library it runs on, both libraries' fastest calls when timed, a fused GELU. */
export interface Gemm { m: number; k: number; n: number; bias: boolean; library: "mkl" | "onednn"; mkl_us?: number | null; onednn_us?: number | null; gelu?: string | null;
  /** the product is x @ w.t(): each operand row-major ("rows") or the transpose of a row-major tensor ("cols") */
  x?: "rows" | "cols"; w?: "rows" | "cols" }
/** The layouts a region's kernel was compiled for besides its first call's, one compiling now, and the calls torch ran meanwhile. */
export interface Layouts { compiled: number; compiling: boolean; fallback_calls: number }
/** One collective's exchanges as timed with timing=True: in flight (issue to its wait returning) and blocked in the wait. */
export interface Exchange { count: number; median_s: number; min_s: number; total_s: number; blocked_median_s: number; blocked_total_s: number }
export type Communication = Record<string, Exchange>;
export interface Payload {
  schema: string; name: string; inputs: string[]; input_names?: InputName[]; pipeline: string; created: number; error: string | null;
  compile_seconds: number; steps: Step[]; regions: Record<string, Region>;
  /** the latest kernel-level profile of one call, by region (absent in payloads written before profiles were kept) */
  kernels?: Kernels | null;
  /** per collective, its exchanges timed (absent or empty when none were) */
  communication?: Communication;
}

// ---------------------------------------------------------------- the check

/** One way a payload differs from its schema: where (``steps[2].traces``), what the schema wants there, what is there. */
export interface Problem { path: string; expected: string; got: string; hint?: string }

/** The schema keywords the check implements; the others that only annotate are listed apart. */
export const KEYWORDS = ["type", "const", "enum", "required", "properties", "additionalProperties", "items", "prefixItems",
  "minItems", "maxItems", "minimum", "oneOf", "$ref"] as const;
export const ANNOTATIONS = ["$schema", "$id", "$defs", "title", "description"] as const;

/** The most problems one check collects: past that it stops looking (a payload broken that badly shows it in the first few). */
export const MAX_PROBLEMS = 100;

type Schema = { [keyword: string]: any } | boolean;

const ROOT = RECORD_SCHEMA as { [keyword: string]: any };

function resolve(ref: string): Schema {
  if (!ref.startsWith("#/")) throw new Error(`the record schema refers outside itself (${ref})`);
  const found = ref.slice(2).split("/").reduce((s: any, k) => s?.[k], ROOT);
  if (found === undefined) throw new Error(`the record schema refers to ${ref}, which it does not define`);
  return found;
}

const defName = (ref: string) => ref.split("/").pop()!.replace(/_/g, " ");
const article = (w: string) => (/^[aeiou]/i.test(w) ? `an ${w}` : `a ${w}`);
const plural = (n: number, w: string) => `${n} ${w}${n === 1 ? "" : "s"}`;

/** What ``s`` allows, in words: "a whole number ≥ 0", "null or an object (name → a trace)". */
export function expectedWords(s: Schema): string {
  if (s === true) return "anything";
  if (s === false) return "nothing";
  if (s.$ref) return article(defName(s.$ref));
  if ("const" in s) return JSON.stringify(s.const);
  if (s.enum) return `one of ${s.enum.map((x: unknown) => JSON.stringify(x)).join(", ")}`;
  if (s.oneOf) return s.oneOf.map(expectedWords).join(" or ");
  const types: string[] = s.type === undefined ? [] : [].concat(s.type);
  if (!types.length) return "anything";
  return types.map((t) => typeWords(t, s)).join(" or ");
}

function typeWords(t: string, s: { [keyword: string]: any }): string {
  switch (t) {
    case "integer": return s.minimum !== undefined ? `a whole number ≥ ${s.minimum}` : "a whole number";
    case "number": return s.minimum !== undefined ? `a number ≥ ${s.minimum}` : "a number";
    case "null": return "null";
    case "boolean": return "true or false";
    case "array":
      if (s.prefixItems) return `a list [${s.prefixItems.map(expectedWords).join(", ")}]`;
      if (s.minItems) return `a list of at least ${plural(s.minItems, "item")}`;
      return "a list";
    case "object":
      if (!s.properties && s.additionalProperties && s.additionalProperties !== true) return `an object (name → ${expectedWords(s.additionalProperties)})`;
      return "an object";
    default: return article(t);
  }
}

/** What ``v`` is, in words, short: "the number 5", "the string \"abc\"", "a list of 3 items". */
export function gotWords(v: unknown): string {
  if (v === undefined) return "nothing (the field is missing)";
  if (v === null) return "null";
  if (typeof v === "string") return `the string ${JSON.stringify(v.length > 60 ? v.slice(0, 59) + "…" : v)}`;
  if (typeof v === "number" || typeof v === "boolean") return `${typeof v === "number" ? "the number " : ""}${v}`;
  if (Array.isArray(v)) return `a list of ${plural(v.length, "item")}`;
  const keys = Object.keys(v as object);
  const shown = keys.slice(0, 4).map((k) => JSON.stringify(k)).join(", ") + (keys.length > 4 ? ", …" : "");
  return keys.length ? `an object with ${plural(keys.length, "field")} (${shown})` : "an empty object";
}

/** ``steps[2].traces``: a field name as it would be written in JavaScript, quoted when it is not a plain name. */
export function joinPath(path: string, key: string | number): string {
  if (typeof key === "number") return `${path}[${key}]`;
  if (/^[A-Za-z_$][\w$]*$/.test(key)) return path ? `${path}.${key}` : key;
  return `${path}[${JSON.stringify(key)}]`;
}

function jsonType(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;  // string, boolean, object (undefined never reaches here: JSON has none)
}

/** Where a value sits, as a chain up to the root; written out (joinPath) only for a problem. */
type At = { up: At; key: string | number } | null;
function pathOf(at: At, base: string): string {
  const keys: (string | number)[] = [];
  for (let x = at; x; x = x.up) keys.push(x.key);
  return keys.reverse().reduce<string>((p, k) => joinPath(p, k), base);
}

class Found {
  problems: Problem[] = [];
  constructor(readonly base: string) {}
  get full(): boolean { return this.problems.length >= MAX_PROBLEMS; }
  add(at: At, expected: string, v: unknown): void { if (!this.full) this.problems.push({ path: pathOf(at, this.base), expected, got: gotWords(v) }); }
}

/** A schema compiled to a check: ``label`` is the words of the $ref that led here ("a step"), said instead of the bare type. */
type Check = (v: unknown, at: At, found: Found, label?: string) => void;
type Fits = (v: unknown) => boolean;

// Each schema object is compiled once (the payload is large: thousands of calls and graph nodes per step).
const checks = new Map<Schema, Check>();
const fitters = new Map<Schema, Fits>();

/** Whether ``v`` has a JSON type ``s`` allows (a one-of picks its branch by this). */
function fitsOf(s: Schema): Fits {
  let f = fitters.get(s);
  if (f) return f;
  if (typeof s === "boolean") f = () => s;
  else if (s.$ref) { const ref = s.$ref; let t: Fits | undefined; f = (v) => (t ??= fitsOf(resolve(ref)))(v); }
  else if ("const" in s) f = (v) => v === s.const;
  else if (s.enum) f = (v) => s.enum.includes(v);
  else if (s.oneOf) { const bs = s.oneOf.map(fitsOf); f = (v) => bs.some((b: Fits) => b(v)); }
  else if (s.type === undefined) f = () => true;
  else {
    const types = new Set<string>([].concat(s.type));
    const number = types.has("number");
    f = (v) => { const t = jsonType(v); return types.has(t) || (number && t === "integer"); };
  }
  fitters.set(s, f);
  return f;
}

function checkOf(s: Schema): Check {
  let c = checks.get(s);
  if (!c) { checks.set(s, (v, at, found, label) => c!(v, at, found, label)); c = compile(s); checks.set(s, c); }
  return c;
}

function compile(s: Schema): Check {
  if (s === true) return () => {};
  if (s === false) return (v, at, found) => found.add(at, "no value here", v);
  if (s.$ref) {
    const words = expectedWords(s), ref = s.$ref;
    let target: Check | undefined;
    return (v, at, found, label) => (target ??= checkOf(resolve(ref)))(v, at, found, label ?? words);
  }
  const fits = fitsOf(s), words = expectedWords(s);
  if (s.oneOf) {
    const branches = (s.oneOf as Schema[]).map((b) => ({ fits: fitsOf(b), check: checkOf(b) }));
    return (v, at, found, label) => {
      if (found.full) return;
      const take = branches.filter((b) => b.fits(v));
      if (!take.length) { found.add(at, label ?? words, v); return; }
      if (take.length === 1) { take[0].check(v, at, found); return; }
      // several branches take this JSON type: the value must match exactly one (the record schema has no such case today)
      const tries = take.map((b) => { const f = new Found(found.base); b.check(v, at, f); return f.problems; });
      const matched = tries.filter((p) => !p.length).length;
      if (matched > 1) found.add(at, `exactly one of: ${words}`, v);
      else if (!matched) for (const p of tries.reduce((a, b) => (b.length < a.length ? b : a))) if (!found.full) found.problems.push(p);
    };
  }
  const min: number | undefined = s.minimum, minItems: number | undefined = s.minItems, maxItems: number | undefined = s.maxItems;
  const prefix = ((s.prefixItems ?? []) as Schema[]).map(checkOf);
  const items = s.items === undefined ? null : checkOf(s.items);
  const props = new Map(Object.entries((s.properties ?? {}) as Record<string, Schema>).map(([k, x]) => [k, checkOf(x)]));
  const required = ((s.required ?? []) as string[]).map((k) => ({ k, words: expectedWords(s.properties?.[k] ?? true) }));
  const extra = s.additionalProperties === undefined || s.additionalProperties === false ? null : checkOf(s.additionalProperties);
  const closed = s.additionalProperties === false, names = Object.keys(s.properties ?? {}).join(", ");
  return (v, at, found, label) => {
    if (found.full) return;
    if (!fits(v)) { found.add(at, label ?? words, v); return; }
    if (typeof v === "number") { if (min !== undefined && v < min) found.add(at, label ?? words, v); return; }
    if (Array.isArray(v)) {
      if ((minItems !== undefined && v.length < minItems) || (maxItems !== undefined && v.length > maxItems)) { found.add(at, label ?? words, v); return; }
      for (let i = 0; i < v.length && !found.full; i++) {
        const c = i < prefix.length ? prefix[i] : items;
        if (c) c(v[i], { up: at, key: i }, found);
      }
      return;
    }
    if (v === null || typeof v !== "object") return;
    const o = v as Record<string, unknown>;
    for (const r of required) if (!(r.k in o)) found.add({ up: at, key: r.k }, r.words, undefined);
    for (const k of Object.keys(o)) {
      const c = props.get(k);
      if (c) c(o[k], { up: at, key: k }, found);
      else if (closed) found.add({ up: at, key: k }, `no such field (${label ?? (at ? "this object" : "a record")} has ${names})`, o[k]);
      else if (extra) extra(o[k], { up: at, key: k }, found);
    }
  };
}

/** Every way ``p`` differs from "thunderlab.record/v1" (at most MAX_PROBLEMS); empty when the views can draw it. */
export function checkPayload(p: unknown): Problem[] {
  const o = p as Record<string, unknown> | null;
  if (o !== null && typeof o === "object" && !Array.isArray(o) && "schema" in o && o.schema !== SCHEMA) {
    // another version's record: its other fields follow another schema, so listing them would mislead
    return [{ path: "schema", expected: `${JSON.stringify(SCHEMA)} (the version this viewer reads)`, got: gotWords(o.schema),
      hint: "the record was written by another version of thunderlab: write it again (rec.to_html) with the thunderlab that shows it" }];
  }
  const found = new Found("");
  checkOf(ROOT)(p, null, found, "a thunderlab record (a JSON object)");
  return found.problems;
}

/** Every way one step's ``traces`` (sent apart from its record: the sidebar loads them when shown) differs from the schema. */
export function checkTraces(traces: unknown, step: number): Problem[] {
  const found = new Found(`steps[${step}].traces`);
  checkOf(ROOT.$defs.step.properties.traces)(traces, null, found);
  return found.problems;
}

/** One problem as one line: ``steps[2].traces: expected …, got the number 5``. */
export function problemText(p: Problem): string {
  return `${p.path || "the record"}: expected ${p.expected}, got ${p.got}`;
}
