"""Captures kept on disk (thunderlab.frontend.captures): a later process runs a jitted function's first call with no
TorchDynamo capture, and uses a kept capture only where TorchDynamo's own guards would have let it run.

Each case runs real processes one after another on one cache folder, as a script run twice does; every result is
compared with eager PyTorch in the same process.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MODEL = """
import torch
import torch.nn.functional as F

import helpers
from helpers import shift

ACT = F.gelu


class Net(torch.nn.Module):
    BIAS = 0.0  # a class attribute, read through the instance

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.scale = 2.0

    def forward(self, x):
        return shift(ACT(self.fc(x)) * self.scale) + self.BIAS + helpers.OFFSET


def broken(x):
    y = torch.sin(x)
    if y.sum() > 0:  # a graph break: a branch on a tensor's value
        return y * 2
    return y - 1
"""

HELPERS = """
OFFSET = 0.0


def shift(x):
    return x - 0.5
"""

# one process: the steps named on the command line, each compared with eager; prints what happened as JSON
RUNNER = """
import json, os, sys
import torch
sys.path.insert(0, os.environ["MODEL_DIR"])
import thunderlab
import model as m

report = {}


def check(jitted, fn, *args):
    out = jitted(*args)
    ref = fn(*args)
    assert torch.allclose(out, ref, atol=1e-6), (out, ref)
    return out


for step in sys.argv[1:]:
    torch.manual_seed(0)
    net = m.Net()
    x = torch.randn(4, 8)
    if step == "scale3":
        net.scale = 3.0
    if step == "relu":
        m.ACT = torch.relu
    if step == "shape":
        x = torch.randn(5, 8)
    if step == "classattr":  # set at run time, not in the source: another process's class does not have it
        m.Net.BIAS = 7.0
    if step == "modattr":
        m.helpers.OFFSET = 3.0
    j = thunderlab.jit(net)
    if step == "nograd":
        with torch.no_grad():
            check(j, net, x)
    elif step == "broken":
        j = thunderlab.jit(m.broken)
        check(j, m.broken, x)
    else:
        out = check(j, net, x)
        if step in ("plain", "again"):
            out.sum().backward()
            grads = [p.grad.clone() for p in net.parameters()]
            net.zero_grad()
            net(x).sum().backward()
            assert all(torch.allclose(a, p.grad, atol=1e-6) for a, p in zip(grads, net.parameters()))
    if step == "patched":  # after a kept capture ran: the name it read now reads another function
        m.ACT = torch.tanh
        check(j, net, x)
    info = j.cache_info
    capture = thunderlab.last_record(j).steps[0].notes
    report[step] = {"loaded": info["captures_loaded"], "kept": info["captures_kept"], "graphs": info["graphs"],
                    "why_not": j.direct.kept.why_not if j.direct.kept is not None else "store off",
                    "notes": [str(r.steps[0].notes) for r in j.records], "first": str(capture)}
