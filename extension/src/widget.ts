// anywidget front end: the step-through pass debugger. Python owns the state (traits payload,
// current, status, error); the view renders it and sends requests back as messages. renderRecord checks the
// payload against its schema first: a malformed one shows what is wrong in the cell's output.
import { renderRecord } from "./record";

interface Model {
  get(name: string): unknown;
  on(event: string, cb: () => void): void;
  off?(event: string, cb: () => void): void;
  send(msg: unknown): void;
}

function render({ model, el }: { model: Model; el: HTMLElement }): () => void {
  const paint = (): void => {
    const payload = model.get("payload");
    if (payload == null || (typeof payload === "object" && !Object.keys(payload).length)) {  // the trait's empty default
      el.textContent = "thunderlab: no record yet";
      return;
    }
    renderRecord(el, payload, {
      current: Number(model.get("current") ?? 0),
      status: String(model.get("status") ?? ""),
      error: String(model.get("error") ?? ""),
      onSelect: (step) => model.send({ type: "goto", step }),
      onRunTo: (pass) => model.send({ type: "run_to", pass }),
      onRerun: (pipeline) => model.send({ type: "rerun", pipeline }),
    });
  };
  const events = ["change:payload", "change:current", "change:status", "change:error"];
  for (const ev of events) model.on(ev, paint);
  paint();
  return () => { for (const ev of events) model.off?.(ev, paint); };
}

export const widget = { render };
