"""Background region compiles in a process of their own, whose kernels this process loads.

A compile on a thread of this process competes with the caller for the interpreter lock, and a
training loop never leaves the lock free for long: every torch call releases it and must wait
(a switch interval, 5 ms) to take it back from a compiling thread. Both then crawl (the loop
several times slower than eager, the compile twice as slow as alone). So a tiered compile of a
CPU region is sent to one worker process, which compiles the region's printed program with
TorchInductor exactly as ``inductor.compile_region`` would and writes Inductor's module and
kernels into Inductor's cache directory; this process then only loads that module (milliseconds,
without importing Inductor's compiler: see ``_light_module``) and calls it as Inductor's own
wrapper would (its inputs in the graph's order, misaligned ones copied). A region the worker
cannot hand back as one plain module (Dynamo split it or merged inputs, AOTAutograd adds a
wrapper: mutated inputs or aliased outputs, constants on the module)
comes back with the reason, and is compiled here as before.

The worker starts when a tiered ``thunderlab.jit`` is made, or a tiered capture begins, whose regions may go
to Inductor (``expect``: it imports torch and Inductor, seconds, while this process captures and runs the
program's first call, when a core is free for it), or at the latest when such a region is bound, and ends
with this process (it also ends when its input closes). Messages are one JSON object a line on its standard
input and output. ``timeline()`` says when the worker started, when its imports were done, and when each
region was sent, compiled and answered.

Each answer is kept beside Inductor's cache (``thunderlab_worker/``, keyed by the request, this torch, thunderlab's
code, the environment and the CPU): a later process making the same request loads the module at once, without
starting or waiting for a worker (whose imports alone take seconds), so with a warm cache a region switches to its
kernel about as soon as its first call has run. ``THUNDERLAB_WORKER_ANSWERS=0`` asks the worker every time.

A request may ask for Inductor's C++ wrapper (``cpp_wrapper=True``): the module then calls its kernels and library
functions from one compiled C++ function instead of Python lines, which saves a few microseconds a call of each,
and costs a longer compile (a C++ file of the whole graph, seconds to a minute cold). Such requests go to a second
worker process, started at the first of them, which runs at the lowest CPU priority (Linux and macOS: its nice
value, which the C++ compiler processes it starts inherit): they are a region's second kernel, raced against its
first (see inductor.py), and neither its compile nor its wait may hold up another region's first kernel, which
the first worker compiles meanwhile. Each is sent when no first-kernel request is waiting or being answered, so
that the first worker's compiles have the cores while it is busy. Nothing waits for them: the region runs its
first kernel.
"""
from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading
import time

import torch

from thunderlab.core.codegen import Printer, compile_program, default_namespace, python, symbol_module
from thunderlab.core.files import cache_folder, code_identity, write_atomically
from thunderlab.core.trace import Trace
from thunderlab.executors import gemm