print("REPORT " + json.dumps(report))
"""


@pytest.fixture
def folders(tmp_path):
    model_dir = tmp_path / "src"
    model_dir.mkdir()
    (model_dir / "model.py").write_text(textwrap.dedent(MODEL))
    (model_dir / "helpers.py").write_text(textwrap.dedent(HELPERS))
    (tmp_path / "runner.py").write_text(RUNNER)
    return tmp_path


def run(folders, *steps, **env):
    environ = {**os.environ, "MODEL_DIR": str(folders / "src"), "PYTHONPATH": ROOT,
               "TORCHINDUCTOR_CACHE_DIR": str(folders / "cache"), "THUNDERLAB_CAPTURES": "1", **env}
    p = subprocess.run([sys.executable, str(folders / "runner.py"), *steps], env=environ, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    line = next(line for line in p.stdout.splitlines() if line.startswith("REPORT "))
    return json.loads(line[len("REPORT "):])


def test_a_second_process_runs_the_kept_capture_without_torchdynamo(folders):
    first = run(folders, "plain")["plain"]
    assert first["kept"] == 1 and first["loaded"] == 0, first
    assert "loaded from the capture kept" not in first["first"]
    second = run(folders, "plain", "again")
    for report in second.values():  # the second jit of the same module class loads it too
        assert report["loaded"] == 1 and report["graphs"] == 1, report
        assert "loaded from the capture kept" in report["first"] and "TorchDynamo did not run" in report["first"]


def test_a_kept_capture_is_not_used_where_its_guards_fail(folders):
    run(folders, "plain")
    got = run(folders, "scale3", "nograd", "shape")
    # another attribute value fails a guard of the loaded capture: TorchDynamo captures the call
    assert got["scale3"]["loaded"] == 1 and got["scale3"]["graphs"] == 2, got["scale3"]
    for step in ("scale3", "nograd", "shape"):  # each result was checked against eager in its process
        assert "loaded from" not in got[step]["first"], got[step]


def test_a_global_that_reads_another_function_is_seen_when_loading_and_after(folders):
    run(folders, "plain")
    got = run(folders, "relu", "patched")
    assert got["relu"]["loaded"] == 0 and "G['ACT'] is not the object" in got["relu"]["why_not"], got["relu"]
    # loaded, ran, then the global changed: the next call is TorchDynamo's new capture, equal to eager's tanh
    patched = got["patched"]
    assert patched["loaded"] == 1 and patched["graphs"] == 2, patched
    assert "loaded from" not in patched["first"]


@pytest.mark.parametrize("change", ["classattr", "modattr"])
def test_a_value_set_at_run_time_on_a_class_or_module_is_not_taken_for_todays(change, folders):
    """TorchDynamo rebuilds a kept guard's expected value from what it kept, where a class or a module is kept by
    name: a value the capturing process set on one at run time would be read from today's class or module, and the
    guard would pass on a graph made for the other value."""
    assert run(folders, change)[change]["kept"] == 1
    got = run(folders, "plain")["plain"]
    assert got["loaded"] == 0 and "when captured" in got["why_not"], got
    assert ("7.0" if change == "classattr" else "3.0") in got["why_not"]


def test_an_edited_source_file_is_captured_anew(folders):
    run(folders, "plain")
    path = folders / "src" / "helpers.py"  # a function the jitted forward calls, in a file of its own
    path.write_text(path.read_text().replace("x - 0.5", "x + 0.5"))
    got = run(folders, "plain")["plain"]
    assert got["loaded"] == 0 and "changed since it was captured" in got["why_not"], got
    assert got["kept"] == 1  # the new capture is kept in its place


def test_a_graph_break_is_not_kept_and_the_switch_turns_keeping_off(folders):
    got = run(folders, "broken")["broken"]
    assert got["kept"] == 0 and "graph break" in got["why_not"], got
    again = run(folders, "broken")["broken"]  # the file says so: the next process does not serialize its guards
    assert "an earlier process could not keep" in again["why_not"] and "graph break" in again["why_not"], again
    kept = folders / "cache" / "thunderlab_captures"
    before = sorted(p.name for p in kept.iterdir())
    off = run(folders, "plain", THUNDERLAB_CAPTURES="0")["plain"]
    assert off["kept"] == 0 and off["why_not"] == "store off"
    assert sorted(p.name for p in kept.iterdir()) == before  # nothing kept for the module


ZOO = """
import json, os, sys
import torch
import thunderlab
from thunderlab import examples
sys.path.insert(0, os.path.join(os.environ["ROOT"], "tests", "training"))
from test_loops import TinyGPT

torch.set_num_threads(1)
report = {}
for name in sys.argv[1:]:
    torch.manual_seed(0)
    if name == "gpt2":
        model = examples.gpt2_from_config()
        ids = torch.randint(0, 100, (2, 16))
        call = lambda f: f(ids, labels=ids).loss
    elif name == "llama":
        model = examples.LlamaBlock(64, 4)
        x = torch.randn(2, 16, 64)
        call = lambda f: f(x).sum()
    elif name == "hf_llama":  # transformers' LlamaForCausalLM: its rotary function is a `kernels` function module
        sys.path.insert(0, os.environ["ROOT"])
        from tests.zoo.models import BY_NAME, attn_implementations, inputs, pair

        entry = BY_NAME["llama"]
        model = pair(entry, attn_implementations(entry)[-1])[0].train()
        batch = inputs(entry, model, batch=2, length=16)
        call = lambda f: f(**batch).loss
    else:  # nanoGPT's model in training, dropout on: the draws must be eager's
        model = TinyGPT(vocab=128, n_embd=64, n_head=4, n_layer=2, block=64, dropout=0.1)
        idx, tgt = torch.randint(0, 128, (4, 32)), torch.randint(0, 128, (4, 32))
        call = lambda f: f(idx, tgt)
    j = thunderlab.jit(model)
    torch.manual_seed(1)
    loss = call(j)
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    model.zero_grad()
    torch.manual_seed(1)
    ref = call(model)
    ref.backward()
    trained = [p for p in model.parameters() if p.grad is not None]
    ok = torch.allclose(loss, ref, atol=1e-5) and all(torch.allclose(a, p.grad, atol=1e-5)
                                                      for a, p in zip(grads, trained))
    info = j.cache_info
    report[name] = {"equal": bool(ok), "loaded": info["captures_loaded"], "kept": info["captures_kept"],
                    "graphs": info["graphs"], "why_not": j.direct.kept.why_not}
