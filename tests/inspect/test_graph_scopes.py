"""Module scopes as graph groups, and Graphviz exports (DOT always; SVG with Graphviz's dot)."""
import re
import shutil
import sys

import pytest
import torch

import thunderlab
from thunderlab.inspect import trace_graph


class Attn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.softmax(self.q(x), -1)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attn()
        self.mlp = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.mlp(self.attn(x)) + x


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(), Block()])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x.relu()


@pytest.fixture(scope="module")
def graph():
    j = thunderlab.jit(Net(), tiered=False)
    j(torch.randn(2, 8))
    return trace_graph(thunderlab.last_record(j).program.forward)


def test_calls_carry_their_module_scope(graph):
    scopes = {n.scope for n in graph.nodes.values() if n.kind == "call"}
    assert {"blocks.0.attn.q", "blocks.0.attn", "blocks.0.mlp", "blocks.1.attn.q", "blocks.1.mlp"} <= scopes
    softmax = [n for n in graph.nodes.values() if n.label == "ltorch.softmax"]
    assert [n.scope for n in softmax] == ["blocks.0.attn", "blocks.1.attn"]
    assert graph.to_networkx().nodes[softmax[0].id]["scope"] == "blocks.0.attn"


def test_dot_nests_module_clusters(graph):
    dot = graph.to_dot(groups="modules")
    # blocks > blocks.0 > blocks.0.attn > blocks.0.attn.q, each a cluster inside its parent
    order = [m.group(1) for m in re.finditer(r'subgraph "cluster_([^"]+)"', dot)]
    assert (
        order.index("blocks") < order.index("blocks.0") < order.index("blocks.0.attn") < order.index("blocks.0.attn.q")
    )
    depth = 0
    inside = {}
    for line in dot.splitlines()[1:-1]:  # inside "digraph trace { ... }"
        m = re.search(r'subgraph "cluster_([^"]+)"', line)
        if m:
            depth += 1
            inside[m.group(1)] = depth
        elif line.strip() == "}":
            depth -= 1
    assert inside["blocks.0.attn.q"] == inside["blocks.0.attn"] + 1 == inside["blocks.0"] + 2
    assert depth == 0
    assert "subgraph" not in graph.to_dot(groups="none")
    with pytest.raises(ValueError, match=r"groups='layers': expected one of 'regions', 'modules', 'none'"):
        graph.to_dot(groups="layers")


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed (make test installs it)")
def test_svg_export(graph, tmp_path):
    out = tmp_path / "g.svg"
    svg = graph.to_svg(out, groups="modules")
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert out.read_text(encoding="utf-8") == svg
    assert "ltorch.softmax" in svg
    assert "<title>cluster_blocks.0.attn</title>" in svg  # the module's cluster, drawn


def test_svg_without_dot_says_what_to_install(graph, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(RuntimeError, match="needs Graphviz's dot program on PATH: apt-get install graphviz"):
        graph.to_svg()


def test_svg_without_the_package_says_what_to_install(graph, monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)
    with pytest.raises(ImportError, match=r"pip install 'thunderlab\[graph\]'"):
        graph.to_svg()


def test_payload_nodes_carry_scopes():
    from thunderlab.inspect.serialize import RecordPayload, validate

    j = thunderlab.jit(Net(), tiered=False)
    j(torch.randn(2, 8))
    payload = RecordPayload(thunderlab.last_record(j)).to_dict()
    validate(payload)
    nodes = payload["steps"][-1]["traces"]["forward"]["graph"]["nodes"]
    assert any(n["scope"] == "blocks.1.attn" and n["label"] == "ltorch.softmax" for n in nodes)
