"""The command line: ``thunderlab demo``, ``thunderlab report`` and ``thunderlab passes``.

Every mistake a user can make ends in one line on stderr and a non-zero exit code; ``--debug``
shows the traceback behind it as well.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
import traceback


class UsageError(Exception):
    """A mistake in what the user asked for; the CLI prints its message as one line (exit code 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line (its default prints the usage block first)."""

    def error(self, message):
        print(f"{self.prog}: {message}; see '{self.prog} --help'", file=sys.stderr)
        sys.exit(2)


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more seconds, got {text!r}")
    return value


def demo(args) -> int:
    """Compile a built-in model, print the pass table and final program, then watch its regions switch to fused
    kernels."""
    import torch

    import thunderlab
    from thunderlab.examples import EXAMPLES
    from thunderlab.runtime.compiled import CompileError

    model, inputs = EXAMPLES[args.example]()
    print(f"thunderlab demo: {args.example} ({type(model).__name__}), pipeline {args.pipeline!r}", flush=True)
    jfn = thunderlab.jit(model, pipeline=args.pipeline, verify=True, timing=True)
    t0 = time.perf_counter()
    with torch.no_grad():
        try:
            out = jfn(*inputs)
        except CompileError as e:  # a pass refused the pipeline (claim{executors=nvfuser} without a GPU)
            print()
            print(e.record.table())
            raise UsageError(f"compilation failed: {e}") from e
        ref = model(*inputs)
    first = time.perf_counter() - t0
    rec = thunderlab.last_record(jfn)
    print()
    print(rec.table())
    print()
    if rec.error:
        raise UsageError(f"compilation failed: {rec.error}")
    err = (getattr(out, "logits", out) - getattr(ref, "logits", ref)).abs().max().item()
    print(
        f"first call {first * 1e3:.0f} ms (TorchDynamo capture plus {rec.compile_seconds * 1e3:.1f} ms in thunderlab); "
        f"max |thunderlab - eager| = {err:.3g}"
    )
    print()
    print(rec.steps[-1].python())
    if rec.regions:
        _watch_regions(jfn, rec, inputs, args.wait)
    if args.out:
        rec.to_html(args.out)
        print(f"\nHTML report of every step: {os.path.abspath(args.out)}")
    return 0


def _watch_regions(jfn, rec, inputs, wait: float) -> None:
    """Keep calling while fused kernels compile in the background; report the switch and the timings."""
    import torch

    import thunderlab

    names = ", ".join(rec.regions)
    print(f"regions {names} ran with torch on the first call; their kernels compile in the background...", flush=True)
    t0 = time.perf_counter()
    live = thunderlab.session(rec)
    with torch.no_grad():
        while not live.wait(0) and time.perf_counter() - t0 < wait:
            jfn(*inputs)
            time.sleep(0.05)
        for _ in range(20):
            jfn(*inputs)
    live.refresh()  # the record's snapshot of its regions, for the table below and the report
    for name, r in rec.timings().items():
        switched = [t for t, v in r["history"] if v == r["executor"]]
        when = f"switched to {r['executor']} after {switched[0] - r['history'][0][0]:.1f} s" if switched else \
            f"still on torch ({r['error'] or 'compiling'})"
        parts = [f"{v}: {s['count']} calls, median {s['median_s'] * 1e3:.2f} ms" for v, s in r["timings"].items()]
        print(f"  {name}: {when}; " + "; ".join(parts))


def load_target(target: str):
    """``FILE.py:NAME`` -> (callable, example inputs), by the report convention (see ``report``)."""
    import torch

    path, sep, name = target.rpartition(":")
    if not sep or not path.endswith(".py") or not name:
        raise UsageError(f"expected FILE.py:FUNCTION, got {target!r}")
    if not os.path.isfile(path):
        raise UsageError(f"no file {path!r}" + (" (it is a directory)" if os.path.isdir(path) else ""))
    spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the user's file: say where it failed, not a traceback of ours
        raise UsageError(
            f"{path} raised {type(e).__name__} while loading{_where(e, path)}: {e}"
        ) from e
    finally:
        sys.path.pop(0)
    if not hasattr(module, name):
        found = sorted(k for k, v in vars(module).items() if callable(v) and not k.startswith("_")
                       and getattr(v, "__module__", None) == module.__name__)
        raise UsageError(
            f"{path} has no {name!r}; it defines {', '.join(found) or 'nothing callable'}"
        )
    fn = getattr(module, name)
    if isinstance(fn, type) and issubclass(fn, torch.nn.Module):
        try:
            fn = fn()
        except Exception as e:
            raise UsageError(
                f"{path}:{name} is an nn.Module class that cannot be built with no arguments "
                f"({type(e).__name__}: {_first_line(e)}); build one in the file (model = {name}(...)) and name that"
            ) from e
    elif not callable(fn) or isinstance(fn, type):
        what = "a class that is not an nn.Module" if isinstance(fn, type) else f"{_article(fn)} {type(fn).__name__}"
        raise UsageError(f"{path}:{name} is {what}, not something to compile; "
                         f"expected a function, an nn.Module, or an nn.Module class built with no arguments")
    maker = getattr(module, f"{name}_inputs", None) or getattr(module, "example_inputs", None)
    if maker is None:
        raise UsageError(f"{path} must define {name}_inputs() or example_inputs() "
                         f"returning the arguments to call {name} with")
    try:
        inputs = maker()
    except Exception as e:
        raise UsageError(f"{maker.__name__}() in {path} raised {type(e).__name__}"
                         f"{_where(e, path)}: {e}") from e
    if not isinstance(inputs, (tuple, list)):
        inputs = (inputs,)
    return fn, tuple(inputs)


def _where(e: BaseException, path: str) -> str:
    """' (FILE:LINE)' for the deepest frame of ``e`` in the user's file, or the syntax error's line."""
    if isinstance(e, SyntaxError) and e.lineno:
        return f" ({os.path.basename(path)}:{e.lineno})"
    tb, line = e.__traceback__, None
    while tb is not None:
        if os.path.abspath(tb.tb_frame.f_code.co_filename) == os.path.abspath(path):
            line = tb.tb_lineno
        tb = tb.tb_next
    return f" ({os.path.basename(path)}:{line})" if line else ""


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else ""


def _article(value) -> str:
    return "an" if type(value).__name__[:1].lower() in "aeiou" else "a"


def _found(out, inputs) -> str:
    """What a function that gave TorchDynamo nothing to compile returned, in a few words."""
    if any(out is a for a in inputs):
        return "it returned its input unchanged"
    if out is None:
        return "it returned None"
    text = repr(out)
    return f"it returned {_article(out)} {type(out).__name__}, {text if len(text) <= 40 else text[:37] + '...'}"


def _call_failed(target: str, fn, inputs, e: Exception) -> str:
    """One line for a call that raised: eager's own error when the function fails without thunderlab too."""
    path = target.rpartition(":")[0]
    try:
        fn(*inputs)
    except Exception as eager:  # the user's function itself fails on these inputs
        first = str(eager).strip().splitlines()[0] if str(eager).strip() else ""
        return (f"{target} raised {type(eager).__name__} on its example inputs"
                f"{_where(eager, path)}: {first}")
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return (f"compiling {target} failed where eager runs ({type(e).__name__}: {first}); "
            f"TORCH_LOGS=+dynamo shows TorchDynamo's side")


def report(args) -> int:
    """Compile FILE.py:FUNCTION on its example inputs and write the HTML report of every step.

    The file defines FUNCTION (a function, an nn.Module, or an nn.Module class made with no
    arguments) and ``FUNCTION_inputs()`` or ``example_inputs()``, which returns the arguments.

    ``thunderlab report DIR`` writes one offline site over the record files in DIR (as
    THUNDERLAB_RECORDS=DIR leaves them): DIR/report/index.html, or the folder --out names.
    ``thunderlab report FILE.thunderlab.json`` writes the report of one saved record.
    """
    if os.path.isdir(args.target):
        return _report_folder(args)
    if args.target.endswith(".thunderlab.json"):
        return _report_file(args)
    import thunderlab
    from thunderlab.runtime.compiled import CompileError

    fn, inputs = load_target(args.target)
    # errors are reported below in one line; TORCH_LOGS=... (or --debug) shows torch's own logs
    if "TORCH_LOGS" not in os.environ and not args.debug:
        import logging

        import torch

        torch._logging.set_logs(all=logging.CRITICAL)
    jfn = thunderlab.jit(fn, pipeline=args.pipeline, verify=not args.no_verify, tiered=False)
    status = 0
    try:
        out = jfn(*inputs)
    except CompileError as e:
        print(f"thunderlab report: compilation failed: {e}; the report shows every step up to it", file=sys.stderr)
        status = 1
    except Exception as e:
        raise UsageError(_call_failed(args.target, fn, inputs, e)) from e
    else:
        if not jfn.records:  # TorchDynamo hands over a graph only where the function computes with tensors
            raise UsageError(
                f"{args.target} gave TorchDynamo no tensor operation to compile ({_found(out, inputs)}); "
                f"expected a function or nn.Module that computes with tensors, e.g. return x * 2"
            )
    rec = thunderlab.last_record(jfn)
    print(rec.table())
    out = args.out if args.out is not None else "report.html"
    rec.to_html(out)
    print(f"HTML report: {os.path.abspath(out)}")
    if args.json:
        rec.to_json(args.json)
        print(f"JSON payload: {os.path.abspath(args.json)}")
    return status


def _report_folder(args) -> int:
    from thunderlab.inspect.site import write_site

    out = args.out if args.out is not None else os.path.join(args.target, "report")
    site = write_site(args.target, out)
    for name, why in site.failed.items():
        print(f"skipped {name}: {why}", file=sys.stderr)
    print(f"{len(site.pages)} records; site: {os.path.abspath(site.index)}")
    return 1 if site.failed else 0


def _report_file(args) -> int:
    import thunderlab

    try:
        rec = thunderlab.load(args.target)
    except thunderlab.RecordFileError as e:
        raise SystemExit(f"thunderlab report: {e}") from None
    print(rec.table())
    out = args.out if args.out is not None else "report.html"
    rec.to_html(out)
    print(f"HTML report: {os.path.abspath(out)}")
    return 0


def passes(args) -> int:
    """List the registered passes with their summaries and options."""
    from thunderlab.passes import REGISTRY

    if args.json:
        print(json.dumps([{"name": n, "summary": REGISTRY[n].summary(),
                           "options": {k: {"type": t, "default": repr(d)}
                                       for k, (t, d) in REGISTRY[n].options().items()},
                           "requires": list(getattr(REGISTRY[n], "requires", ())),
                           "last": bool(getattr(REGISTRY[n], "last", False))}
                          for n in sorted(REGISTRY)], indent=2))
        return 0
    width = max(map(len, REGISTRY), default=0)
    for name in sorted(REGISTRY):
        cls = REGISTRY[name]
        opts = ", ".join(f"{k}: {t} = {d!r}" for k, (t, d) in cls.options().items())
        print(f"{name:<{width}} {cls.summary()}")
        if opts:
            print(f"{'':<{width}} options: {opts}")
    return 0


def main(argv=None) -> int:
    from thunderlab.passes import DEFAULT_PIPELINE

    parser = _Parser(
        prog="thunderlab", description="A tracing compiler for PyTorch whose every pass is an inspectable step."
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", help="on an error, show the traceback behind its one line")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="compile a built-in model and show every pass", parents=[common])
    p.add_argument("--example", default="nanogpt_block", choices=["mlp", "nanogpt_block", "llama_block", "cnn", "gpt2"])
    p.add_argument("--pipeline", default=DEFAULT_PIPELINE, help=f"pass pipeline (default {DEFAULT_PIPELINE!r})")
    p.add_argument(
        "--wait", type=_non_negative, default=120.0, help="seconds to wait for fused kernels to compile (default 120)"
    )
    p.add_argument("--out", default="thunderlab-demo.html", help="where to write the HTML report ('' for none)")
    p.set_defaults(fn=demo)
    p = sub.add_parser("report", help="compile FILE.py:FUNCTION on its example inputs and write an HTML report; "
                                      "or a site over a folder of saved records",
                       description=report.__doc__, parents=[common],
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", help="FILE.py:FUNCTION, a folder of *.thunderlab.json records, or one such file")
    p.add_argument("--out", default=None, help="the HTML file to write (default report.html); for a folder, the "
                                               "site's folder (default DIR/report)")
    p.add_argument("--json", default=None, help="also write the JSON payload (thunderlab.record/v1) here")
    p.add_argument("--pipeline", default=DEFAULT_PIPELINE, help=f"pass pipeline (default {DEFAULT_PIPELINE!r})")
    p.add_argument("--no-verify", action="store_true", help="skip checking every step against eager")
    p.set_defaults(fn=report)
    p = sub.add_parser("passes", help="list the registered passes", parents=[common])
    p.add_argument("--json", action="store_true", help="print the registry as JSON")
    p.set_defaults(fn=passes)
    args = parser.parse_args(argv)
    from thunderlab.passes.base import PipelineError

    where = f"thunderlab {args.command}"
    try:
        return args.fn(args)
    except KeyboardInterrupt:
        print(f"{where}: interrupted", file=sys.stderr)
        return 130
    except (UsageError, PipelineError, OSError) as e:  # the user's mistake: what to fix, in one line
        if args.debug:
            traceback.print_exception(e)
        print(f"{where}: {_first_line(e)}", file=sys.stderr)
        return 2
    except Exception as e:  # thunderlab's own failure: still one line, the traceback on request
        if args.debug:
            traceback.print_exception(e)
        print(f"{where}: internal error, {type(e).__name__}: {_first_line(e)}"
              f"{'' if args.debug else '; rerun with --debug for the traceback'}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