class _Worker:
    """One worker process: started on first use (or by ``start``), one request at a time, answered in turn.

    ``low_priority``: the process runs at the lowest CPU priority (the C++ wrapper's worker)."""

    def __init__(self, low_priority: bool = False):
        self.low_priority = low_priority
        self.lock = threading.Lock()  # held by a request from sending it to its answer
        self.waiting = 0  # requests waiting for the lock or holding it
        self.idle = threading.Condition()  # notified whenever a request is answered (or fails)
        self.proc: subprocess.Popen | None = None
        # why the worker could not be used at all (it failed to start or died); later requests are declined
        self.broken: str | None = None
        # when it was started (time.time()); its own clock says when its imports were done, and their CPU seconds
        self.spawned_at: float | None = None
        self.imported_at: float | None = None
        self.imported_cpu_s: float | None = None
        self.restarted_because: str | None = None  # why its first process died before answering, if it did

    def start(self) -> None:
        """Start the process now, if it is not running. A running worker returns at once: the lock is held by a
        request while the worker compiles (seconds, cold), and a later program's first call (the next frame after a
        graph break) must not wait for it."""
        if self.proc is not None or self.broken is not None:
            return
        with self.lock:
            self._ensure()

    def _ensure(self) -> None:
        if self.proc is None and self.broken is None:
            self.spawned_at = time.time()
            try:
                self.proc = _start(self.low_priority)
            except OSError as e:
                self.broken = f"the compile worker did not start: {e}"

    def send(self, msg: dict, asked_at: float) -> dict:
        """``msg`` answered by this worker, once the requests ahead of it are (``Declined`` if it is broken)."""
        with self.idle:
            self.waiting += 1
        try:
            return self._send(msg, asked_at)
        finally:
            with self.idle:
                self.waiting -= 1
                self.idle.notify_all()

    def wait_idle(self) -> None:
        """Until no request is waiting for this worker or being answered by it."""
        with self.idle:
            self.idle.wait_for(lambda: self.waiting == 0)

    def _send(self, msg: dict, asked_at: float) -> dict:
        with self.lock:
            self._ensure()
            if self.broken is not None:
                raise Declined(self.broken)
            entry = {"region": msg["name"], "asked_at": asked_at, "sent_at": time.time(), "answered_at": None,
                     "compile_s": None, "compile_cpu_s": None, "ok": False, "cpp_wrapper": bool(msg.get("cpp_wrapper"))}
            _requests.append(entry)
            line = self._exchange(msg)
            if not line and self.imported_at is None and self.restarted_because is None:
                # a worker that dies before its first answer (it failed to import) is started once more: once it
                # is broken, every later region of this process goes without its kernels
                _stop(self.proc)  # its pipes closed, its exit collected
                self.restarted_because, self.proc, self.broken = self.broken, None, None
                self._ensure()
                line = "" if self.broken else self._exchange(msg)
            if not line:
                raise Declined(self.broken)
            answer = json.loads(line)
            self.imported_at = answer.get("imported_at", self.imported_at)
            self.imported_cpu_s = answer.get("imported_cpu_s", self.imported_cpu_s)
            entry.update(answered_at=time.time(), compile_s=answer.get("compile_s"),
                         compile_cpu_s=answer.get("compile_cpu_s"), ok=bool(answer.get("ok")))
            return answer

    def _exchange(self, msg: dict) -> str:
        """The worker's answer to ``msg`` as a line, or "" with ``broken`` saying why there is none."""
        try:
            self.proc.stdin.write(json.dumps(msg) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()  # waits without the interpreter lock
        except (OSError, ValueError) as e:
            line, self.broken = "", f"the compile worker failed: {e}"
        if not line and self.broken is None:
            try:
                code = self.proc.wait(timeout=5)  # its output closed: it is exiting
            except subprocess.TimeoutExpired:
                code = None
            self.broken = f"the compile worker exited (code {code})"
        return line

    def times(self) -> dict:
        return {"spawned_at": self.spawned_at, "imported_at": self.imported_at, "imported_cpu_s": self.imported_cpu_s,
                "restarted_because": self.restarted_because}


_first = _Worker()  # regions' first kernels, and their modules for other strides
_second = _Worker(low_priority=True)  # the modules with Inductor's C++ wrapper
# each request (see ``timeline``), both workers'
_requests: list[dict] = []
_recalled: list[dict] = []  # regions whose module an earlier worker wrote: region, at (see ``_recall``)


def _forget_after_fork() -> None:
    """A forked child (a DataLoader worker, say) must not write into its parent's pipes: it starts its own."""
    global _first, _second
    _first, _second = _Worker(), _Worker(low_priority=True)
    _requests.clear()
    _recalled.clear()


def unavailable(cpp_wrapper: bool = False) -> str | None:
    """Why the worker (``cpp_wrapper``: the C++ wrapper's) cannot take requests: it failed to start or died; None
    while it can."""
    return (_second if cpp_wrapper else _first).broken


os.register_at_fork(after_in_child=_forget_after_fork)


class Declined(Exception):
    """The region is compiled in this process instead; the message says why."""


def input_specs(args: tuple) -> list:
    """What the worker is told of each input (shape, strides, offset, dtype); ``Declined`` for one it cannot take."""
    inputs = []
    for a in args:
        if not isinstance(a, torch.Tensor) or a.device.type != "cpu" or a.is_sparse or a.layout != torch.strided:
            raise Declined("only dense CPU tensor inputs are compiled in the worker process")
        inputs.append([list(a.shape), list(a.stride()), a.storage_offset(), str(a.dtype).removeprefix("torch.")])
    return inputs


def request(region: Trace, args: tuple, cpp_wrapper: bool = False) -> dict:
    """Send ``region`` to the worker; its answer: the module Inductor wrote (key, path) and how to call it.
    ``cpp_wrapper``: the module calls its kernels from C++ (Inductor's ``cpp_wrapper``).

    Raises ``Declined`` when the region must be compiled here (a reason it gives, or the worker is unavailable).
    """
    return request_specs(region, input_specs(args), args, cpp_wrapper=cpp_wrapper)


# integer inputs up to this many elements are sent with their values (token ids, labels, positions)
_VALUES_UP_TO = 1 << 16


def _index_values(args: tuple) -> dict:
    """``{position: values}`` for the small, dense integer and boolean inputs: the worker runs the region on them.

    Its other inputs it makes up (random floats); made-up indices (zeros) can be wrong for a program that computes
    an index from them (mBART's labels shifted right gather at the last non-padding token of each row), and its
    check of the module would fail where the caller's own inputs run. The values are not part of the request's key:
    the module does not depend on them.
    """
    out = {}
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor) and not (a.dtype.is_floating_point or a.dtype.is_complex) \
                and a.numel() <= _VALUES_UP_TO and a.is_contiguous():
            out[str(i)] = a.reshape(-1).tolist()
    return out


