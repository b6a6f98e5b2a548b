"""Graphs of traces: nodes are bound symbols (by stable id), edges are the values between them."""
from __future__ import annotations

from dataclasses import dataclass, field

from thunderlab.core.proxies import TensorProxy
from thunderlab.core.symbols import BoundSymbol
from thunderlab.core.trace import Trace


@dataclass
class Node:
    id: str  # "b<bound symbol id>", "in:<name>" or "out"
    label: str
    kind: str  # "call", "input", "output", "region", "communication" (a collective or its wait)
    executor: str | None = None
    source: str | None = None
    group: str | None = None  # the fusion region a member belongs to
    signature: str = ""  # what the call computes, independent of value names
    scope: str | None = None  # the module the call came from, as a dotted path ("transformer.h.0.attn")
    derived_from: str | None = None  # in a backward trace: the forward node ("b<id>") this call differentiates
    outputs: list[tuple[str, str]] = field(default_factory=list)  # (value name, type string) of what it produces


@dataclass
class Edge:
    src: str
    dst: str
    value: str
    type: str


@dataclass
class Graph:
    """A trace as a dataflow graph; fusion regions are nodes whose members carry ``group``."""

    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)

    def to_networkx(self):
        import networkx as nx

        g = nx.DiGraph()
        for n in self.nodes.values():
            g.add_node(n.id, label=n.label, kind=n.kind, executor=n.executor, group=n.group, scope=n.scope)
        for e in self.edges:
            g.add_edge(e.src, e.dst, value=e.value, type=e.type)
        return g

    def to_dot(self, groups: str = "regions") -> str:
        """Graphviz DOT text.

        ``groups="regions"`` draws fusion regions as clusters; ``"modules"`` nests clusters by
        module scope (``transformer`` > ``transformer.h.0`` > ``transformer.h.0.attn``);
        ``"none"`` draws no clusters.
        """
        if groups not in GROUPINGS:
            raise ValueError(f"groups={groups!r}: expected one of {', '.join(map(repr, GROUPINGS))}")
        lines = ["digraph trace {", "  node [shape=box, fontname=monospace];"]

        def node_line(n: Node, indent: str) -> str:
            shape = _DOT_SHAPES.get(n.kind, "")
            return f'{indent}"{_esc(n.id)}" [label="{_esc(n.label)}"{shape}];'

        tree = _ScopeTree()  # a region is a one-level path; a module scope a dotted one
        for n in self.nodes.values():
            if groups == "modules":
                tree.add(n.scope.split(".") if n.scope else [], n)
            else:
                tree.add([n.group] if groups == "regions" and n.group else [], n)
        tree.emit(lines, node_line, "  ")
        for e in self.edges:
            lines.append(f'  "{_esc(e.src)}" -> "{_esc(e.dst)}" [label="{_esc(e.value)}: {_esc(e.type)}"];')
        lines.append("}")
        return "\n".join(lines) + "\n"

    def to_svg(self, path: str | None = None, *, groups: str = "regions") -> str:
        """The graph drawn by Graphviz, as SVG text (also written to ``path`` when given).

        Needs the ``graphviz`` Python package (``pip install 'thunderlab[graph]'``) and Graphviz's
        ``dot`` program (``apt-get install graphviz``, ``brew install graphviz``).
        """
        try:
            import graphviz
        except ImportError:
            raise ImportError("Graph.to_svg needs the graphviz package: pip install 'thunderlab[graph]' "
                              "(or pip install graphviz), plus Graphviz's dot program") from None
        try:
            svg = graphviz.Source(self.to_dot(groups)).pipe(format="svg", encoding="utf-8")
        except graphviz.ExecutableNotFound:
            raise RuntimeError("Graph.to_svg needs Graphviz's dot program on PATH: apt-get install graphviz "
                               "(Debian/Ubuntu), brew install graphviz (macOS), or see https://graphviz.org/download/; "
                               "to_dot() gives the DOT text without it") from None
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(svg)
        return svg


GROUPINGS = ("regions", "modules", "none")


class _ScopeTree:
    """Nodes filed under their cluster path (a region's name, or a module's dotted path), for DOT."""

    def __init__(self, path: tuple[str, ...] = ()):
        self.path = path
        self.members: list[Node] = []
        self.children: dict[str, _ScopeTree] = {}

    def add(self, parts: list[str], n: Node) -> None:
        t = self
        for part in parts:
            t = t.children.setdefault(part, _ScopeTree(t.path + (part,)))
        t.members.append(n)

    def emit(self, lines: list[str], node_line, indent: str) -> None:
        for n in self.members:
            lines.append(node_line(n, indent))
        for child in self.children.values():
            name = ".".join(child.path)
            lines.append(
                f'{indent}subgraph "cluster_{_esc(name)}" {{ label="{_esc(child.path[-1])}"; tooltip="{_esc(name)}";'
            )
            child.emit(lines, node_line, indent + "  ")
            lines.append(f"{indent}}}")


_DOT_SHAPES = {"input": ", shape=ellipse", "output": ", shape=ellipse", "communication": ", shape=hexagon"}


def _esc(s: str) -> str:
    return str(s).replace("\\", "\\\\").replace('"', '\\"')


