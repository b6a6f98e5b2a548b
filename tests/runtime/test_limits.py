"""The process keeps a bounded number of records, and each graph a bounded number of compiled shapes."""
import pytest
import torch

import thunderlab


@pytest.fixture
def limits():
    before = thunderlab.set_limits()
    yield
    thunderlab.set_limits(**before)


def _fresh_function(i):
    ns = {}
    exec(f"def f{i}(x):\n    return x * {i + 1} + 1\n", ns)  # a new code object: a new compile
    return ns[f"f{i}"]


def test_records_are_bounded_newest_kept(limits):
    thunderlab.set_limits(records=3)
    fns = [thunderlab.jit(_fresh_function(i)) for i in range(5)]
    for j in fns:
        j(torch.randn(4))
    names = [r.name for r in thunderlab.records()]
    assert names == ["f2", "f3", "f4"]
    thunderlab.set_limits(records=2)  # lowering the limit drops the oldest at once
    assert [r.name for r in thunderlab.records()] == ["f3", "f4"]
    thunderlab.clear_records()
    assert thunderlab.records() == []
    torch.testing.assert_close(fns[0](torch.ones(4)), torch.full((4,), 2.0))  # compiled functions keep working


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "10"])
def test_limits_reject_bad_values(bad):
    with pytest.raises(ValueError, match="records must be a whole number of at least 1"):
        thunderlab.set_limits(records=bad)
    if bad != 0:
        with pytest.raises(ValueError, match="kernels must be a whole number of at least 0"):
            thunderlab.set_limits(kernels=bad)


def test_kept_kernels_limit(limits):
    assert thunderlab.set_limits()["kernels"] == 64  # the default
    assert thunderlab.set_limits(kernels=0)["kernels"] == 0
    assert thunderlab.set_limits(kernels=8)["kernels"] == 8


def test_compiled_shapes_are_bounded_least_recently_used_first(limits):
    thunderlab.set_limits(shapes=2)

    def f(x):
        return x.sin() * 2

    j = thunderlab.jit(f)
    sizes = [3, 4, 5, 4, 6]
    for n in sizes:
        x = torch.randn(n)
        torch.testing.assert_close(j(x), f(x))
    graphs = j.backend.graphs
    assert all(len(g.cache) <= 2 for g in graphs)
    dynamic = [g for g in graphs if not g.static]
    assert dynamic and len(dynamic[-1].cache) == 2
    # 4 was used after 5, so 5 went first when 6 came: 4 is still compiled, 5 compiles again
    g = dynamic[-1]
    misses = g.misses
    j(torch.randn(4))
    assert g.misses == misses
    j(torch.randn(5))
    assert g.misses == misses + 1
    assert len(j.records) <= 4


def test_a_dropped_function_takes_its_graphs_and_records_with_it():
    """TorchDynamo keeps every backend it was given: thunderlab gives it a weak link, so nothing is pinned."""
    import gc
    import weakref

    ns = {"torch": torch}
    exec("class Cell(torch.nn.Module):\n"
         "    def __init__(self):\n"
         "        super().__init__()\n"
         "        self.w = torch.nn.Parameter(torch.randn(64, 64))\n"
         "    def forward(self, x):\n"
         "        return (x @ self.w).relu()\n", ns)  # its own code object, as a notebook cell's class has
    model = ns.pop("Cell")()
    j = thunderlab.jit(model)
    j(torch.randn(2, 64))
    refs = [weakref.ref(j.backend), weakref.ref(j.backend.graphs[0]), weakref.ref(thunderlab.last_record(j)),
            weakref.ref(model.w)]
    del j, model
    thunderlab.clear_records()
    gc.collect()
    assert [r() is None for r in refs] == [True] * 4


def test_nothing_of_a_dropped_function_outlives_it():
    """Beyond the records: the class and its code, the lowered program, the compiled callables, the direct-call
    runner; all freed once the function and the model are dropped and the records cleared."""
    import gc
    import weakref

    ns = {"torch": torch}
    exec("class Cell2(torch.nn.Module):\n"
         "    def __init__(self):\n"
         "        super().__init__()\n"
         "        self.w = torch.nn.Parameter(torch.randn(64, 64))\n"
         "    def forward(self, x):\n"
         "        return (x @ self.w).relu() + 1\n", ns)
    cls = ns.pop("Cell2")
    model = cls()
    j = thunderlab.jit(model)
    x = torch.randn(2, 64)
    for _ in range(3):  # the later calls run directly, on Dynamo's bytecode
        j(x)
    graph = j.backend.graphs[0]
    entry = next(iter(graph.cache.values()))
    record = thunderlab.last_record(j)
    # (the forward's code object is TorchDynamo's to keep: its cache hangs on it, with or without thunderlab)
    refs = {"class": weakref.ref(cls), "direct-call runner": weakref.ref(j.direct),
            "compiled callable": weakref.ref(entry.fn), "final program": weakref.ref(record.program.forward),
            "captured program": weakref.ref(record.captured), "jit function": weakref.ref(j),
            "lowering": weakref.ref(graph.capture), "record": weakref.ref(record)}
    del j, model, cls, graph, entry, record
    thunderlab.clear_records()
    gc.collect()
    assert [name for name, r in refs.items() if r() is not None] == []