print("REPORT " + json.dumps(report))
"""


def test_models_train_from_kept_captures_as_eager(tmp_path):
    """A Hugging Face GPT-2 (its forward wrapped by transformers' decorators), a LLaMA block, the zoo's Hugging Face
    LLaMA (whose guards read a module global of a class defined inside a function) and nanoGPT's model with
    dropout: a training step's loss and gradients equal eager's in the process that keeps the capture and in the
    next one, which loads it."""
    (tmp_path / "zoo.py").write_text(ZOO)
    env = {**os.environ, "ROOT": ROOT, "PYTHONPATH": ROOT, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache"),
           "THUNDERLAB_CAPTURES": "1"}
    names = ["gpt2", "llama", "hf_llama", "nanogpt"]
    reports = []
    for _ in range(2):
        p = subprocess.run([sys.executable, str(tmp_path / "zoo.py"), *names], env=env,
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        reports.append(json.loads(next(s for s in p.stdout.splitlines() if s.startswith("REPORT "))[7:]))
    for name in names:
        first, second = reports[0][name], reports[1][name]
        assert first["equal"] and second["equal"], (first, second)
        assert first["kept"] == 1, first
        assert second["loaded"] == 1 and second["graphs"] == 1, second


@pytest.fixture
def keeping(tmp_path, monkeypatch):
    """Captures kept and loaded in this process, in a folder of this test's own."""
    monkeypatch.setenv("THUNDERLAB_CAPTURES", "1")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))


def hooked(x):
    y = x * 2
    y.register_hook(lambda g: g * 3)  # TorchDynamo hands it over as a higher-order operator with a body graph
    return torch.sin(y).sum(1)


def test_a_second_jit_in_the_process_loads_the_first_ones_capture_operators_and_bodies_included(keeping):
    import thunderlab

    first = thunderlab.jit(hooked)
    x = torch.randn(4, 4, requires_grad=True)
    first(x).sum().backward()
    assert first.cache_info["captures_kept"] == 1, first.direct.kept.why_not
    second = thunderlab.jit(hooked)
    x2 = x.detach().clone().requires_grad_()
    out = second(x2)
    out.sum().backward()
    x.grad = None
    hooked(x).sum().backward()
    assert second.cache_info["captures_loaded"] == 1 and second.cache_info["direct_calls"] == 1
    torch.testing.assert_close(out, hooked(x))
    torch.testing.assert_close(x2.grad, x.grad)  # the hook's factor 3 is in the gradient


def test_an_inference_call_loads_only_the_capture_made_in_its_grad_mode(keeping):
    """TorchDynamo guards the grad mode a frame was captured in: a kept training capture cannot serve a call under
    ``torch.no_grad()``. Such a call loads its own capture, not first the (newer) training one to fail its guards."""
    import thunderlab

    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.GELU(), torch.nn.Linear(5, 3))
    x = torch.randn(4, 6)
    first = thunderlab.jit(model)
    with torch.no_grad():
        first(x)
    first(x).sum().backward()  # kept after the inference capture: the newest
    assert first.cache_info["captures_kept"] == 2, first.direct.kept.why_not
    model.zero_grad(set_to_none=True)
    second = thunderlab.jit(model)
    with torch.no_grad():
        out = second(x)
    assert second.cache_info["captures_loaded"] == 1 and second.cache_info["direct_calls"] == 1, second.cache_info
    assert not out.requires_grad
    torch.testing.assert_close(out, model(x))
    loss = second(x).sum()  # a training call now loads the training capture
    loss.backward()
    assert second.cache_info["captures_loaded"] == 2, second.cache_info
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    model(x).sum().backward()
    for got, want in zip(grads, (p.grad for p in model.parameters())):
        torch.testing.assert_close(got, want)