def request_specs(region: Trace, inputs: list, args: tuple | None = None, cpp_wrapper: bool = False) -> dict:
    """``request`` for inputs described by ``input_specs`` (a compile that need not hold the tensors); ``args``, where
    given, are those inputs: a request the worker is sent carries their small integer values (``_index_values``)."""
    from thunderlab.ops.mapping import REBUILD, torch_attribute

    p = Printer()
    src = _program(region, p)
    graphs = _graph_sources(p.constants)  # values the printed program names as constants
    symbols, derived = {}, {}
    for b in region.bound_symbols:
        mod, _, attr = b.sym.qualname.partition(".")
        # an in-place call's functional twin, made while lowering, or a custom operator, registered by a module
        # this process imported: made again there
        if b.sym.qualname in REBUILD:
            derived[b.sym.qualname] = REBUILD[b.sym.qualname]
            continue
        if mod == "torch" and torch_attribute(attr) is b.sym.impl:  # torch.histc: the worker's torch has it
            continue
        if _resolve(b.sym.qualname) is not b.sym:  # a symbol registered at run time: the worker lacks it
            raise Declined(f"{b.sym.qualname} is not importable from thunderlab.ops")
        if b.sym.name in ("eager_vjp", "custom_op_vjp") and b.args and isinstance(b.args[0], str):
            named = b.args[0]  # the symbol it differentiates, by name
            if named in REBUILD:  # made again there, under this name
                derived[named] = REBUILD[named]
            elif named.partition(".")[0] not in ("torch", "ltorch", "prims"):
                raise Declined(f"{b.sym.qualname} differentiates {named}, which is not importable from thunderlab.ops")
        symbols.setdefault(mod, []).append(attr)
    msg = {"name": region.name, "source": src, "symbols": {k: sorted(set(v)) for k, v in symbols.items()},
           **({"derived": derived} if derived else {}), **({"graphs": graphs} if graphs else {}),
           "inputs": inputs, "threads": torch.get_num_threads(),
           "onednn_linear": gemm.enabled(), **({"cpp_wrapper": True} if cpp_wrapper else {})}
    answer = _recall(msg)
    if answer is not None:
        return answer
    values = _index_values(args) if args is not None else None
    answer = _send(dict(msg, values=values) if values else msg)
    if not answer.get("ok"):
        raise Declined(answer.get("reason", "the worker gave no reason"))
    _remember(msg, answer)
    return answer


def _graph_sources(constants: dict) -> dict:
    """The printed program's constants as the worker makes them again: ``{name: {"source", "globals"}}``.

    A graph module that holds nothing but its code (an ``autograd.Function``'s forward or backward, as TorchDynamo
    captured it: BLOOM's GeLU) is sent as that code and how to find what it names; the worker runs the code as this
    process runs the module. ``Declined`` for any other value: only this process has it.
    """
    out, others = {}, []
    for name, value in constants.items():
        graph = _graph_source(value)
        if graph is None:
            others.append(name)
        else:
            out[name] = graph
    if others:
        raise Declined(f"the region's program uses values it cannot print ({', '.join(sorted(others))})")
    return out


def _graph_source(value) -> dict | None:
    """``value``'s code and how to find each global it names, where it is a graph module with no state of its own;
    else None."""
    if not isinstance(value, torch.fx.GraphModule) or any(True for _ in value.parameters()) \
            or any(True for _ in value.buffers()) or any(True for _ in value.children()) \
            or any(n.op in ("get_attr", "call_module") for n in value.graph.nodes):
        return None
    code = value.graph.python_code(root_module="self")
    names = {}
    for name, g in code.globals.items():
        found = _findable(g)
        if found is None:
            return None
        names[name] = found
    return {"source": code.src, "globals": names}


def _findable(value) -> list | None:
    """How another process finds ``value``: ``["float", text]`` (FX's ``inf`` and ``nan``), ``[module]`` or
    ``[module, qualified name]`` (checked to give this very object here), or None."""
    import importlib
    import types

    if isinstance(value, float):
        return ["float", repr(value)]
    if isinstance(value, types.ModuleType):
        return [value.__name__] if sys.modules.get(value.__name__) is value else None
    qualname = getattr(value, "__qualname__", None)
    if not isinstance(qualname, str) or "<" in qualname:
        return None
    for module in (getattr(value, "__module__", None), "types"):  # NoneType is found in types
        try:
            obj = importlib.import_module(module)
            for part in qualname.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError, TypeError, ValueError):
            continue
        if obj is value:
            return [module, qualname]
    return None


def _found(recipe: list):
    """The value ``_findable`` described, in this process."""
    import functools
    import importlib

    if recipe[0] == "float":
        return float(recipe[1])
    obj = importlib.import_module(recipe[0])
    return functools.reduce(getattr, recipe[1].split("."), obj) if len(recipe) > 1 else obj


def _graph_callable(graph: dict):
    """A callable for a graph module sent by ``_graph_sources``: its ``forward``, with no module to hold."""
    import functools

    namespace = {name: _found(recipe) for name, recipe in graph["globals"].items()}
    exec(compile(graph["source"], "<thunderlab graph module>", "exec"), namespace)
    return functools.partial(namespace["forward"], None)


# ---- answers kept on disk: a later process loads the module without waiting for a worker ----

def answers_enabled() -> bool:
    """Whether the worker's answers are kept beside Inductor's cache and recalled by later processes (on unless
    ``THUNDERLAB_WORKER_ANSWERS=0`` is in the environment, or every fast path is off)."""
    from thunderlab.core import fastpaths

    return fastpaths.switched_on("THUNDERLAB_WORKER_ANSWERS") and fastpaths.enabled()


def _answers_dir() -> str:
    return str(cache_folder("thunderlab_worker"))


def _answer_path(msg: dict) -> str:
    import hashlib

    key = hashlib.sha256((code_identity() + json.dumps(msg, sort_keys=True)).encode()).hexdigest()
    return os.path.join(_answers_dir(), key[:40] + ".json")


