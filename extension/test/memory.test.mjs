// The sidebar's per-notebook memory (src/lab/memory.ts), with a stand-in for JupyterLab's state database.
import { test } from "node:test";
import assert from "node:assert/strict";
import { merged, SidebarMemory, STATE_ID } from "../build-test/lab.mjs";

function store(initial) {
  const saved = new Map(initial ? [[STATE_ID, initial]] : []);
  return { saved, fetch: async (id) => saved.get(id), save: async (id, v) => { saved.set(id, JSON.parse(JSON.stringify(v))); } };
}

test("merged keeps a notebook's view and forgets the step of a record it left", () => {
  assert.deepEqual(merged({ record: 1, step: 4, view: "Diff" }, { step: 2 }), { record: 1, step: 2, view: "Diff" });
  assert.deepEqual(merged({ record: 1, step: 4, view: "Diff" }, { record: 2 }), { record: 2, view: "Diff" });
  assert.deepEqual(merged({ record: 1, step: 4 }, { record: 1 }), { record: 1, step: 4 });
  assert.deepEqual(merged({}, { record: 3, step: 0 }), { record: 3, step: 0 });
});

test("each notebook's state is kept apart, saved, and read back by a new sidebar", async () => {
  const db = store();
  const m = new SidebarMemory(db, 1);
  await m.ready;
  m.set("a.ipynb", { record: 1, step: 3 });
  m.set("b.ipynb", { record: 7, view: "Graph" });
  m.set(undefined, { record: 9 });  // no notebook followed: nothing kept
  assert.deepEqual(m.get("a.ipynb"), { record: 1, step: 3 });
  assert.deepEqual(m.get("b.ipynb"), { record: 7, view: "Graph" });
  await m.flush();
  assert.deepEqual(db.saved.get(STATE_ID), { "a.ipynb": { record: 1, step: 3 }, "b.ipynb": { record: 7, view: "Graph" } });
  const again = new SidebarMemory(db);
  await again.ready;
  assert.deepEqual(again.get("a.ipynb"), { record: 1, step: 3 });
  again.forget("a.ipynb");
  await again.flush();
  assert.deepEqual(Object.keys(db.saved.get(STATE_ID)), ["b.ipynb"]);
});

test("without a state database the memory still works for the session", async () => {
  const m = new SidebarMemory(null);
  await m.ready;
  m.set("a.ipynb", { step: 1 });
  assert.deepEqual(m.get("a.ipynb"), { step: 1 });
  assert.deepEqual(m.get("nope.ipynb"), {});
});

test("saves are batched: many edits, one write", async () => {
  const db = store();
  let writes = 0;
  const save = db.save;
  db.save = async (id, v) => { writes++; return save(id, v); };
  const m = new SidebarMemory(db, 20);
  for (let i = 0; i < 10; i++) m.set("a.ipynb", { step: i });
  await new Promise((r) => setTimeout(r, 60));
  assert.equal(writes, 1);
  assert.equal(db.saved.get(STATE_ID)["a.ipynb"].step, 9);
});