def test_the_garbage_collector_waits_while_a_kept_capture_loads(keeping, monkeypatch):
    """Loading unpickles the guards' state and builds two guard trees: many small objects, no cycles worth a
    collection over the whole heap (``fastpaths.collector_paused``, as passes run). The collector is on again
    afterwards."""
    import gc

    import thunderlab
    from thunderlab.frontend import captures

    seen = []
    load = captures.Store._load

    def noting(self, entry, frame_locals):
        seen.append(gc.isenabled())
        return load(self, entry, frame_locals)

    monkeypatch.setattr(captures.Store, "_load", noting)
    x = torch.randn(5, 3, requires_grad=True)
    thunderlab.jit(hooked)(x)
    second = thunderlab.jit(hooked)
    torch.testing.assert_close(second(x), hooked(x))
    assert second.cache_info["captures_loaded"] == 1 and seen == [False]
    assert gc.isenabled()


class ProblemConfig:
    """As a Hugging Face config: ``problem_type`` is None until the first call with labels sets it."""

    def __init__(self):
        self.problem_type = None


class Classifier(torch.nn.Module):
    """As transformers' sequence classifiers: the loss's kind is decided on the first call and kept in the config,
    so the first and the later calls are two captures, alike in their tensors."""

    def __init__(self):
        super().__init__()
        self.config = ProblemConfig()
        self.head = torch.nn.Linear(6, 3)

    def forward(self, x, labels):
        logits = self.head(x)
        if self.config.problem_type is None:
            self.config.problem_type = "single_label_classification"
            return torch.nn.functional.cross_entropy(logits, labels)
        return torch.nn.functional.cross_entropy(logits, labels, label_smoothing=0.1)


def test_of_two_kept_captures_alike_in_tensors_the_one_whose_values_read_as_now_is_loaded(keeping):
    import thunderlab

    x, labels = torch.randn(4, 6), torch.tensor([0, 2, 1, 0])
    first = thunderlab.jit(Classifier())
    first(x, labels)
    first(x, labels)  # problem_type set: captured again, and kept newest
    assert first.cache_info["captures_kept"] == 2, first.direct.kept.why_not
    model = Classifier()
    second = thunderlab.jit(model)
    out = second(x, labels)  # problem_type None: the newest capture is told apart, not loaded
    assert second.cache_info["captures_loaded"] == 1, second.cache_info
    assert "problem_type was 'single_label_classification' when captured" in second.direct.kept.why_not
    reference = Classifier()
    reference.load_state_dict(model.state_dict())
    torch.testing.assert_close(out, reference(x, labels))
    out = second(x, labels)  # now the other one
    assert second.cache_info["captures_loaded"] == 2 and second.cache_info["graphs"] == 2, second.cache_info
    torch.testing.assert_close(out, reference(x, labels))


def test_a_capture_that_cannot_be_kept_leaves_nothing_alive(keeping):
    """A module class made by ``exec`` cannot be named in another process, so its capture's guards do not
    serialize; the half-built guard manager must not keep the capture (and the model) alive."""
    import gc
    import weakref

    import thunderlab

    ns = {"torch": torch}
    exec("class Made(torch.nn.Module):\n"
         "    def __init__(self):\n"
         "        super().__init__()\n"
         "        self.w = torch.nn.Parameter(torch.randn(8, 8))\n"
         "    def forward(self, x):\n"
         "        return (x @ self.w).relu()\n", ns)
    model = ns.pop("Made")()
    j = thunderlab.jit(model)
    j(torch.randn(2, 8))
    assert j.cache_info["captures_kept"] == 0 and "not kept" in j.direct.kept.why_not
    graph = weakref.ref(j.backend.graphs[0].capture.gm)
    parameter = weakref.ref(model.w)
    del j, model
    gc.collect()
    assert graph() is None and parameter() is None


