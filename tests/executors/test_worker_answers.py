"""The compile worker's answers kept on disk (README, "Fusion, timings and the tiered start": a second process
starts warm).

A tiered region's kernel is compiled by a worker process; its answer (which module Inductor wrote, how to call
it) is kept beside Inductor's cache. A later process making the same request loads that module without starting
a worker, and a request that differs in anything that decides the module (the program, its inputs' layout,
thunderlab's code, torch, the environment) goes to a worker as before. Each process here is a fresh one, sharing
a cache folder of its own.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from thunderlab.executors import compile_process
from thunderlab.executors.base import get_executor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.skipif(not get_executor("inductor").available()[0], reason="no C++ compiler for Inductor")

PROGRAM = """
import json, sys, torch, thunderlab
from thunderlab.executors import compile_process
from thunderlab.executors.inductor import RECALLED

def f(x, w):
    return torch.nn.functional.gelu(x @ w).softmax(-1) * 2

n = int(sys.argv[1])
torch.manual_seed(n)
x, w = torch.randn(n, 8), torch.randn(8, 8)
jfn = thunderlab.jit(f)  # tiered, the default pipeline and executors
got = [jfn(x, w)]
live = thunderlab.session(thunderlab.last_record(jfn))
assert live.wait(600)
got += [jfn(x, w) for _ in range(12)]  # the kernel's calls, the race's included
for g in got:
    torch.testing.assert_close(g, f(x, w))
tl = compile_process.timeline()
print(json.dumps({"regions": {k: [r.version, r.compiled_in] for k, r in live.regions.items()},
                  "light": [r.fn.light for r in live.regions.values()],
                  "compiler_imported": "torch._inductor.select_algorithm" in sys.modules,
                  "requests": [q["region"] for q in tl["requests"] if q["ok"]],
                  "recalled": [q["region"] for q in tl["recalled"]],
                  "worker_started": tl["spawned_at"] is not None, "recalled_text": RECALLED}))
"""


def _run(cache: str, n: int, answers: str = "1") -> dict:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache, THUNDERLAB_WORKER_ANSWERS=answers,
               THUNDERLAB_EXECUTORS="inductor+torch",
               PYTHONPATH=os.pathsep.join([ROOT, *filter(None, [os.environ.get("PYTHONPATH")])]))
    proc = subprocess.run([sys.executable, "-c", PROGRAM, str(n)], env=env, capture_output=True, text=True,
                          timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def in_new_processes(program: str, times: int, **env) -> list[dict]:
    """``program`` run ``times`` times, each in a new process with ``env`` added to this one's: the JSON object each
    printed last."""
    env = dict(os.environ, **env, PYTHONPATH=os.pathsep.join([ROOT, *filter(None, [os.environ.get("PYTHONPATH")])]))
    out = []
    for _ in range(times):
        proc = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=600,
                              cwd=ROOT)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return out


def test_a_second_process_loads_the_module_an_earlier_worker_wrote(tmp_path):
    cache = str(tmp_path / "inductor")
    first = _run(cache, 6)
    assert first["regions"] and all(v == ["inductor", "worker process"] for v in first["regions"].values()), first
    assert set(first["requests"]) == set(first["regions"]) and first["recalled"] == []

    second = _run(cache, 6)  # the same program on inputs of the same layout, in a new process
    assert all(v == ["inductor", second["recalled_text"]] for v in second["regions"].values()), second
    assert set(second["recalled"]) == set(second["regions"])
    assert second["requests"] == [] and not second["worker_started"], second
    # loaded without Inductor's compiler: its kernel templates are never imported in this process
    assert all(second["light"]) and not second["compiler_imported"], second

    other = _run(cache, 5)  # another shape: another module, from a worker
    assert all(v == ["inductor", "worker process"] for v in other["regions"].values()), other
    assert other["recalled"] == [] and set(other["requests"]) == set(other["regions"])

    off = _run(cache, 6, answers="0")  # recalling switched off: the worker is asked
    assert off["recalled"] == [] and set(off["requests"]) == set(off["regions"]), off


def test_a_module_whose_kernel_library_is_gone_is_loaded_as_inductor_loads_it(tmp_path):
    """The light load needs each kernel's library where the worker left it; without one the module is loaded by
    Inductor, which builds the library again, and the region still switches and gives eager's values (checked
    in the program)."""
    cache = str(tmp_path / "inductor")
    first = _run(cache, 7)
    assert all(first["light"]), first
    answers = [os.path.join(cache, "thunderlab_worker", n) for n in os.listdir(os.path.join(cache, "thunderlab_worker"))
               if n.endswith(".json") and not n.startswith("vec_isa")]
    libraries = [p for a in answers for p in json.load(open(a)).get("kernels", {}).values()]
    assert libraries
    for p in libraries:
        os.remove(p)
    second = _run(cache, 7)
    assert all(v[0] == "inductor" for v in second["regions"].values()), second
    assert second["compiler_imported"], second  # Inductor loaded the module (and built its libraries again)


def test_an_entry_whose_module_is_gone_is_dropped_and_asked_again(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("THUNDERLAB_WORKER_ANSWERS", "1")
    msg = {"name": "inductor0", "source": "def inductor0(x):\n  return x\n", "symbols": {}, "inputs": [[[2], [1], 0,
           "float32"]], "threads": 1, "onednn_linear": True}
    assert compile_process._recall(msg) is None  # nothing kept yet
    compile_process._remember(msg, {"ok": True, "key": "gone", "path": str(tmp_path / "gone.py"), "order": [0],
                                    "inputs_to_check": [], "gemm": None})
    path = compile_process._answer_path(msg)
    assert os.path.exists(path)
    assert compile_process._recall(msg) is None  # its module is not on disk: the worker must compile it
    assert not os.path.exists(path)


def test_answers_are_not_recalled_when_switched_off(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("THUNDERLAB_WORKER_ANSWERS", "0")
    msg = {"name": "inductor0", "source": "x", "symbols": {}, "inputs": [], "threads": 1, "onednn_linear": True}
    compile_process._remember(msg, {"ok": True, "key": "k", "path": __file__, "order": [], "inputs_to_check": []})
    assert not os.path.exists(compile_process._answer_path(msg))
    assert compile_process._recall(msg) is None


VEC_ISA = """
import json, sys
import torch
from torch._inductor import cpu_vec_isa
from thunderlab.executors import compile_process