def _program_path(source: str) -> str:
    """Marks that a worker answered a request for this program (in some input layout)."""
    import hashlib

    key = hashlib.sha256((code_identity() + source).encode()).hexdigest()
    return os.path.join(_answers_dir(), key[:40] + ".program")


def answered_before(region: Trace) -> bool:
    """Whether a worker (of this or an earlier process) answered a request for ``region``'s program: its first
    compile will most likely be recalled, and no worker need start for it."""
    if not answers_enabled():
        return False
    try:
        return os.path.exists(_program_path(_program(region)))
    except Exception:  # noqa: BLE001 - a program that does not print is sent (and declined) as before
        return False


def _any_answers() -> bool:
    try:
        return answers_enabled() and any(n.endswith(".program") for n in os.listdir(_answers_dir()))
    except OSError:
        return False


def _write_json(path: str, value) -> None:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomically(path, json.dumps(value))
    except OSError:  # a read-only cache: the next process does the work again
        pass


def _recall(msg: dict) -> dict | None:
    """The answer a worker gave an earlier process for this very request, if its module is still on disk and
    loads: the region then switches to its kernel without waiting for a worker's imports and compile (seconds).
    Kept in ``timeline()["recalled"]``."""
    if not answers_enabled():
        return None
    path = _answer_path(msg)
    try:
        with open(path) as f:
            text = f.read()
    except OSError:  # never answered (or unreadable): the worker is asked
        return None
    try:
        answer = json.loads(text)
        load(answer)  # the module and its kernels' library: Inductor rebuilds a library that has gone
    except Exception:  # noqa: BLE001 - a damaged entry, or its module is gone: the worker compiles the region again
        try:
            os.remove(path)
        except OSError:
            pass
        return None
    _recalled.append({"region": msg["name"], "at": time.time(), "cpp_wrapper": bool(msg.get("cpp_wrapper"))})
    return dict(answer, recalled=True)


def _remember(msg: dict, answer: dict) -> None:
    if not answers_enabled():
        return
    _write_json(_answer_path(msg), {k: answer[k] for k in ("ok", "key", "path", "order", "inputs_to_check", "gemm",
                                                           "kernels", "extern") if k in answer})
    _write_json(_program_path(msg["source"]), msg["name"])


def _program(region: Trace, printer: Printer | None = None) -> str:
    """The region's program as the worker is sent it."""
    return python(region, source=False, comments=False, imports=False, printer=printer or Printer(), regions=False)


def _resolve(qualname: str):
    """The symbol a printed program's ``ltorch.name`` or ``prims.name`` stands for, from the ops' tables."""
    import thunderlab.ops  # noqa: F401  (declares every op)
    from thunderlab.ops.declare import LTORCH
    from thunderlab.ops.prims import PRIMS

    mod, _, attr = qualname.partition(".")
    return {"ltorch": LTORCH, "prims": PRIMS}.get(mod, {}).get(attr)


def expect(pipeline: str, args, order: tuple[str, ...]) -> None:
    """A tiered capture begins: start the worker now if the program's regions may be compiled in it.

    ``order`` is the executor priority a pipeline that names none uses (``thunderlab.executors.default_order()``,
    passed in: this module sits below the package that registers the executors).

    They may when fast paths are on, the pipeline fuses, Inductor is among the executors its ``claim`` is
    given (or the default ones) and can run here, and every tensor input is on the CPU. Starting now
    rather than when the first region is bound lets the worker's imports overlap the capture and passes,
    on a core of their own: when the machine has none free (its load average is not below its core count
    less one), the imports would only take CPU from the capture (measured: the first call of nanoGPT's
    loop took twice as long, and the last kernel came no sooner), so the worker starts when the first
    region is bound, as it would without this call. Nor does it start here once workers have answered in this
    cache: the first region bound starts it only if its program was never answered (``answered_before``), so a
    warm start loads its modules without a worker's imports competing for the cores.
    """
    from thunderlab.core import fastpaths

    from .base import get_executor

    if _first.proc is not None or _first.broken is not None or not fastpaths.enabled() or "fuse" not in pipeline:
        return
    named = pipeline.partition("executors=")[2]
    if ("inductor" not in named) if named else ("inductor" not in order):
        return
    if any(isinstance(a, torch.Tensor) and a.device.type != "cpu" for a in args):
        return
    if _any_answers():  # the regions' modules may be on disk already: binding them decides (``answered_before``)
        return
    if _core_free() and get_executor("inductor").available()[0]:
        start()


def _core_free() -> bool:
    """Whether a core is idle for the worker besides the one this process runs on (load average, last minute)."""
    try:
        return os.getloadavg()[0] <= (os.cpu_count() or 1) - 1
    except OSError:  # no load average on this platform
        return True