def test_dynamos_wrapper_of_a_graph_keeps_nothing_of_a_dropped_function():
    """TorchDynamo calls each compiled graph through a wrapper made with functools.wraps (torch._dynamo.disable),
    installed in the compiled function's module globals and at times kept there for good (a graph whose regions
    compile on Inductor, a nested torch.compile, keeps it). functools.wraps copies an instance's __dict__ into the
    wrapper: the graph has none, so once the function is dropped the wrapper holds only the emptied graph."""
    import gc
    import weakref

    ns = {"torch": torch}
    exec("class Cell3(torch.nn.Module):\n"
         "    def __init__(self):\n"
         "        super().__init__()\n"
         "        self.w = torch.nn.Parameter(torch.randn(64, 64))\n"
         "    def forward(self, x):\n"
         "        return (x @ self.w).relu() + 3\n", ns)
    model = ns.pop("Cell3")()
    j = thunderlab.jit(model)
    j(torch.randn(2, 64))
    graph = j.backend.graphs[0]
    wrapper = torch._dynamo.disable(graph)  # as TorchDynamo wraps it
    record = thunderlab.last_record(j)
    refs = {"record": weakref.ref(record), "final program": weakref.ref(record.program.forward),
            "captured graph module": weakref.ref(graph.eager.__self__), "lowering": weakref.ref(graph.capture),
            "compiled callable": weakref.ref(next(iter(graph.cache.values())).fn)}
    del j, model, graph, record
    thunderlab.clear_records()
    gc.collect()
    assert [name for name, r in refs.items() if r() is not None] == []
    assert wrapper.__wrapped__.records == [] and wrapper.__wrapped__.cache == {}


@pytest.mark.parametrize("options", [{}, {"verify": True}, {"keep_inputs": True}])
def test_the_records_of_a_dropped_function_keep_no_parameters_inputs_or_compiled_code(options):
    """The process's list keeps the newest records after their function is gone, as data to read: with ``verify``
    or ``keep_inputs`` a record holds its inputs strongly (the model's parameters among them), and every record
    holds its compiled program and the captured graph; none of these may outlive the function."""
    import gc
    import weakref

    ns = {"torch": torch}
    exec("class Cell4(torch.nn.Module):\n"
         "    def __init__(self):\n"
         "        super().__init__()\n"
         "        self.w = torch.nn.Parameter(torch.randn(64, 64))\n"
         "    def forward(self, x):\n"
         "        return (x @ self.w).relu() + 4\n", ns)
    model = ns.pop("Cell4")()
    j = thunderlab.jit(model, **options)
    x = torch.randn(2, 64)
    expected = model(x)
    torch.testing.assert_close(j(x), expected)
    record = thunderlab.last_record(j)
    table = record.table()
    live = thunderlab.session(record)
    refs = {"parameter": weakref.ref(model.w), "input": weakref.ref(x), "compiled program": weakref.ref(live.runner),
            "captured graph module": weakref.ref(live.eager.__self__), "session": weakref.ref(live)}
    if options.get("verify"):
        refs["eager's output"] = weakref.ref(torch.utils._pytree.tree_leaves(live.reference.outputs)[0])
    del j, model, x, expected, live
    gc.collect()
    assert [name for name, r in refs.items() if r() is not None] == []
    # the record itself stays in the process's list: its steps can still be read; its live part is gone
    assert record in thunderlab.records() and record.table() == table
    with pytest.raises(thunderlab.NotLive, match="session needs .*the function it was compiled from was dropped"):
        thunderlab.session(record)


def test_a_live_function_keeps_no_fake_tensors_of_dynamos_compile():
    """TorchDynamo leaves a fake value on every node of the graph it hands over (and a GraphArg on every
    input); each holds its fake mode and shape environment. Once the graph has been called, a compiled function
    that stays alive keeps none of them, only the dtype its lowering reads again for a new input size."""
    from torch._subclasses.fake_tensor import FakeTensor

    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    j = thunderlab.jit(model)
    j(torch.randn(3, 16))
    gm = j.backend.graphs[0].capture.gm
    kept = [(n.name, k) for n in gm.graph.nodes for k, v in n.meta.items()
            if k in ("example_value", "grapharg") or isinstance(v, FakeTensor)]
    assert kept == []


def test_autocast_lowering_for_a_new_size_after_the_graph_let_go_of_its_fake_values():
    """A function called under torch.autocast and then with a new batch size is lowered again from its graph,
    whose fake values are gone by then: each op still runs in the dtype eager's autocast picks for it."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))

    def f(x):
        h = model(x)
        return h, torch.nn.functional.mse_loss(h, x[:, :8])  # CPU autocast: linear in bf16, mse_loss in float32

    j = thunderlab.jit(f)
    for batch in (4, 7, 9):  # TorchDynamo's second graph, for any size, is lowered again for the third
        x = torch.randn(batch, 16)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            want, got = f(x), j(x)
        assert [t.dtype for t in want] == [torch.bfloat16, torch.float32]  # PyTorch's CPU autocast lists
        assert [t.dtype for t in got] == [t.dtype for t in want]
        torch.testing.assert_close(got, want, atol=1e-2, rtol=1e-2)
    assert len(j.records) == 3 and len(j.backend.graphs) == 2