probes = []
real = cpu_vec_isa.VecISA.check_build
# the probe of each set itself (the sets' own extra features, bf16 or VNNI, are probed in every process)
cpu_vec_isa.VecISA.check_build = lambda self, code: (code == cpu_vec_isa.VecISA._avx_code and probes.append(str(self))
                                                     or real(self, code))
compile_process._pick_vec_isa()
print(json.dumps({"probes": probes, "picked": str(cpu_vec_isa.pick_vec_isa()),
                  "valid": [str(v) for v in cpu_vec_isa.valid_vec_isa_list()]}))
"""


def test_the_vector_instruction_probe_is_remembered(tmp_path):
    """Inductor probes each vector instruction set the CPU reports by building and loading a library in a child
    process, once per process (a second or more); a later process takes an earlier one's finding where every
    reported set passed (Inductor's ``cpp.vec_isa_ok``), and picks the same set."""
    first, second = in_new_processes(VEC_ISA, 2, TORCHINDUCTOR_CACHE_DIR=str(tmp_path), THUNDERLAB_WORKER_ANSWERS="1")
    assert second["picked"] == first["picked"] and second["valid"] == first["valid"]
    if first["probes"] and sorted(first["probes"]) == sorted(first["valid"]):  # every reported set passed
        assert second["probes"] == [], second
    else:  # a set failed its probe (or none was probed): nothing is taken on trust
        assert second["probes"] == first["probes"]



def test_each_library_call_of_inductor_is_named_so_that_it_is_found_again():
    """``extern_kernels`` names (Inductor's module calls ``extern_kernels.mm``...) are sent as torch names; a
    Python function of Inductor's own has none (its module is then loaded as Inductor loads it)."""
    import torch
    import torch._inductor.lowering  # noqa: F401  (registers Inductor's library calls)
    from torch._inductor.select_algorithm import extern_kernels

    found = {n: compile_process._extern_qualname(v) for n, v in vars(extern_kernels).items()}
    for name, qualname in found.items():
        if qualname is not None:
            assert compile_process._torch_object(qualname) is getattr(extern_kernels, name), name
    assert found["mm"] == "torch.mm" and found["addmm"] == "torch.addmm" and found["bmm"] == "torch.bmm"
    assert found["bias_addmm"] is None  # torch._inductor.kernel.mm's own function
    assert compile_process._torch_object("torch.ops.aten.mm.out") is torch.ops.aten.mm.out
    with pytest.raises(ValueError, match="not a torch name"):
        compile_process._torch_object("os.system")
