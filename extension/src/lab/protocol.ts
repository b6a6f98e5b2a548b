// The sidebar protocol, browser side: the requests the kernel declares (thunderlab/jupyter/protocol.py),
// their replies and the events it pushes. Version 1.
import type { TraceText } from "../calldiff";
import type { Kernels } from "../kernels";
import type { Communication, Gemm, Layouts, Payload, Race, Trace } from "../payload";

export const PROTOCOL = 1;
export const TARGET = "thunderlab";

export interface RecordRow {
  record: number; name: string; created: number; pipeline: string; steps: number; error: string | null;
  graph: number; inputs: string[]; reused: number;
  /** where the captured graph came from (its capture step's summary); absent from older kernels */
  origin?: Origin | null;
  /** calls the graph ran as TorchDynamo captured it, its sizes having kept changing (on its newest record; else 0);
   *  absent from older kernels */
  as_captured?: number;
}
export interface Origin { summary: string; graph_break: boolean; resumed: boolean; recompiled: boolean }
export interface PassInfo {
  name: string; summary: string; options: Record<string, { type: string; default: unknown }>;
  requires: string[]; last: boolean; module: string;
}
export interface RegionTimings {
  executor: string; version: string; device: string;
  timings: Record<string, { count: number; median_s: number; min_s: number }>;
  /** the region's race (null when compiled with race=False; absent from kernels older than the race) */
  race?: Race | null;
  /** a worker's kernel compiled again for other input strides (null for other kernels) */
  layouts?: Layouts | null;
  /** an Inductor kernel's linear layers: the GEMM library each product runs on (null where none was chosen here) */
  gemm?: Gemm[] | null;
}
export interface TimingsEvent {
  record: number; regions: Record<string, RegionTimings>;
  /** per collective, its exchanges timed so far (absent from kernels older than communication timings) */
  communication?: Communication;
}
export interface CompareStep { index: number; spec: string; ms: number; shared: boolean }
export interface Comparison {
  a: number; b: number; program_diff: string; symbols: [number, number]; regions: [number, number];
  seconds: [number, number] | null; note?: string;
  steps: { index: number; a: string | null; a_ms: number | null; b: string | null; b_ms: number | null }[];
  /** each pipeline's own steps (b's steps taken over unchanged from a are `shared`); the final programs with their calls */
  a_steps?: CompareStep[]; b_steps?: CompareStep[];
  programs?: { a: Record<string, TraceText>; b: Record<string, TraceText> };
}
export interface Profile { record: number; kernels: Kernels; versions: Record<string, string> }

/** Request type -> [fields sent, reply body]. */
export interface Requests {
  "hello": [{}, { protocol: number; thunderlab: string; records: number }];
  "records.list": [{ offset?: number; limit?: number; filter?: string }, { total: number; offset: number; records: RecordRow[] }];
  "record.summary": [{ record: number }, { record: number; payload: Payload }];
  "step.traces": [{ record: number; step: number }, { record: number; step: number; traces: Record<string, Trace> | null }];
  "pipeline.validate": [{ pipeline: string }, { ok: boolean; error: string | null; pipeline: string }];
  "record.rerun": [{ record: number; pipeline: string }, { record: number; from: number }];
  "passes.list": [{}, { passes: PassInfo[] }];
  "records.compare": [{ a: number; b: number; time?: boolean }, Comparison];
  "timings.subscribe": [{ record: number | null }, TimingsEvent | { record: null }];
  "record.profile": [{ record: number }, Profile];
}
export type RequestType = keyof Requests;

export type PushEvent =
  | ({ type: "record.new" } & RecordRow)
  /** a listed record's row again, changed (its graph ran calls as captured) */
  | ({ type: "record.update" } & RecordRow)
  | ({ type: "timings" } & TimingsEvent);

/** What a message from the kernel is: a reply (to a request id), an error reply, an event, or junk. */
export type Incoming =
  | { kind: "reply"; to: number; body: Record<string, unknown> }
  | { kind: "error"; to: number | null; error: string }
  | { kind: "event"; event: PushEvent }
  | { kind: "ignored"; why: string };

export function classify(data: unknown): Incoming {
  if (!data || typeof data !== "object") return { kind: "ignored", why: "not an object" };
  const m = data as Record<string, unknown>;
  if (m.v !== PROTOCOL) return { kind: "ignored", why: `protocol version ${String(m.v)}` };
  const t = m.type;
  if (t === "error") return { kind: "error", to: typeof m.reply_to === "number" ? m.reply_to : null, error: String(m.error ?? "") };
  if (typeof t === "string" && t.endsWith(".reply") && typeof m.reply_to === "number") return { kind: "reply", to: m.reply_to, body: m };
  if (t === "record.new" || t === "record.update" || t === "timings") return { kind: "event", event: m as unknown as PushEvent };
  return { kind: "ignored", why: `unknown type ${String(t)}` };
}
