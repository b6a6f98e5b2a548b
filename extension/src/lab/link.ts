// The link to the followed kernel: one comm named "thunderlab", requests with replies, pushed events,
// and the link's state in words. It reconnects by itself when the kernel comes back.
import type { ISessionContext } from "@jupyterlab/apputils";
import type { Kernel, KernelMessage } from "@jupyterlab/services";
import { Signal, type ISignal } from "@lumino/signaling";
import { classify, PROTOCOL, TARGET, type PushEvent, type Requests, type RequestType } from "./protocol";

export type LinkState = "no-kernel" | "connecting" | "not-imported" | "ready" | "restarting" | "dead";

/** What each state says to the user. */
export const STATE_WORDS: Record<LinkState, string> = {
  "no-kernel": "Open a notebook or console: the sidebar follows its kernel.",
  "connecting": "Connecting to the kernel…",
  "not-imported": "This kernel has not imported thunderlab yet: run `import thunderlab` (or %load_ext thunderlab).",
  "ready": "Connected to the kernel.",
  "restarting": "The kernel is restarting; the sidebar reconnects when it is back.",
  "dead": "The kernel has died. Restart it (Kernel menu); the sidebar reconnects by itself.",
};

interface Pending { resolve: (v: any) => void; reject: (e: Error) => void }

export class KernelLink {
  private _ctx: ISessionContext | null = null;
  private _kernel: Kernel.IKernelConnection | null = null;
  private _comm: Kernel.IComm | null = null;
  private _state: LinkState = "no-kernel";
  private _busy = false;
  private _next = 1;
  private _pending = new Map<number, Pending>();
  private _stateChanged = new Signal<this, LinkState>(this);
  private _pushed = new Signal<this, PushEvent>(this);
  private _connected = new Signal<this, void>(this);

  get state(): LinkState { return this._state; }
  get busy(): boolean { return this._busy; }
  get ready(): boolean { return this._state === "ready"; }
  /** The followed session (its path names the notebook). */
  get session(): ISessionContext | null { return this._ctx; }
  get stateChanged(): ISignal<this, LinkState> { return this._stateChanged; }
  get pushed(): ISignal<this, PushEvent> { return this._pushed; }
  /** A new comm is ready (after import, reconnection or a restart): views reload. */
  get connected(): ISignal<this, void> { return this._connected; }

  /** Follow another notebook's or console's session (null: none). */
  follow(ctx: ISessionContext | null): void {
    if (ctx === this._ctx) return;
    if (this._ctx) {
      this._ctx.kernelChanged.disconnect(this._onKernelChanged, this);
      this._ctx.statusChanged.disconnect(this._onStatus, this);
    }
    this._ctx = ctx;
    this._drop();
    if (ctx) {
      ctx.kernelChanged.connect(this._onKernelChanged, this);
      ctx.statusChanged.connect(this._onStatus, this);
    }
    this._useKernel(ctx?.session?.kernel ?? null);
  }

  /** Send one declared request; resolves with its reply, rejects with the kernel's error in words. */
  request<T extends RequestType>(type: T, fields: Requests[T][0]): Promise<Requests[T][1]> {
    // while the first reply is pending (the kernel is busy) requests queue on the comm in order
    if (!this._comm) return Promise.reject(new Error(STATE_WORDS[this._state]));
    const id = this._next++;
    return new Promise((resolve, reject) => {
      this._pending.set(id, { resolve, reject });
      this._comm!.send({ v: PROTOCOL, id, type, ...fields } as any);
    });
  }

  dispose(): void { this.follow(null); Signal.clearData(this); }

  private _set(state: LinkState): void {
    if (state === this._state) return;
    this._state = state;
    this._stateChanged.emit(state);
  }

  private _onKernelChanged(): void {
    this._drop();
    this._useKernel(this._ctx?.session?.kernel ?? null);
  }

  private _onStatus(_ctx: ISessionContext, status: Kernel.Status): void {
    const busy = status === "busy";
    if (busy !== this._busy) { this._busy = busy; this._stateChanged.emit(this._state); }
    if (status === "restarting" || status === "autorestarting" || status === "starting") { this._drop(); this._set("restarting"); }
    else if (status === "dead") { this._drop(); this._set("dead"); }
    // back from a restart: ask once; a kernel without thunderlab opens the comm itself on import
    else if (status === "idle" && !this._comm && (this._state === "restarting" || this._state === "dead")) {
      this._register();
      this._set("connecting");
      this._probe();
    }
  }

  private _useKernel(kernel: Kernel.IKernelConnection | null): void {
    this._kernel = kernel;
    if (!kernel) { this._set("no-kernel"); return; }
    this._register();
    this._set("connecting");
    this._probe();
  }

  // a kernel that imports thunderlab later opens the comm itself
  private _register(): void {
    const kernel = this._kernel;
    if (kernel) kernel.registerCommTarget(TARGET, (comm) => this._attach(comm, kernel));
  }

  // ask an already-running kernel: the open fails (the kernel closes it) when thunderlab is not imported
  private _probe(): void {
    const kernel = this._kernel;
    if (!kernel || this._comm || kernel.status === "dead") return;
    if (kernel.connectionStatus !== "connected") { setTimeout(() => this._probe(), 300); return; }
    const comm = kernel.createComm(TARGET);
    this._attach(comm, kernel);
    comm.open({ v: PROTOCOL });
  }

  private _attach(comm: Kernel.IComm, kernel: Kernel.IKernelConnection): void {
    if (kernel !== this._kernel) { comm.close(); return; }
    if (this._comm && this._comm !== comm) this._comm.close();
    this._comm = comm;
    if (this._state !== "ready") this._set("connecting");
    comm.onMsg = (msg: KernelMessage.ICommMsgMsg) => this._onMsg(msg.content.data);
    comm.onClose = () => {
      if (this._comm !== comm) return;
      this._drop();
      if (this._state === "connecting" || this._state === "ready") this._set("not-imported");
    };
    // the first reply proves the kernel serves the protocol
    const id = this._next++;
    this._pending.set(id, {
      resolve: () => { this._set("ready"); this._connected.emit(); },
      reject: () => this._set("not-imported"),
    });
    setTimeout(() => { if (this._comm === comm) comm.send({ v: PROTOCOL, id, type: "hello" }); });
  }

  private _onMsg(data: unknown): void {
    const m = classify(data);
    if (m.kind === "event") { this._pushed.emit(m.event); return; }
    if (m.kind === "ignored") return;
    const p = m.to === null ? undefined : this._pending.get(m.to);
    if (!p) return;
    this._pending.delete(m.to!);
    if (m.kind === "reply") p.resolve(m.body);
    else p.reject(new Error(m.error));
  }

  private _drop(): void {
    const comm = this._comm;
    this._comm = null;
    if (comm && !comm.isDisposed) { comm.onClose = () => undefined; try { comm.close(); } catch { /* kernel gone */ } }
    for (const p of this._pending.values()) p.reject(new Error("the kernel link closed"));
    this._pending.clear();
  }
}
