"""Guards on attributes read through Python ``__getattribute__`` (model configs) become one dict-version guard,
and every change a user makes to such an object still reaches the next call, as torch.compile's guards promise."""
import pytest
import torch
from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list

import thunderlab
from thunderlab.frontend import attribute_guards


class Config:
    """Like Hugging Face's configs: attribute reads run Python code (an alias map)."""

    aliases = {"factor": "scale"}
    bias = 0.0  # a class attribute, read through instances

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def __getattribute__(self, name):
        if name != "aliases" and name in super().__getattribute__("aliases"):
            name = super().__getattribute__("aliases")[name]
        return super().__getattribute__(name)


class Net(torch.nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.config = Config(**kw)
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x) * self.config.factor
        if self.config.relu:
            y = y.relu()
        if hasattr(self.config, "shift"):
            y = y + self.config.shift
        return y + len(self.config.sizes) + self.config.bias


def _entries(m) -> list:
    return list(_debug_get_cache_entry_list(type(m).forward.__code__))


def _tree(m) -> str:
    return "\n".join(str(e.guard_manager) for e in _entries(m))


@pytest.fixture(autouse=True)
def _reset():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_config_reads_are_one_version_guard_and_results_match_eager():
    m = Net(scale=2.0, relu=True, sizes=[1, 2])
    j = thunderlab.jit(m)
    x = torch.randn(3, 4)
    for _ in range(3):
        torch.testing.assert_close(j(x), m(x))
    tree = _tree(m)
    assert "___dict_version" in tree
    assert "config.scale" not in tree and "config.relu" not in tree  # the scalar reads were replaced
    assert "len(L['self'].config.sizes)" in tree  # a list's length: kept, the version does not see it change
    assert "config.bias" in tree  # found on the class: kept, the instance's version does not see the class
    assert j.cache_info["direct_calls"] >= 2


@pytest.mark.parametrize("change", ["scale", "alias", "flag", "new attribute", "list in place", "whole dict",
                                    "class attribute", "instance attribute over the class's"])
def test_every_change_to_the_config_reaches_the_next_call(change):
    m = Net(scale=2.0, relu=True, sizes=[1, 2])
    j = thunderlab.jit(m)
    x = torch.randn(3, 4)
    for _ in range(2):
        torch.testing.assert_close(j(x), m(x))
    cfg = m.config
    if change == "scale":
        cfg.scale = -3.0
    elif change == "alias":
        Config.aliases = {"factor": "other"}
        cfg.other = 5.0
    elif change == "flag":
        cfg.relu = False
    elif change == "new attribute":
        cfg.shift = 10.0
    elif change == "list in place":
        cfg.sizes.append(3)
    elif change == "class attribute":
        Config.bias = 7.0
    elif change == "instance attribute over the class's":
        cfg.bias = -7.0
    else:
        object.__setattr__(cfg, "__dict__", {**object.__getattribute__(cfg, "__dict__"), "scale": 0.5})
    try:
        expected = m(x)
        for _ in range(2):
            torch.testing.assert_close(j(x), expected)
    finally:
        Config.aliases, Config.bias = {"factor": "scale"}, 0.0


def test_writing_the_same_value_every_step_recompiles_once():
    m = Net(scale=2.0, relu=False, sizes=[])
    j = thunderlab.jit(m)
    x = torch.randn(3, 4)
    for _ in range(6):
        # an equal value, a new object: Dynamo's own guards would pass; the version changes (the same object
        # would leave the version as it was)
        m.config.scale = float("2.0")
        torch.testing.assert_close(j(x), m(x))
    entries = _entries(m)
    assert len(entries) == 2  # the first compile and one more, which keeps every guard of this config
    assert sum("config.scale" in str(e.guard_manager) for e in entries) == 1


def test_a_config_the_forward_writes_keeps_its_guards():
    class Writing(Net):
        def forward(self, x):
            self.config.seen = x.shape[0]
            return super().forward(x)

    m = Writing(scale=2.0, relu=True, sizes=[1])
    j = thunderlab.jit(m)
    for n in (3, 3, 3, 3):
        x = torch.randn(n, 4)
        torch.testing.assert_close(j(x), m.lin(x).mul(2.0).relu() + 1)
    assert m.config.seen == 3
    assert "___dict_version" not in _tree(m)
    assert len(_entries(m)) == 1


def test_other_objects_keep_dynamo_guards():
    class Plain:
        scale = 3.0

    class Uses(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cfg = Plain()

        def forward(self, x):
            return x * self.cfg.scale

    m = Uses()
    j = thunderlab.jit(m)
    x = torch.randn(4)
    torch.testing.assert_close(j(x), x * 3.0)
    assert "___dict_version" not in _tree(m)
    m.cfg.scale = 4.0
    torch.testing.assert_close(j(x), x * 4.0)


def test_nothing_happens_outside_a_compile():
    assert attribute_guards.collapse() == 0


def test_hugging_face_config_change_reaches_the_jitted_model():
    pytest.importorskip("transformers")
    from tests.zoo.models import ZOO, inputs, pair

    entry = next(e for e in ZOO if e.name == "bert")
    model, _ = pair(entry, None)
    model.eval()
    x = inputs(entry, model, batch=2, length=8)
    j = thunderlab.jit(model)
    with torch.no_grad():
        out = j(**x)
        assert out.hidden_states is None
        assert "___dict_version" in _tree(model)
        model.config.output_hidden_states = True
        out = j(**x)
        ref = model(**x)
    assert out.hidden_states is not None and len(out.hidden_states) == len(ref.hidden_states)
    torch.testing.assert_close(out.logits, ref.logits)


def test_torch_compile_with_the_thunderlab_backend_gets_the_same_guard():
    m = Net(scale=2.0, relu=True, sizes=[1])
    c = torch.compile(m, backend="thunderlab")
    x = torch.randn(3, 4)
    torch.testing.assert_close(c(x), m(x))
    assert "___dict_version" in _tree(m)
    m.config.scale = 0.25
    torch.testing.assert_close(c(x), m(x))
