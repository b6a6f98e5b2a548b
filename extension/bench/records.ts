// The sidebar's records list on its own, for benchmarks/views.py: window.tlBench.records(n) lists n
// records in the real RecordsBody and returns how long listing, filtering and paging took (ms).
import { Widget } from "@lumino/widgets";
import { RecordsModel } from "../src/lab/records/model";
import { RecordsBody } from "../src/lab/records/panel";
import type { RecordRow } from "../src/lab/protocol";

function rows(n: number): RecordRow[] {
  const now = Date.now() / 1000;
  return Array.from({ length: n }, (_, i) => ({
    record: i, name: `model_${i % 37}.forward`, created: now - (n - i), pipeline: "dce,cse,autodiff,remat,claim,fuse,del",
    steps: 8, error: i % 97 === 0 ? "RuntimeError: shape mismatch" : null, graph: i % 3, inputs: ["cpu f32[8, 64]"], reused: 0,
  }));
}

const settle = (): number => document.body.offsetHeight;  // style and layout done, as the user would see it

function records(n: number): { list_ms: number; filter_ms: number; page_ms: number; add_ms: number; shown: number } {
  document.body.replaceChildren();
  const model = new RecordsModel();
  const body = new RecordsBody({ records: model } as any);
  Widget.attach(body, document.body);
  const data = rows(n);
  let t = performance.now();
  model.reset(data);
  settle();
  const list_ms = performance.now() - t;
  t = performance.now();
  model.setFilter("model_3");
  settle();
  const filter_ms = performance.now() - t;
  model.setFilter("");
  t = performance.now();
  model.setPage(5);
  settle();
  const page_ms = performance.now() - t;
  t = performance.now();
  model.add({ ...data[0], record: n + 1, name: "new.forward" });
  settle();
  const add_ms = performance.now() - t;
  const shown = document.querySelectorAll(".tl-record").length;
  Widget.detach(body);
  return { list_ms, filter_ms, page_ms, add_ms, shown };
}

(window as any).tlBench = { records };