def timeline() -> dict:
    """When the worker started and finished its imports, and each region's request, in seconds since the epoch:
    ``{"spawned_at", "imported_at", "imported_cpu_s", "requests": [{"region", "asked_at", "sent_at", "answered_at",
    "compile_s", "compile_cpu_s", "ok", "cpp_wrapper"}]}`` (``asked_at``: when the region asked, ``sent_at``: when the
    worker took it, after the requests ahead of it; ``compile_s``: the worker's own time on the region, the rest of
    ``answered_at - sent_at`` it spent reading and writing; ``*_cpu_s``: the worker's CPU seconds, which other
    processes' load changes less; ``cpp_wrapper``: the region's second module, with Inductor's C++ wrapper, which the
    second worker compiles), ``"cpp_worker": {"spawned_at", "imported_at", "imported_cpu_s"}``, that second worker's
    (None until it started), ``restarted_because`` (each worker's: why its first process died before its first answer,
    after which it was started once more), and ``"recalled": [{"region", "at", "cpp_wrapper"}]``, the regions whose
    module a worker of an earlier process wrote, loaded without a request."""
    # no lock: a request holds it while the worker compiles, and a copy of the list is enough
    return {**_first.times(), "requests": [dict(r) for r in list(_requests)],
            "cpp_worker": _second.times() if _second.spawned_at is not None else None,
            "recalled": [dict(r) for r in list(_recalled)]}


def start() -> None:
    """Start the (first) worker now, if it is not running: it imports torch and Inductor (seconds) while this process
    captures and runs the program whose regions it will compile; a running worker returns at once."""
    _first.start()


def _send(msg: dict) -> dict:
    """``msg`` answered by its worker. A C++-wrapper request is sent once no first-kernel request is waiting or being
    answered (then it waits for nothing on that account, and first kernels asked for later are answered while it
    compiles): while the first worker is busy, its compiles have the cores."""
    asked_at = time.time()
    if msg.get("cpp_wrapper"):
        _first.wait_idle()
        return _second.send(msg, asked_at)
    return _first.send(msg, asked_at)