def _signature(b: BoundSymbol, canon: dict[str, str]) -> str:
    def show(v):
        if isinstance(v, TensorProxy):
            return canon.get(v.name, v.name)
        if isinstance(v, (tuple, list)):
            return "(" + ", ".join(show(e) for e in v) + ")"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k}={show(e)}" for k, e in v.items()) + "}"
        return repr(v)

    return f"{b.sym.qualname}{show(tuple(b.args))}{show(b.kwargs) if b.kwargs else ''}@{b.executor}"


def _region_scope(region: BoundSymbol) -> str | None:
    """The innermost module holding every member of a fusion region (None when they share none)."""
    scopes = [m.source.scope.split(".") if m.source and m.source.scope else [] for m in region.subsymbols]
    if not scopes:
        return None
    common = scopes[0]
    for sc in scopes[1:]:
        k = 0
        while k < min(len(common), len(sc)) and common[k] == sc[k]:
            k += 1
        common = common[:k]
    return ".".join(common) or None


def trace_graph(trace: Trace, *, expand_regions: bool = False) -> Graph:
    """The dataflow graph of ``trace``. With ``expand_regions``, region members are nodes of their own."""
    g = Graph()
    producer: dict[str, str] = {}
    canon: dict[str, str] = {}  # value name -> "<producer id>.<k>": the same across renames
    for p in trace.tensor_inputs():
        nid = f"in:{p.name}"
        g.nodes[nid] = Node(nid, p.name, "input", signature=p.type_string(), outputs=[(p.name, p.type_string())])
        producer[p.name] = nid
        canon[p.name] = nid

    def add(b: BoundSymbol, group: str | None):
        nid = f"b{b.id}"
        for p in b.inputs:
            src = producer.get(p.name)
            if src is not None:
                g.edges.append(Edge(src, nid, p.name, p.type_string()))
        kind = "region" if b.sym.is_region else "communication" if b.sym.communicates else "call"
        src = b.source.short() if b.source else None
        scope = _region_scope(b) if kind == "region" else (b.source.scope if b.source else None)
        derived = f"b{b.derived_from}" if b.derived_from is not None else None
        outs = [(p.name, p.type_string()) for p in b.outputs if isinstance(p, TensorProxy)]
        g.nodes[nid] = Node(nid, b.sym.qualname, kind, b.executor, src, group, _signature(b, canon), scope or None,
                            derived, outs)
        for k, p in enumerate(b.outputs):
            producer[p.name] = nid
            canon[p.name] = f"{nid}.{k}"

    for b in trace.bound_symbols:
        if b.sym.bookkeeping:
            continue
        if expand_regions and b.sym.is_region:
            for m in b.subsymbols:
                add(m, b.sym.name)
        else:
            add(b, None)
    g.nodes["out"] = Node("out", "return", "output")
    for p in trace.output_proxies():
        if p.name in producer:
            g.edges.append(Edge(producer[p.name], "out", p.name, p.type_string()))
    return g


@dataclass
class GraphDiff:
    added: list[str]
    removed: list[str]
    changed: list[str]
    executor: list[str] = field(default_factory=list)  # of ``changed``: those whose executor assignment changed
    regrouped: list[str] = field(default_factory=list)  # calls moved into, out of or between fusion regions

    def marks(self) -> dict[str, str]:
        out = {n: "added" for n in self.added}
        out.update({n: "removed" for n in self.removed})
        out.update({n: "changed" for n in self.changed})
        return out


def graph_diff(before: Graph, after: Graph) -> GraphDiff:
    """Which nodes a pass added, removed or changed, matched by stable id (renames are not changes).

    A call is changed when what it computes or which executor runs it changed; ``executor`` names
    those whose executor assignment changed and ``regrouped`` the calls a pass moved into, out of or
    between fusion regions (with ``expand_regions`` graphs, where fusing keeps each member's id)."""
    calls_b = {k: n for k, n in before.nodes.items() if n.kind != "output"}
    calls_a = {k: n for k, n in after.nodes.items() if n.kind != "output"}
    added = [k for k in calls_a if k not in calls_b]
    removed = [k for k in calls_b if k not in calls_a]
    changed = [k for k in calls_a if k in calls_b and calls_a[k].signature != calls_b[k].signature]
    executor = [k for k in changed if calls_a[k].executor != calls_b[k].executor]
    regrouped = [k for k in calls_a if k in calls_b and calls_a[k].group != calls_b[k].group]
    return GraphDiff(added, removed, changed, executor, regrouped)


def graph_from_payload(data: dict) -> Graph:
    """A graph as a payload keeps it (``{"nodes": [...], "edges": [...]}``; see ``serialize``), e.g. from a file.

    The payload does not keep what each call computes (``Node.signature``), so ``graph_diff`` between two such
    graphs sees additions and removals but not changes; the payload's own ``changes`` have those.
    """
    nodes = {}
    for n in data["nodes"]:
        nodes[n["id"]] = Node(n["id"], n["label"], n["kind"], executor=n.get("executor"), source=n.get("source"),
                              group=n.get("group"), scope=n.get("scope"), derived_from=n.get("derived_from"),
                              outputs=[tuple(o) for o in n.get("outputs", [])])
    return Graph(nodes, [Edge(e["src"], e["dst"], e["value"], e["type"]) for e in data["edges"]])
