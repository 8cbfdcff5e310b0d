"""The package's imports run one way: down the layers, and never in a circle.

Every module under src/cuzk is parsed (ast, nothing is imported) and each of its imports of another
cuzk module is an edge, wherever it stands (module level or inside a function: a lazy import still
ties the two modules together); only imports under `if TYPE_CHECKING:` are exempt, being for the
type checker alone. An edge from a module to one on a higher floor of `LAYERS` fails the test, and
so does any circle: between modules (a package's `__init__` counts as a module), and between the
packages of one floor (curve, r1cs and hashes may use one another one way only).
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Iterable
from functools import cache
from pathlib import Path

#: The floors, lowest first. A module may import modules of its own floor and of the floors below.
#: `cuzk` itself (its `__init__`), `cuzk.errors`, `cuzk.kinds` and `cuzk.config` are the ground floor.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("", "errors", "kinds", "config"),
    ("field",),
    ("curve", "r1cs", "hashes"),
    ("gadgets", "filecoin"),
    ("witness_gen",),
    ("groth16",),
    ("circuits",),
    ("backends",),
    ("engine",),
    ("providers",),  # circuit plug-ins
    ("server",),
    ("daemon", "bench"),
    ("cli",),
)

#: The violations left inside engine/: none since the circuit plug-ins moved out of the engine (issue
#: 27, item 1); nothing else may stand here, and the list only shrinks. Each entry is written as
#: `violations()` reports it: a cycle ("cycle: " and its modules, sorted) or an upward import
#: ("a -> b"). An entry that no longer occurs is reported as a warning, to be removed.
KNOWN_ENGINE_VIOLATIONS: frozenset[str] = frozenset()

SRC = Path(__file__).resolve().parent.parent / "src" / "cuzk"
FLOOR = {package: floor for floor, packages in enumerate(LAYERS) for package in packages}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _package(module: str) -> str:
    """The top-level subpackage (or module) of `cuzk` that `module` belongs to; "" for `cuzk` itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the import nodes inside `if TYPE_CHECKING:` bodies."""
    exempt: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            exempt.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return exempt


def _imported(module: str, is_package: bool, node: ast.Import | ast.ImportFrom, modules: set[str]) -> set[str]:
    """The cuzk modules an import statement loads (a name imported from a package, if it is a
    submodule, is that submodule; otherwise the package)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[:len(base) - node.level + 1]
            origin = ".".join([*base, *([node.module] if node.module else [])])
        else:
            origin = node.module or ""
        names = [origin, *(f"{origin}.{alias.name}" for alias in node.names)]
    found = set()
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name.split(".")[0] == "cuzk" and name != module:
            found.add(name)
    return found


@cache
def import_graph() -> dict[str, frozenset[str]]:
    """cuzk module -> the cuzk modules it imports (TYPE_CHECKING-only imports left out)."""
    paths = {_module_name(p): p for p in SRC.rglob("*.py") if "_gen" not in p.relative_to(SRC).parts}
    modules = set(paths)
    graph = {}
    for module, path in paths.items():
        tree = ast.parse(path.read_text(), str(path))
        exempt = _type_checking_only(tree)
        edges: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in exempt:
                edges |= _imported(module, path.name == "__init__.py", node, modules)
        graph[module] = frozenset(edges)
    return graph


def _cycles(graph: dict[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(graph.get(target, ()))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def violations() -> set[str]:
    graph = import_graph()
    found = set()
    for module, targets in graph.items():
        for target in targets:
            if FLOOR[_package(target)] > FLOOR[_package(module)]:
                found.add(f"{module} -> {target}")
    found |= {"cycle: " + ", ".join(cycle) for cycle in _cycles(graph)}
    same_floor: dict[str, set[str]] = {}
    for module, targets in graph.items():
        for target in targets:
            a, b = _package(module), _package(target)
            if a != b and FLOOR[a] == FLOOR[b]:
                same_floor.setdefault(a, set()).add(b)
    found |= {"package cycle: " + ", ".join(cycle) for cycle in _cycles(same_floor)}
    return found


def test_every_package_has_a_floor() -> None:
    missing = sorted({_package(module) for module in import_graph()} - set(FLOOR))
    assert not missing, f"add these packages to LAYERS: {missing}"


def test_known_violations_are_inside_the_engine() -> None:
    for entry in KNOWN_ENGINE_VIOLATIONS:
        modules = entry.removeprefix("cycle: ").replace(" -> ", ", ").split(", ")
        assert all(m.startswith("cuzk.engine.") for m in modules), entry


def test_imports_run_down_the_layers_without_cycles() -> None:
    found = violations()
    new = sorted(found - KNOWN_ENGINE_VIOLATIONS)
    assert not new, "imports against the layers (upward, or in a circle):\n  " + "\n  ".join(new)
    gone = sorted(KNOWN_ENGINE_VIOLATIONS - found)
    if gone:
        warnings.warn("no longer found, remove from KNOWN_ENGINE_VIOLATIONS: " + "; ".join(gone), stacklevel=1)


def test_the_check_sees_cycles_and_upward_imports() -> None:
    assert _cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import cuzk.cli\nimport cuzk.errors\n")
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import) and id(n) not in _type_checking_only(tree)]
    assert [alias.name for n in imports for alias in n.names] == ["cuzk.errors"]
    modules = {"cuzk", "cuzk.r1cs", "cuzk.r1cs.lc", "cuzk.errors"}
    relative = ast.parse("from .lc import x\nfrom . import lc\nfrom ..errors import E\n").body
    assert [_imported("cuzk.r1cs", True, n, modules) for n in relative] == [
        {"cuzk.r1cs.lc"}, {"cuzk.r1cs.lc"}, {"cuzk.errors"}]
    assert _imported("cuzk.r1cs.lc", False, relative[1], modules) == {"cuzk.r1cs"}


#: What names a proof kind: the cuzk.v1 enum's names and labels, and the Filecoin words its payloads
#: are made of. The engine carries a kind and a payload without reading either.
_KIND_WORDS = re.compile(r"POREP|SNAP_DEALS|WINDOW_POST|WINNING_POST|porep|snap-update|window-post|winning-post"
                         r"|PoRep|PoSt|SnapDeals|Filecoin|filecoin|[Ss]ector|vanilla|Curio")


def test_the_engine_names_no_proof_kind() -> None:
    found = [f"{path.relative_to(SRC)}:{n}: {line.strip()}"
             for path in sorted((SRC / "engine").rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if _KIND_WORDS.search(line)]
    assert not found, "the engine names a proof kind:\n  " + "\n  ".join(found)