def _start(low_priority: bool = False) -> subprocess.Popen:
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    env["TORCHINDUCTOR_CACHE_DIR"] = cache_dir()  # the worker writes where this process reads
    env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"  # no pool of compile processes under the worker
    # AOTAutograd's cache would hand back a wrapped graph without calling the inner compile that the worker
    # reads Inductor's module from; Inductor's own cache (the kernels) still serves
    env["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "0"
    main = f"from thunderlab.executors.compile_process import serve; serve(low_priority={bool(low_priority)})"
    proc = subprocess.Popen([sys.executable, "-c", main], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, bufsize=1)
    atexit.register(_stop, proc)
    return proc


def _stop(proc: subprocess.Popen) -> None:
    try:
        proc.stdin.close()
        proc.wait(timeout=5)
    except Exception:
        proc.kill()


def load(answer: dict):
    """Inductor's module as the worker wrote it, called as Inductor's wrapper calls it: ``fn(*args) -> outputs``.

    Where the answer names the libraries of the module's kernels (``kernels``) and the functions it calls from
    ``extern_kernels`` (``extern``), the module runs here without the Inductor modules its first lines import
    (``_light_module``); otherwise, or when that fails, it is loaded as Inductor loads it (``run.light`` says which).
    """
    from torch._inductor.utils import align_inputs_from_check_idxs
    from torch.utils._ordered_set import OrderedSet

    mod = None
    if answer.get("kernels") is not None:
        try:
            mod = _light_modules.get(answer["path"]) or _light_module(answer["path"], answer["kernels"],
                                                                      answer.get("extern") or {})
            _light_modules[answer["path"]] = mod
        except Exception:  # noqa: BLE001 - loaded as Inductor loads it, which reports what is wrong
            mod = None
    light = mod is not None
    if mod is None:
        from torch._inductor.codecache import PyCodeCache

        _pick_vec_isa()  # naming the kernels' library needs it: cached for the process, probes remembered
        mod = PyCodeCache.load_by_key_path(answer["key"], answer["path"])
    call = align_inputs_from_check_idxs(mod.call, answer["inputs_to_check"], OrderedSet())
    order = answer["order"]

    def run(*args):
        return call([args[i] for i in order])

    run.gemm = answer.get("gemm")  # the library each linear layer's product runs on, and why (see gemm.py)
    run.recalled = bool(answer.get("recalled"))  # written by an earlier process's worker (see ``_recall``)
    run.light = light
    with open(answer["path"]) as f:
        return run, [f.read()]


# ---- loading a module without Inductor's compile-time imports ----
#
# The first lines of a module Inductor writes for the CPU import its compiler: ``AsyncCompile`` (which builds each
# kernel's library, or finds it in the cache by a key that needs the CPU's vector instruction set),
# ``extern_kernels`` (the namespace of library calls, whose module imports every kernel template) and an alignment
# helper (a module with Inductor's C++ wrapper imports its code cache, which builds or finds the wrapper's library
# the same way): about a second of interpreter time in a process that has not compiled anything. Here that process is
# the caller's, and a training loop running with torch meanwhile waits for the interpreter lock while they import.
# The worker, which has them imported anyway, lists what the module needs instead: the library each kernel's
# source was built into, and each ``extern_kernels`` name as a torch function or operator. This process then runs
# the module's text with those names bound to them, and every other import as written.

_light_modules: dict[str, object] = {}


def _digest(source: str) -> str:
    import hashlib

    return hashlib.sha256(source.encode()).hexdigest()


def _load_kernel(path: str, entry: str = "kernel"):
    """The ``entry`` function of a library Inductor built with Python bindings (``kernel``, or ``inductor_entry_cpp``
    for a C++ wrapper), loaded as Inductor loads it."""
    import importlib.util

    # one name a library: loaded once a process; the name's last part is the one the library initialises itself by
    name = os.path.basename(path).removesuffix(".so") + "." + entry
    mod = sys.modules.get(name)
    if mod is None:
        if not os.path.exists(path):
            raise FileNotFoundError(path)
        # the library reads where tensors keep their data pointer from here when it loads (as Inductor sets it)
        os.environ["_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR"] = str(
            torch._C._dynamo.guards._torchinductor_pyobject_tensor_data_ptr)
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            del sys.modules[name]
            raise
    return getattr(mod, entry)


class _Kernels:
    """``AsyncCompile`` as a module for the CPU uses it: ``cpp_pybinding(argtypes, source)`` is the kernel built
    from ``source``; and ``CppWrapperCodeCache`` as a module with a C++ wrapper uses it: ``load_pybinding(argtypes,
    main_code, ...)`` is the wrapper built from ``main_code``. Given ``libraries`` (source digest -> library path) it
    loads that library; without, it builds or finds the library as Inductor does and lists it in ``built``. Any
    other use fails the light load."""

    def __init__(self, libraries: dict[str, str] | None):
        self.libraries = libraries
        self.built: dict[str, str] = {}

    def cpp_pybinding(self, argtypes, source):
        if self.libraries is not None:
            return _load_kernel(self.libraries[_digest(source)])
        from torch._inductor.codecache import CppPythonBindingsCodeCache

        fn = CppPythonBindingsCodeCache.load_pybinding(argtypes, source)
        self.built[_digest(source)] = fn.__self__.__file__
        return fn

    def wait(self, scope) -> None:  # every kernel was loaded when it was named
        pass

    def load_pybinding(self, argtypes, main_code, **options):
        if self.libraries is not None:
            return _load_kernel(self.libraries[_digest(main_code)], "inductor_entry_cpp")
        from torch._inductor.codecache import CppWrapperCodeCache

        fn = CppWrapperCodeCache.load_pybinding(argtypes, main_code, **options)
        self.built[_digest(main_code)] = fn.__self__.__file__
        return fn


class _ExternKernels:
    """``extern_kernels`` for one module: each name the worker listed is the torch function or operator it
    named; any other is looked up in Inductor's own namespace (importing it)."""

    def __init__(self, names: dict[str, str]):
        for name, qualname in names.items():
            setattr(self, name, _torch_object(qualname))

    def __getattr__(self, name):
        from torch._inductor.select_algorithm import extern_kernels

        return getattr(extern_kernels, name)


def _torch_object(qualname: str):
    """``torch.mm`` or ``torch.ops.mkldnn._linear_pointwise.binary``, from its name."""
    from thunderlab.ops.mapping import torch_attribute

    head, _, path = qualname.partition(".")
    if head != "torch":
        raise ValueError(f"not a torch name: {qualname}")
    obj = torch_attribute(path)
    if obj is None:
        raise AttributeError(f"this torch has no {qualname}")
    return obj


def _extern_qualname(obj) -> str | None:
    """The name ``_torch_object`` finds ``obj`` by, or None (a Python function of Inductor's, say)."""
    from thunderlab.ops.mapping import op_path

    q = op_path(obj)
    if q is None and getattr(torch, getattr(obj, "__name__", "") or "", None) is obj:
        q = "torch." + obj.__name__
    try:
        return q if q is not None and _torch_object(q) is obj else None
    except AttributeError:
        return None


def _light_module(path: str, libraries: dict[str, str] | None, extern: dict[str, str] | None, kernels=None):
    """Run the module Inductor wrote at ``path`` with ``AsyncCompile`` as ``kernels`` (or one loading
    ``libraries``) and, given ``extern``, ``extern_kernels`` and the alignment helper bound without importing
    Inductor's compiler; every other import runs as written."""
    import builtins
    import types

    kernels = kernels or _Kernels(libraries)
    light = {"torch._inductor.async_compile": types.SimpleNamespace(AsyncCompile=lambda: kernels),
             "torch._inductor.codecache": types.SimpleNamespace(CppWrapperCodeCache=kernels)}
    if extern is not None:
        def align(nbytes):  # called only where buffers come from a memory pool
            from torch._inductor.codegen.memory_planning import _align

            return _align(nbytes)

        light["torch._inductor.select_algorithm"] = types.SimpleNamespace(extern_kernels=_ExternKernels(extern))
        light["torch._inductor.codegen.memory_planning"] = types.SimpleNamespace(_align=align)

    def imports(name, globals=None, locals=None, fromlist=(), level=0):
        ns = light.get(name) if level == 0 and fromlist else None
        if ns is not None and all(hasattr(ns, f) for f in fromlist):
            return ns
        return builtins.__import__(name, globals, locals, fromlist, level)

    with open(path) as f:
        code = compile(f.read(), path, "exec")
    mod = types.ModuleType("thunderlab_inductor_" + os.path.basename(path).removesuffix(".py"))
    mod.__file__ = path
    mod.__dict__["__builtins__"] = dict(vars(builtins), __import__=imports)
    exec(code, mod.__dict__)
    return mod


def _light_parts(path: str) -> dict:
    """In the worker: what a caller needs to load the module at ``path`` light (``kernels`` and ``extern``), or
    nothing where some part of it cannot be named (the caller then loads it as Inductor does)."""
    import re

    from torch._inductor.select_algorithm import extern_kernels

    try:
        kernels = _Kernels(None)
        _light_module(path, None, None, kernels)
        with open(path) as f:
            used = sorted(set(re.findall(r"\bextern_kernels\.(\w+)", f.read())))
        extern = {name: _extern_qualname(getattr(extern_kernels, name)) for name in used}
    except Exception:  # noqa: BLE001 - loaded as Inductor loads it
        return {}
    if None in extern.values():
        return {}
    return {"kernels": kernels.built, "extern": extern}


# ---- the worker process ----

def _example(shape, stride, offset, dtype, values=None):
    """An input like the caller's (shape, strides, offset): its ``values`` where sent (a contiguous tensor's), else
    random floats, or zeros (valid indices for most programs)."""
    dt = getattr(torch, dtype)
    if values is not None:  # contiguous: the values from the storage offset on
        flat = torch.zeros(offset + len(values), dtype=dt)
        flat[offset:] = torch.tensor(values, dtype=dt)
        return flat.as_strided(shape, stride, offset)
    size = offset + 1 + sum((n - 1) * s for n, s in zip(shape, stride)) if all(shape) else offset
    flat = torch.randn(size, dtype=dt) if dt.is_floating_point else torch.zeros(size, dtype=dt)
    return flat.as_strided(shape, stride, offset)


def copy_like(a):
    """A copy of ``a`` in its strides and storage offset (a tensor), or ``a`` itself."""
    if not isinstance(a, torch.Tensor):
        return a
    size = a.storage_offset() + 1 + sum((n - 1) * s for n, s in zip(a.shape, a.stride())) if a.numel() else 0
    with torch.no_grad():
        out = torch.empty(size, dtype=a.dtype, device=a.device).as_strided(a.shape, a.stride(), a.storage_offset())
        return out.copy_(a)


def _compile(msg: dict) -> dict:
    from torch._functorch._aot_autograd.schemas import MutationType
    from torch._functorch.aot_autograd import OutputType
    from torch._guards import TracingContext
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner

    from thunderlab.ops.declare import KNOWN_AS
    from thunderlab.ops.mapping import rebuild
    from thunderlab.ops.vjp import custom_plan

    torch.set_num_threads(msg["threads"])  # Inductor's C++ kernels are written for the caller's thread count
    gemm.set_enabled(msg.get("onednn_linear", True))  # as the caller has it (its shapes are timed here)
    g = default_namespace()
    for mod, attrs in msg["symbols"].items():  # each symbol runs its own implementation, as bind(traced=True)
        g[mod] = symbol_module(mod, {a: _resolve(f"{mod}.{a}").impl for a in attrs})
    for qualname, recipe in msg.get("derived", {}).items():
        sym = rebuild(recipe)
        if qualname.isidentifier():  # printed as a bare name, the caller's (torch.ops.<ns>.<op> is found by itself)
            g[qualname] = sym.impl
            KNOWN_AS[qualname] = sym
        if "op" in recipe:  # a custom operator's derivative, looked up now: TorchDynamo inlines only its use
            custom_plan(qualname)
    for name, graph in msg.get("graphs", {}).items():
        g[name] = _graph_callable(graph)
    exec(compile_program(msg["source"], msg["name"]), g)
    fn = g[msg["name"]]
    names = list(fn.__code__.co_varnames[:fn.__code__.co_argcount])
    values = msg.get("values", {})
    args = [_example(*spec, values=values.get(str(n))) for n, spec in enumerate(msg["inputs"])]
    captured, why = [], []

    def inner(gm, example_inputs, **kwargs):
        out = compile_fx_inner(gm, example_inputs, **kwargs)
        meta = TracingContext.get().fw_metadata
        # a write Inductor's module makes itself (AOTAutograd keeps an inference graph's writes of its inputs in
        # the graph: batch norm's running statistics) is the module's; one left to AOTAutograd's wrapper is not
        if any(i.mutates_metadata or (i.mutates_data and i.mutation_type is not MutationType.MUTATED_IN_GRAPH)
               for i in meta.input_info):
            why.append("the region writes to an input outside Inductor's module")
        # an output that is an input, or a view of one, comes back from Inductor's module as that view (the
        # values and strides are checked below); a view of an intermediate would need AOTAutograd's regeneration
        plain = (OutputType.non_alias, OutputType.alias_of_input, OutputType.is_input)
        if any(o.output_type not in plain for o in meta.output_info) or meta.num_intermediate_bases:
            why.append("an output of the region is a view of a value made inside it")
        if getattr(out, "constants", None):
            why.append("Inductor's module keeps constants")
        captured.append(out)
        return out

    def backend(gm, example_inputs):
        sources = [getattr(getattr(n.meta.get("grapharg"), "source", None), "local_name", None)
                   for n in gm.graph.find_nodes(op="placeholder")]
        compiled = compile_fx(gm, example_inputs, inner_compile=inner,  # as inductor.compile_region
                              config_patches={"cpp.enable_kernel_profile": True, **gemm.config_patches(),
                                              **({"cpp_wrapper": True} if msg.get("cpp_wrapper") else {})})
        captured.append(sources)
        return compiled

    guarded = torch.compile(fn, backend=backend, fullgraph=True, dynamic=False)
    fresh = [copy_like(a) for a in args]  # for the module's own call below: the region may write its inputs
    with torch.no_grad(), gemm.collecting() as products:
        expected = guarded(*args)
    if len(captured) != 2:
        return {"ok": False, "reason": "TorchDynamo captured the region as more than one graph"}
    graph, sources = captured
    if why:
        return {"ok": False, "reason": why[0]}
    # each input here is a tensor of its own, so TorchDynamo merged none; one it left out is one the region never
    # reads (a custom operator's backward given the forward's output it ignores): the module is called without it
    if len(set(sources)) != len(sources) or not set(sources) <= set(names):
        return {"ok": False, "reason": "TorchDynamo renamed or repeated inputs of the region"}
    path = graph.write_to_disk() if hasattr(graph, "write_to_disk") else None
    if path is None or not os.path.exists(path):
        return {"ok": False, "reason": "Inductor wrote no module for the region"}
    answer = {"ok": True, "key": os.path.basename(path).removesuffix(".py"), "path": path,
              "order": [names.index(s) for s in sources], "inputs_to_check": list(graph.inputs_to_check),
              "gemm": gemm.remembered([getattr(graph, "source_code", None)], products)}
    answer.update(_light_parts(path))
    # the module, loaded and called as the caller will, gives what the region gives
    run, _ = load(answer)
    if answer.get("kernels") is not None and not run.light:  # its light load failed here: it would there too
        answer.pop("kernels")
        answer.pop("extern", None)
    with torch.no_grad():
        got = run(*fresh)
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    # the inputs as each call left them: the writes compared with the outputs
    got, expected = (*got, *fresh), (*expected, *args)
    if len(got) != len(expected) or not all(
            isinstance(a, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype and a.stride() == b.stride()
            and a.storage_offset() == b.storage_offset() and torch.equal(a.isnan(), b.isnan())
            and torch.equal(a.nan_to_num(), b.nan_to_num()) for a, b in zip(got, expected)):
        return {"ok": False, "reason": "Inductor's module returns other values than the region"}
    return answer


def _pick_vec_isa() -> None:
    """Inductor's choice of the CPU's vector instruction set, cached for the process.

    Inductor builds a probe library for each set the CPU reports and loads it in a child process (a second or more
    per process). Where an earlier process's probes found every set the CPU reports working (kept beside the
    worker's answers, under the same identity: torch, the environment, the CPU's flags), the sets are taken as
    reported (Inductor's ``cpp.vec_isa_ok``: each set's extra features, bf16 or VNNI, are still probed)."""
    try:
        import platform

        from torch._inductor import config
        from torch._inductor import cpu_vec_isa as isa

        if platform.machine() not in ("x86_64", "AMD64") or config.cpp.vec_isa_ok is not None or \
                not answers_enabled() or isa.valid_vec_isa_list.cache_info().currsize:
            isa.pick_vec_isa()
            return
        flags = isa.x86_isa_checker()
        reported = [str(v) for v in isa.supported_vec_isa_list if all(f in flags for f in str(v).split())]
        path = os.path.join(_answers_dir(), f"vec_isa-{code_identity()[:24]}.json")
        try:
            with open(path) as f:
                known = json.load(f)
        except (OSError, ValueError):
            known = None
        if known == reported:
            with config.patch({"cpp.vec_isa_ok": True}):
                isa.valid_vec_isa_list()  # cached for the process, as a probe would have left it
        isa.pick_vec_isa()
        if known != reported and [str(v) for v in isa.valid_vec_isa_list()] == reported:
            _write_json(path, reported)  # every set the CPU reports passed its probe
    except Exception:  # noqa: S110  (only a head start: the first compile or load picks it and reports what fails)
        pass


def serve(low_priority: bool = False) -> None:
    """The worker's loop: one request a line in, one answer a line out, until the input closes. ``low_priority``:
    the process (and the C++ compiler processes it starts, which inherit it) runs at the lowest CPU priority, where
    the system has one (``os.nice``): its compiles take no core from the caller's kernels, nor from the first
    worker's compiles."""
    if low_priority:
        try:
            os.nice(19)
        except (AttributeError, OSError):  # no priorities here: compiled at the caller's
            pass
    out = sys.stdout
    sys.stdout = sys.stderr  # anything a compile prints must not corrupt the answers
    # the vector instruction set's probes (child processes: mostly waiting) overlap the rest of the imports; what
    # they import is imported here first, so that the two threads never import one module at once
    import torch._inductor.codecache  # noqa: F401
    import torch._inductor.cpp_builder  # noqa: F401
    import torch._inductor.cpu_vec_isa  # noqa: F401
    import torch.utils._filelock  # noqa: F401

    threading.Thread(target=_pick_vec_isa, daemon=True).start()
    import torch._inductor.compile_fx  # noqa: F401  (before the first request comes)

    import thunderlab.ops  # noqa: F401
    imported_at, imported_cpu_s = time.time(), time.process_time()
    for line in sys.stdin:
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            answer = _compile(json.loads(line))
        except Exception as e:
            answer = {"ok": False, "reason": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
        answer.update(imported_at=imported_at, imported_cpu_s=imported_cpu_s, compile_s=time.perf_counter() - t0,
                      compile_cpu_s=time.process_time() - c0)
        try:
            out.write(json.dumps(answer) + "\n")
            out.flush()
        except BrokenPipeError:  # the process that asked has ended
            return
