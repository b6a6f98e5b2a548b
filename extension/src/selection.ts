// The call (graph node) a view has selected, shared by the program, diff and graph views of one record:
// selecting a line of the program selects its node in the graph and the other way round.

export type SelectionListener = (id: string | null, source: string) => void;

export class SelectionModel {
  private _id: string | null = null;
  private _listeners = new Set<SelectionListener>();

  /** The selected node's id ("b<stable id>"), or null. */
  get selected(): string | null { return this._id; }

  /** Select node `id` (null: none); `source` names the view that asked, so it need not react to itself. */
  selectNode(id: string | null, source = ""): void {
    if (id === this._id) return;
    this._id = id;
    for (const fn of [...this._listeners]) fn(id, source);
  }

  /** Call `fn` on every change; returns the function that stops it. */
  onChange(fn: SelectionListener): () => void {
    this._listeners.add(fn);
    return () => { this._listeners.delete(fn); };
  }
}

const models = new WeakMap<object, SelectionModel>();

/** The selection shared by every view drawn into `owner` (a record's root element, or the sidebar). */
export function selectionOf(owner: object): SelectionModel {
  let m = models.get(owner);
  if (!m) { m = new SelectionModel(); models.set(owner, m); }
  return m;
}
