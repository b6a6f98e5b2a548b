"""Imports run one way: no cycle among thunderlab's modules, no private name imported across modules.

The graph is built from the source (the AST of every module), not by importing, so an import
inside a function counts as much as one at the top: a lazy import that goes up a layer is
still a cycle a reader has to hold in their head. Only imports under ``if TYPE_CHECKING:`` are
left out: they never run and exist for annotations alone.
"""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "thunderlab"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Every Import/ImportFrom node, skipping ``if TYPE_CHECKING:`` bodies."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def edges() -> list[tuple[str, str, str]]:
    """(importer, imported module, name) for every import of a thunderlab module by another."""
    out = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        for node in _imports(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in MODULES:
                        out.append((module, a.name, ""))
                continue
            target = _resolve(module, path, node)
            if target.split(".")[0] != "thunderlab":
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                if sub in MODULES:  # ``from thunderlab.ops import prims`` imports the module prims
                    out.append((module, sub, ""))
                elif target in MODULES:
                    out.append((module, target, a.name))
    return out


def import_graph() -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(MODULES)
    g.add_edges_from((a, b) for a, b, _ in edges() if a != b)
    return g


def cycles(only=None) -> list[list[str]]:
    """The strongly connected groups of modules (each one or more cycles), optionally those touching ``only``."""
    found = [sorted(c) for c in nx.strongly_connected_components(import_graph()) if len(c) > 1]
    if only is not None:
        found = [c for c in found if any(only(m) for m in c)]
    return sorted(found)


def _in_ops(module: str) -> bool:
    return module == "thunderlab.ops" or module.startswith("thunderlab.ops.")


def _describe(groups) -> str:
    g = import_graph()
    lines = []
    for group in groups:
        sub = g.subgraph(group)
        lines.append(" <-> ".join(group) + ":  " + "; ".join(f"{a} -> {b}" for a, b in sorted(sub.edges)))
    return "\n".join(lines)


def test_the_graph_sees_lazy_and_relative_imports():
    found = {(a, b) for a, b, _ in edges()}
    assert ("thunderlab.core.trace", "thunderlab.core.symbols") in found  # relative, at the top
    assert ("thunderlab.api", "thunderlab.runtime.profile") in found  # inside a function
    assert not any(b == "thunderlab.core.trace" for a, b in found if a == "thunderlab.core.codegen")  # TYPE_CHECKING


def test_no_import_cycle_outside_ops():
    groups = cycles(only=lambda m: not _in_ops(m))
    assert not groups, "import cycles among thunderlab's modules:\n" + _describe(groups)


# The op modules on their own: declaration tables (declare, rules) below the op families, the
# families below the index (torch_ops) and the torch -> symbol mapping.
def test_no_import_cycle_in_ops():
    groups = cycles(only=_in_ops)
    assert not groups, "import cycles among thunderlab's modules:\n" + _describe(groups)


def private_imports(only) -> list[str]:
    return [f"{a} imports {name} from {b}" for a, b, name in edges()
            if name.startswith("_") and not name.startswith("__") and a != b and only(a)]


def test_no_private_name_imported_from_another_module():
    bad = private_imports(lambda m: not _in_ops(m))
    assert not bad, "private names crossing modules (give them a public name in one module):\n" + "\n".join(bad)


# the op modules share helpers (_convert, _is_t, _new, ...) by their private names; see the cycle above
def test_no_private_name_imported_within_ops():
    bad = private_imports(_in_ops)
    assert not bad, "private names crossing modules (give them a public name in one module):\n" + "\n".join(bad)


def test_no_module_patches_other_code_at_run_time():
    """Production code never uses unittest.mock: patching another library's code is process-wide state."""
    users = sorted(a for a, path in MODULES.items()
                   for node in _imports(ast.parse(path.read_text()))
                   if any(n.startswith("unittest") for n in
                          ([x.name for x in node.names] if isinstance(node, ast.Import) else [node.module or ""])))
    assert not users, f"modules importing unittest(.mock): {users}"


# DESIGN.md's layers, read from the bottom: a module never imports one of a higher layer, lazily or not.
# inspect sits beside ops and reads only core (a record is data; the verbs that act on it live beside api).
LAYERS = {"core": 0, "ops": 1, "inspect": 1, "executors": 2, "passes": 3, "runtime": 4, "frontend": 5, "api": 6,
          "verbs": 6, "cli": 7, "jupyter": 7}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def test_layers_import_only_downwards():
    up = sorted({f"{a} -> {b}" for a, b, _ in edges()
                 if _layer(a) and _layer(b)
                 and (LAYERS[_layer(b)] > LAYERS[_layer(a)]
                      or (_layer(a) == "inspect" and _layer(b) not in ("inspect", "core")))})
    assert not up, "imports that go up a layer (see DESIGN.md, 'Imports run one way'):\n" + "\n".join(up)


def _all_imports(tree: ast.AST):
    """Every Import/ImportFrom node, ``if TYPE_CHECKING:`` bodies included."""
    return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def test_no_circle_in_inspect_even_for_annotations():
    """The record, its payload, its report and its saved form: no two import each other, not even for annotations
    (a record is data at the bottom; the views that read it sit above, or are read by it without reading it)."""
    g = nx.DiGraph()
    for module, path in MODULES.items():
        if not module.startswith("thunderlab.inspect"):
            continue
        for node in _all_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                target = _resolve(module, path, node)
                for a in node.names:
                    sub = f"{target}.{a.name}"
                    hit = sub if sub in MODULES else target if target in MODULES else None
                    if hit and hit.startswith("thunderlab.inspect") and hit != module:
                        g.add_edge(module, hit)
    groups = [sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1]
    assert not groups, f"import circles in thunderlab/inspect (annotations included): {groups}"
