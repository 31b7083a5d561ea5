"""The modules of staticsched form a strict stack: each package imports only the layers below
it (:data:`LAYERS`, drawn in docs/design.md), and no modules import each other in a circle.

Every ``import``/``from ... import`` anywhere in a module (at the top, inside a function, or
under ``if TYPE_CHECKING:``, which would hide a circle the annotations still have) is an
edge. ``from pkg import sub``
of a submodule is an edge to the submodule (Python runs the package's ``__init__`` first, as
for any submodule, which every module of a package does); ``from pkg import name`` of anything
else is an edge to the package. A call of ``importlib.import_module`` (the task-kind registry)
is an edge to every submodule of the caller's package that a string in the caller names. The
verifier must not reach the solver or the sync planner, and every module is imported by some
module of the package (nothing in it is there for the tests alone).
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
from common import PACKAGE

ROOT = PACKAGE


def _modules() -> dict[str, Path]:
    out = {}
    for p in sorted(ROOT.rglob("*.py")):
        if (ROOT / "examples") in p.parents:  # shipped example data (its generator scripts), not code
            continue
        parts = list(p.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


#: the stack, bottom first: a unit (a top-level module, or a package with its submodules)
#: imports only units of lower layers; units of one layer do not import each other
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "options", "progress"),
    ("_fields", "_atomic", "_workers", "_gc"),
    ("shipped",),
    ("model",),
    ("tasks",),
    ("frontend",),
    ("formats",),
    ("solver", "emit", "verify"),
    ("pipeline",),
    ("explore",),
    ("api", "onnx"),
    ("", "hwtable"),  # "": the package's own __init__
    ("cli",),
    ("__main__",),
)


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def import_graph() -> nx.DiGraph:
    mods = _modules()
    g = nx.DiGraph()
    g.add_nodes_from(mods)
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    targets.append(sub if sub in mods else base)
            if isinstance(node, ast.Call) and _calls_import_module(node):
                targets = [f"{package}.{c}" for c in _strings(tree)]
            for t in targets:
                if t in mods and t != name:
                    g.add_edge(name, t)
    return g


def _calls_import_module(node: ast.Call) -> bool:
    f = node.func
    return (isinstance(f, ast.Name) and f.id == "import_module") or (
        isinstance(f, ast.Attribute) and f.attr == "import_module"
    )


def _strings(tree: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def test_no_import_circles():
    cycles = sorted(sorted(c) for c in nx.simple_cycles(import_graph()))
    assert cycles == [], "\n".join(" -> ".join(c) for c in cycles)


def test_every_import_runs_down_the_stack():
    layer = {u: k for k, units in enumerate(LAYERS) for u in units}
    g = import_graph()
    unplaced = sorted({_unit(n) for n in g.nodes} - set(layer))
    assert unplaced == [], f"units in no layer of LAYERS: {unplaced}"
    upward = sorted(f"{a} -> {b} ({_unit(a) or 'staticsched'} is layer {layer[_unit(a)]}, "
                    f"{_unit(b) or 'staticsched'} layer {layer[_unit(b)]})"
                    for a, b in g.edges
                    if _unit(a) != _unit(b) and layer[_unit(a)] <= layer[_unit(b)])
    assert upward == [], "\n".join(upward)


def test_the_verifier_does_not_reach_the_producer():
    # a verifier that imports the solver or the sync planner could trust them: here every
    # module the verifier package can load (each import also runs its parents' __init__) is
    # checked, lazy imports included
    g = import_graph()
    for name in list(g.nodes):
        for parent in _parents(name):
            for src in list(g.predecessors(name)):
                if not name.startswith(src + ".") and src not in _parents(name):
                    g.add_edge(src, parent)
    reach = nx.descendants(g, "staticsched.verify")
    banned = sorted(m for m in reach if m.startswith(("staticsched.solver", "staticsched.emit")))
    assert banned == [], banned


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:k]) for k in range(2, len(parts))]


def test_dynamic_imports_are_edges():
    # the task kinds are imported by name through the registry
    kinds = {"matmul", "elementwise", "rowwise", "attention"}
    assert {f"staticsched.tasks.{k}" for k in kinds} <= set(import_graph().successors("staticsched.tasks"))


def test_every_module_is_imported_by_the_package():
    g = import_graph()
    packages = {n.rpartition(".")[0] for n in g.nodes}
    entry = {"staticsched", "staticsched.__main__"}
    unused = sorted(n for n in g.nodes if g.in_degree(n) == 0 and n not in entry | packages)
    assert unused == [], f"modules only the tests (or nothing) import: {unused}"
