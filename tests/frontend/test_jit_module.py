"""``thunderlab.jit(module)`` is a module standing in for the original, as torch.nn.Module's documentation
describes a module: its parameters and state dict (with the original's names), ``train``/``eval``, ``to``,
``apply``, hooks, submodules and attributes. Every call's result is checked against the original module's."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import thunderlab


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 3))
        self.register_buffer("shift", torch.zeros(3))
        self.scale = 1.0

    def forward(self, x):
        return self.body(x) * self.scale + self.shift

    def describe(self) -> str:
        return f"Net with scale {self.scale}"


def test_parameters_buffers_and_names_are_the_originals():
    net = Net()
    model = thunderlab.jit(net)
    assert isinstance(model, nn.Module) and isinstance(model, thunderlab.JitFunction)
    assert [id(p) for p in model.parameters()] == [id(p) for p in net.parameters()]
    assert [n for n, _ in model.named_parameters()] == [n for n, _ in net.named_parameters()]
    assert [n for n, _ in model.named_buffers()] == ["shift"]
    assert list(model.state_dict()) == list(net.state_dict())
    assert model.body is net.body and model.shift is net.shift
    assert [n for n, _ in model.named_modules()][1:] == [n for n, _ in net.named_modules()][1:]


def test_load_state_dict_loads_into_the_original_and_reports_as_it_does():
    net, other = Net().eval(), Net().eval()
    model = thunderlab.jit(net)
    x = torch.randn(4, 6)
    model(x)
    result = model.load_state_dict(other.state_dict())
    assert not result.missing_keys and not result.unexpected_keys
    torch.testing.assert_close(model(x), other(x))
    bad = dict(other.state_dict())
    bad.pop("shift")
    with pytest.raises(RuntimeError, match="Missing key.*shift"):
        model.load_state_dict(bad)
    assert model.load_state_dict(bad, strict=False).missing_keys == ["shift"]


def test_train_and_eval_reach_the_original_and_return_the_jitted_module():
    net = Net()
    model = thunderlab.jit(net)
    x = torch.randn(64, 6)
    assert model.eval() is model
    assert not net.training and not net.body[2].training and not model.training
    torch.testing.assert_close(model(x), net(x))  # dropout off: equal to the original in eval mode
    assert model.train() is model and net.training and net.body[2].training
    model.training = False  # as Module.train sets it
    assert not net.training


def test_to_converts_the_originals_parameters_and_returns_the_jitted_module():
    net = Net().eval()
    model = thunderlab.jit(net)
    assert model.to(torch.float64) is model
    assert all(p.dtype == torch.float64 for p in net.parameters()) and net.shift.dtype == torch.float64
    x = torch.randn(4, 6, dtype=torch.float64)
    out = model(x)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, net(x))


def test_apply_reaches_a_jitted_leaf_module_itself():
    lin = nn.Linear(4, 4)
    model = thunderlab.jit(lin)

    def zero(m):
        if isinstance(m, nn.Linear):
            nn.init.zeros_(m.weight)

    assert model.apply(zero) is model
    assert torch.count_nonzero(lin.weight) == 0
    torch.testing.assert_close(model(torch.randn(2, 4)), lin.bias.expand(2, 4))


def test_a_jitted_submodule_keeps_its_parents_state_dict_names_and_loading():
    torch.manual_seed(0)
    parent = nn.Sequential(nn.Linear(6, 6), Net()).eval()
    names = list(parent.state_dict())
    parent[1] = thunderlab.jit(parent[1])
    assert list(parent.state_dict()) == names
    fresh = nn.Sequential(nn.Linear(6, 6), Net()).eval()
    parent.load_state_dict(fresh.state_dict())  # strict: every key found under the names it had
    x = torch.randn(3, 6)
    torch.testing.assert_close(parent(x), fresh(x))
    expected = [*parent[0].parameters(), *parent[1].fn.parameters()]
    assert [id(p) for p in parent.parameters()] == [id(p) for p in expected]


def test_hooks_on_the_jitted_module_run_around_its_call():
    net = Net().eval()
    model = thunderlab.jit(net)
    seen = []
    model.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    model.register_forward_hook(lambda m, args, out: seen.append(out.shape) or out + 1)
    x = torch.randn(2, 6)
    torch.testing.assert_close(model(x), net(x * 2) + 1)
    assert seen == [torch.Size([2, 3])]


def test_attributes_are_read_from_and_set_on_the_original():
    net = Net().eval()
    model = thunderlab.jit(net)
    x = torch.randn(2, 6)
    model(x)
    assert model.describe() == "Net with scale 1.0" and model.scale == 1.0
    model.scale = 3.0  # set on the module: its guard sees the change and the program is captured again
    assert net.scale == 3.0
    torch.testing.assert_close(model(x), net(x))
    model.extra = nn.Linear(2, 2)  # a new submodule lands in the original's
    assert "extra" in dict(net.named_children())
    del model.extra
    assert not hasattr(net, "extra")
    with pytest.raises(AttributeError, match="no_such_thing"):
        model.no_such_thing  # noqa: B018
    assert "describe" in dir(model)


def test_jitting_a_jitted_module_says_what_to_jit_instead():
    model = thunderlab.jit(Net())
    with pytest.raises(TypeError, match=r"compiled by thunderlab already.*\.fn"):
        thunderlab.jit(model)


def test_a_deep_copy_is_the_copied_module_jitted_anew():
    """``ema = copy.deepcopy(model)``, as a training script keeps a moving average of its weights."""
    import copy

    net = Net().eval()
    model = thunderlab.jit(net, pipeline="dce,cse,del")
    x = torch.randn(2, 6)
    model(x)
    ema = copy.deepcopy(model)
    assert isinstance(ema, thunderlab.JitModule) and ema.fn is not net
    assert ema.options.pipeline == "dce,cse,del" and not ema.records  # compiled anew at its first call
    assert all(p is not q for p, q in zip(ema.parameters(), net.parameters()))
    torch.testing.assert_close(ema(x), net(x))
    with torch.no_grad():
        for p in ema.parameters():
            p.mul_(0.5)
    torch.testing.assert_close(ema(x), ema.fn(x))
    assert not torch.allclose(ema(x), model(x))  # the original's weights are untouched
    assert thunderlab.last_record(ema).program is not None


def test_a_saved_jitted_module_loads_as_one():
    import io

    net = Net().eval()
    buf = io.BytesIO()
    torch.save(thunderlab.jit(net), buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    assert isinstance(loaded, thunderlab.JitModule)
    x = torch.randn(2, 6)
    torch.testing.assert_close(loaded(x), net(x))


def _double(x):
    return x * 2


def test_a_deep_copy_of_a_jitted_function_compiles_the_same_function():
    import copy

    jfn = thunderlab.jit(_double, timing=True)
    twin = copy.deepcopy(jfn)
    assert twin is not jfn and twin.fn is _double and twin.options.timing
    torch.testing.assert_close(twin(torch.ones(3)), torch.full((3,), 2.0))