def test_a_loaded_capture_checks_its_guards_as_torchdynamos_own_entry_does(keeping):
    """On the third call that passes a loaded capture's guards, they are built again from that call's values (not
    on the first, which they would slow by about what loading cost): the identity guards in TorchDynamo's guard
    tree rather than checked in Python name by name, and a Hugging Face config's attribute guards replaced by its
    dictionary's version, as in the process that captured. A config changed after that is still seen."""
    import thunderlab
    from thunderlab.examples import gpt2_from_config
    from thunderlab.frontend.captures import REBUILD_AT

    model = gpt2_from_config(n_layer=1, n_embd=32, n_head=2).eval()
    ids = torch.randint(0, 100, (2, 8))
    first = thunderlab.jit(model)
    with torch.no_grad():
        first(ids)
    assert first.cache_info["captures_kept"] == 1, first.direct.kept.why_not
    own = str(first.direct._listed[1][0].guard_manager) if first.direct._listed else None

    second = thunderlab.jit(model)
    with torch.no_grad():
        out = second(ids)
        torch.testing.assert_close(out.logits, model(ids).logits)
    assert second.cache_info["captures_loaded"] == 1 and second.cache_info["direct_calls"] == 1
    [loaded] = second.direct._loaded
    loaded_tree = str(loaded.guard_manager)
    for n in range(2, REBUILD_AT + 1):
        assert loaded.identity is not None and loaded.rebuild is not None, f"rebuilt before call {n}"
        with torch.no_grad():
            torch.testing.assert_close(second(ids).logits, out.logits)
    assert second.cache_info["direct_calls"] == REBUILD_AT and second.cache_info["captures_loaded"] == 1
    assert loaded.identity is None and loaded.rebuild is None  # no Python identity check beside the tree
    assert "ID_MATCH" not in loaded_tree
    tree = str(loaded.guard_manager)
    assert "DICT_VERSION" in tree and "ID_MATCH" in tree
    if own is not None:  # the same kinds of guard, as many of each, as TorchDynamo's own entry
        kinds = lambda t: sorted(line.split("+- ")[1].split(":")[0] for line in t.splitlines() if "+- " in line)  # noqa: E731
        assert kinds(tree) == kinds(own)

    model.config.output_hidden_states = True  # read by the forward: the graph made before must not run
    with torch.no_grad():
        again, expected = second(ids), model(ids)
    assert out.hidden_states is None and len(again.hidden_states) == len(expected.hidden_states) == 2
    for a, b in zip(again.hidden_states, expected.hidden_states):
        torch.testing.assert_close(a, b)


def test_a_config_changed_before_the_loaded_guards_are_rebuilt_is_seen(keeping):
    """Between a capture's load and the call that builds its guards again, the guards as loaded decide alone: a
    config attribute the forward reads, changed on the second call, must not run the graph made before."""
    import thunderlab
    from thunderlab.examples import gpt2_from_config

    model = gpt2_from_config(n_layer=1, n_embd=32, n_head=2).eval()
    ids = torch.randint(0, 100, (2, 8))
    with torch.no_grad():
        thunderlab.jit(model)(ids)
        second = thunderlab.jit(model)
        out = second(ids)
        assert second.cache_info["captures_loaded"] == 1 and out.hidden_states is None
        [loaded] = second.direct._loaded
        assert loaded.rebuild is not None
        model.config.output_hidden_states = True
        again, expected = second(ids), model(ids)
    assert len(again.hidden_states) == len(expected.hidden_states) == 2
    for a, b in zip(again.hidden_states, expected.hidden_states):
        torch.testing.assert_close(a, b)


def reads_a_flag(x):
    if os.environ.get("THUNDERLAB_TEST_FLAG_NEVER_SET", "0") == "1":  # as transformers' sdpa attention reads one
        return x + 1
    return x * 2


def test_a_capture_reading_the_environment_loads_when_other_variables_changed(keeping, monkeypatch):
    """TorchDynamo guards ``os.environ``'s dictionary by its type alone: a kept capture that read a flag from it is
    used where the environment has other variables, or the same in another order (a shell sets ``_`` per command;
    Inductor sets a variable of its own when it loads a C++ module)."""
    import thunderlab

    first = thunderlab.jit(reads_a_flag)
    x = torch.randn(3)
    first(x)
    assert first.cache_info["captures_kept"] == 1, first.direct.kept.why_not
    monkeypatch.setenv("THUNDERLAB_TEST_SOME_OTHER_VARIABLE", "1")
    second = thunderlab.jit(reads_a_flag)
    torch.testing.assert_close(second(x), x * 2)
    assert second.cache_info["captures_loaded"] == 1, second.direct.kept.why_not
