"""Architecture rules of src/smdist_launcher, read from the source with ``ast`` (nothing is imported).

What counts as an import: every ``import x`` / ``from x import y`` statement that names a module of this package
(absolute or relative; ``from pkg import sub`` is an edge to ``pkg.sub`` when that is a module, else to ``pkg``).
Each one has a kind:

- ``module``: runs when the importing module is imported (top level, also inside module-level ``if``/``try``/
  ``with`` blocks and class bodies);
- ``function``: inside a ``def`` or ``lambda``: runs only when the function is called (a lazy import);
- ``type``: under ``if TYPE_CHECKING:``: never runs.

Modules of ``compat/site`` run as top-level modules of the user's interpreter (that directory is put on its
PYTHONPATH), so ``import _smdist_path`` there is an edge to ``compat/site/_smdist_path.py``.
``importlib.import_module("...")`` strings are not followed.

(a) No import circles, counted on all three kinds: a lazy import inside a function defers a dependency but does not
    remove it (two modules that need each other are one module, or share a piece that belongs lower), and a
    type-only import is a dependency a type checker follows. An import names its target only, not the target's
    parent packages (those are imported first anyway). ``KNOWN_CIRCLES`` lists the circles another change is
    breaking right now, each with its reason; a listed circle that is gone must leave the list.
(b) No upward imports between top-level packages, by the layer order in ``LAYERS`` (low to high), counted on all
    three kinds. Within the runtime layer only ``RUNTIME_EDGES`` are allowed; ``LAZY_ONLY`` pairs may import
    downward only lazily (function-level or type-only); ``ALLOWED`` lists single accepted exceptions, each with
    its reason. The package root (``smdist_launcher/__init__.py``) is a lazy facade above every layer: nothing
    imports it (``package_info`` holds the version and the import root), and it imports the package only under
    TYPE_CHECKING.
(c) Job states and phases are enums (``backends.states.JobState``, ``backends.phases.Phase``): no string literal
    spells one of their values outside their definitions (``LITERAL_ALLOWED`` lists the words that are something
    else there, e.g. a folder named "staging").
"""
from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "smdist_launcher"
SITE = f"{PACKAGE}.compat.site"  # its modules are top-level modules at run time (see the docstring)

# Low to high: a package may import packages of its own layer only where stated (RUNTIME_EDGES), and of lower
# layers freely. Derived from the imports of today's tree (see the report of the change that added this file).
LAYERS: list[tuple[str, frozenset[str]]] = [
    ("shared", frozenset({"errors", "contract", "package_info"})),  # exceptions, the SageMaker contract, the version
    ("jobspec", frozenset({"jobspec"})),  # what a job is: the schema, job files, validation rules
    ("plan", frozenset({"plan"})),  # a job spec -> a launch plan
    ("runtime", frozenset({"compat", "smddp", "smp", "container", "metrics"})),  # runs inside training containers
    ("backends", frozenset({"backends"})),  # where a plan runs: local, docker, slurm, SageMaker...
    ("estimators", frozenset({"estimators"})),  # the SageMaker-SDK-shaped API: spec -> plan -> backend
    ("train", frozenset({"train"})),  # SageMaker SDK v3's module paths (sagemaker.train.*) over the estimators
    ("serve", frozenset({"serve"})),  # the HTTP service
    ("cli", frozenset({"cli"})),  # the command line
]
# Imports between runtime packages that are part of the design (importer, imported): reason.
RUNTIME_EDGES: dict[tuple[str, str], str] = {
    ("container", "compat"): "the container's environment puts compat's site dir on the user processes' PYTHONPATH",
    ("smp", "compat"): "smp v1 reports compat's SMP_V1_VERSION as smdistributed.modelparallel's __version__",
}
# Downward imports that must stay lazy (function-level or type-only): reason.
LAZY_ONLY: dict[tuple[str, str], str] = {
    ("estimators", "backends"): "building an estimator must not load the backends (boto3, docker...): "
                                "fit() picks and imports one",
}
# Single accepted exceptions to (b): (importing module, imported module): reason. Keep it small.
ALLOWED: dict[tuple[str, str], str] = {}
# Circles another change is breaking right now: their members (a circle found must lie within one) -> reason.
KNOWN_CIRCLES: dict[frozenset[str], str] = {}


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    file: str  # of the importing module, relative to the repository
    line: int
    kind: str  # "module", "function" or "type"

    def where(self) -> str:
        return f"{self.file}:{self.line}"


def module_names(src: Path, package: str) -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package's __init__), for every module of ``package`` under ``src``."""
    out: dict[str, tuple[Path, bool]] = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        out[".".join(parts)] = (path, is_package)
    return out


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A file's syntax tree, parsed once for every check."""
    return ast.parse(path.read_text(), str(path))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(module: str, modules: dict[str, tuple[Path, bool]], src: Path, package: str,
               site: str | None = None) -> list[Edge]:
    """The edges from ``module`` to other modules of ``package`` (see the module docstring for the kinds)."""
    path, is_package = modules[module]
    parent = module if is_package else module.rpartition(".")[0]
    file = str(path.relative_to(src.parent))
    edges: list[Edge] = []

    def existing(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    def absolute(name: str) -> str:
        if site and module.startswith(site + ".") and f"{site}.{name.split('.')[0]}" in modules:
            return f"{site}.{name}"  # a top-level module of the site dir
        return name

    def add(target: str | None, node: ast.stmt, kind: str) -> None:
        if target is not None and target != module:
            edges.append(Edge(module, target, file, node.lineno, kind))

    def visit(node: ast.AST, kind: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    visit_one(stmt, "type")
                for stmt in child.orelse:
                    visit_one(stmt, kind)
            else:
                visit_one(child, kind)

    def visit_one(node: ast.AST, kind: str) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(existing(absolute(alias.name)), node, kind)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = parent.split(".")[: len(parent.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = absolute(node.module or "")
            if source == package or source.startswith(package + "."):
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    add(sub if sub in modules else existing(source), node, kind)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and kind == "module":
            kind = "function"
        visit(node, kind)

    visit(_tree(path), "module")
    return edges


def all_imports(src: Path, package: str, site: str | None = None) -> tuple[dict[str, tuple[Path, bool]], list[Edge]]:
    modules = module_names(src, package)
    return modules, [edge for name in modules for edge in imports_of(name, modules, src, package, site)]


MODULES, EDGES = all_imports(SRC, PACKAGE, SITE)


# ---- (a) cycles ----------------------------------------------------------------------------------------------
def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
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
                    out.append(sorted(component))
    return out


def _shortest_cycle(start: str, graph: dict[str, set[str]], members: set[str]) -> list[str]:
    """start -> ... -> start within the component (breadth first)."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    return [start]


def import_cycles(modules: dict[str, tuple[Path, bool]], edges: list[Edge],
                  known: dict[frozenset[str], str] | None = None) -> list[str]:
    """One report per circle (every import kind; imports of the package root are (b)'s to judge): a shortest chain
    through it, each step with its file:line and kind, and its other members. A circle within a `known` one is
    left out."""
    root = min(modules, key=len)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    where: dict[tuple[str, str], Edge] = {}
    for edge in sorted(edges, key=lambda e: ("module", "function", "type").index(e.kind)):
        if edge.target != root:
            graph[edge.source].add(edge.target)
            where.setdefault((edge.source, edge.target), edge)
    reports = []
    for component in _strongly_connected(graph):
        if any(set(component) <= members for members in (known or {})):
            continue
        cycle = _shortest_cycle(component[0], graph, set(component))
        steps = "\n".join(f"    {a} -> {b}  ({where[a, b].where()}, {where[a, b].kind}-level)"
                          for a, b in zip(cycle, cycle[1:], strict=False))
        others = sorted(set(component) - set(cycle))
        more = f"\n    (also in this circle: {', '.join(others)})" if others else ""
        reports.append(f"  {' -> '.join(cycle)}\n{steps}{more}")
    return reports


def test_no_import_circles() -> None:
    cycles = import_cycles(MODULES, EDGES, KNOWN_CIRCLES)
    assert not cycles, (f"{len(cycles)} import circle(s), lazy and type-only imports included (move the shared "
                        "piece to a module both sides may import):\n" + "\n".join(cycles))


def test_known_circles_are_still_there() -> None:
    """A circle that was broken leaves KNOWN_CIRCLES (and stays broken: test_no_import_circles)."""
    found = [set(c) for c in _strongly_connected(_graph(MODULES, EDGES))]
    gone = [reason for members, reason in KNOWN_CIRCLES.items() if not any(c <= members for c in found)]
    assert not gone, f"remove from KNOWN_CIRCLES, these circles are gone: {gone}"


def _graph(modules: dict[str, tuple[Path, bool]], edges: list[Edge]) -> dict[str, set[str]]:
    root = min(modules, key=len)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for edge in edges:
        if edge.target != root:
            graph[edge.source].add(edge.target)
    return graph


# ---- (b) layers ----------------------------------------------------------------------------------------------
def top_package(module: str) -> str | None:
    """``backends`` for smdist_launcher.backends.local.job; ``errors`` for smdist_launcher.errors; None: the root."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


LAYER_OF: dict[str, int] = {pkg: i for i, (_, members) in enumerate(LAYERS) for pkg in members}


def layer_violations(edges: list[Edge]) -> list[str]:
    out = []
    for edge in edges:
        low, high = top_package(edge.target), top_package(edge.source)
        if high is None:  # the root facade
            if edge.kind != "type":
                out.append(f"{edge.where()}: the package root imports {edge.target} ({edge.kind}-level); "
                           "only under TYPE_CHECKING (it loads exports lazily)")
            continue
        if (edge.source, edge.target) in ALLOWED:
            continue
        if low is None:  # the root: above every layer
            out.append(f"{edge.where()}: {edge.source} imports the package root ({edge.kind}-level), which sits "
                       "above every layer: import the module that defines the name (package_info for the version "
                       "and the import root)")
            continue
        if low == high:
            continue
        imported, importer = LAYER_OF[low], LAYER_OF[high]
        text = f"{edge.where()}: {edge.source} -> {edge.target} ({edge.kind}-level): "
        if imported > importer:
            out.append(text + f"{high} ({LAYERS[importer][0]} layer) imports upward into {low} "
                       f"({LAYERS[imported][0]} layer)")
        elif imported == importer and (high, low) not in RUNTIME_EDGES:
            out.append(text + f"{high} -> {low} is not one of the allowed imports within the "
                       f"{LAYERS[importer][0]} layer")
        elif (high, low) in LAZY_ONLY and edge.kind == "module":
            out.append(text + f"must be lazy (inside the function that needs it): {LAZY_ONLY[high, low]}")
    return out


def test_every_top_level_package_has_a_layer() -> None:
    packages = {top_package(name) for name in MODULES} - {None}
    assert packages == set(LAYER_OF), f"give each package a layer: {sorted(packages ^ set(LAYER_OF))}"


def test_allowlists_name_real_imports() -> None:
    """Stale entries go: every exception must still be needed."""
    pairs = {(e.source, e.target) for e in EDGES}
    packages = {(top_package(e.source), top_package(e.target)) for e in EDGES}
    assert not set(ALLOWED) - pairs, sorted(set(ALLOWED) - pairs)
    assert not set(RUNTIME_EDGES) - packages, sorted(set(RUNTIME_EDGES) - packages)
    assert all(reason for reason in [*ALLOWED.values(), *RUNTIME_EDGES.values(), *LAZY_ONLY.values()])


def test_no_upward_imports_between_packages() -> None:
    violations = layer_violations(EDGES)
    order = " < ".join(f"{name} ({', '.join(sorted(members))})" for name, members in LAYERS)
    assert not violations, (f"{len(violations)} import(s) against the layer order {order}:\n  "
                            + "\n  ".join(violations))


def test_the_checker_itself(tmp_path: Path) -> None:
    """Each import kind, a circle and an upward import, on a small made-up package."""
    files = {
        "__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .cli import main\n",
        "errors.py": "",
        "jobspec/__init__.py": "from . import a\n",
        "jobspec/a.py": "from .b import thing\ntry:\n    import pkg.errors\nexcept ImportError:\n    pass\n",
        "jobspec/b.py": "import pkg.jobspec.a\n\ndef f():\n    from ..plan import model\n",
        "plan/__init__.py": "",
        "plan/model.py": "from ..jobspec import a\n",
        "cli/__init__.py": "",
        "cli/main.py": "def main():\n    from .. import errors\n    from pkg import jobspec\n",
    }
    for name, text in files.items():
        (tmp_path / "pkg" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "pkg" / name).write_text(text)
    modules, edges = all_imports(tmp_path, "pkg")
    kinds = {(e.source, e.target): e.kind for e in edges}
    assert kinds == {("pkg", "pkg.cli.main"): "type", ("pkg.jobspec", "pkg.jobspec.a"): "module",
                     ("pkg.jobspec.a", "pkg.jobspec.b"): "module", ("pkg.jobspec.a", "pkg.errors"): "module",
                     ("pkg.jobspec.b", "pkg.jobspec.a"): "module", ("pkg.jobspec.b", "pkg.plan.model"): "function",
                     ("pkg.plan.model", "pkg.jobspec.a"): "module", ("pkg.cli.main", "pkg.errors"): "function",
                     ("pkg.cli.main", "pkg.jobspec"): "function"}
    cycles = import_cycles(modules, edges)  # a <-> b, and b -> plan.model -> a through a lazy import: one circle
    assert len(cycles) == 1 and "pkg.jobspec.a -> pkg.jobspec.b -> pkg.jobspec.a" in cycles[0], cycles
    assert "pkg/jobspec/a.py:1, module-level" in cycles[0] and "also in this circle: pkg.plan.model" in cycles[0]
    assert import_cycles(modules, edges, {frozenset({"pkg.jobspec.a", "pkg.jobspec.b", "pkg.plan.model"}): "x"}) == []
    violations = layer_violations(edges)
    assert len(violations) == 1 and ("pkg/jobspec/b.py:4: pkg.jobspec.b -> pkg.plan.model (function-level): "
                                     "jobspec (jobspec layer) imports upward into plan") in violations[0], violations


def test_a_circle_through_lazy_imports_only_is_found(tmp_path: Path) -> None:
    """smp/v1/state.py imported comm.py inside a method while comm.py imported state.py: a circle all the same."""
    files = {"__init__.py": "", "smp/__init__.py": "", "smp/comm.py": "from .state import state\n",
             "smp/state.py": "state = 1\n\ndef gather():\n    from .comm import allgather\n",
             "cli/__init__.py": "", "cli/main.py": "def version():\n    from .. import __version__\n"}
    for name, text in files.items():
        (tmp_path / "pkg" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "pkg" / name).write_text(text)
    modules, edges = all_imports(tmp_path, "pkg")
    cycles = import_cycles(modules, edges)
    assert len(cycles) == 1 and "pkg/smp/state.py:4, function-level)" in cycles[0]
    assert any("pkg.cli.main imports the package root (function-level)" in v for v in layer_violations(edges))


# ---- (c) states and phases are enums -------------------------------------------------------------------------------
STATE_ENUMS = {"JobState": SRC / PACKAGE / "backends" / "states.py", "Phase": SRC / PACKAGE / "backends" / "phases.py"}
# A value of theirs that means something else where it is written: (file, value) -> what it is there.
LITERAL_ALLOWED: dict[tuple[str, str], str] = {
    ("src/smdist_launcher/backends/toolkit/jobdir.py", "staging"): "the job folder's staging/ subfolder",
}
# Files still being converted by another change: file -> reason. Each must still hold such a literal.
LITERAL_PENDING: dict[str, str] = {}


def enum_values(path: Path, name: str) -> dict[str, str]:
    """value -> member of the enum class `name` in `path`, read from its class body."""
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return {stmt.value.value: f"{name}.{target.id}" for stmt in node.body if isinstance(stmt, ast.Assign)
                    and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)
                    for target in stmt.targets if isinstance(target, ast.Name)}
    raise AssertionError(f"no class {name} in {path}")


def _is_enum_class(node: ast.ClassDef) -> bool:
    return any("Enum" in ast.unparse(base) for base in node.bases)


def spelled_literals(src: Path, package: str, words: dict[str, str]) -> list[tuple[str, int, str]]:
    """(file, line, value) of every string literal equal to one of `words`, outside docstrings and the bodies of
    enum classes (where enums, theirs and others such as SageMaker's secondary statuses, are defined)."""
    found = []
    for path in sorted((src / package).rglob("*.py")):
        tree = _tree(path)
        skip: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body \
                    and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
                skip.add(id(node.body[0].value))  # a docstring
            if isinstance(node, ast.ClassDef) and _is_enum_class(node):
                skip.update(id(n) for stmt in node.body if isinstance(stmt, ast.Assign) for n in ast.walk(stmt))
        file = str(path.relative_to(src.parent))
        found += [(file, node.lineno, node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in words
                  and id(node) not in skip]
    return sorted(found)


WORDS = {value: member for name, path in STATE_ENUMS.items() for value, member in enum_values(path, name).items()}


@functools.lru_cache(maxsize=1)
def _spelled() -> list[tuple[str, int, str]]:
    return spelled_literals(SRC, PACKAGE, WORDS)


def test_states_and_phases_are_never_spelled_as_strings() -> None:
    found = _spelled()
    bad = [f"{file}:{line}: {value!r} (use {WORDS[value]})" for file, line, value in found
           if (file, value) not in LITERAL_ALLOWED and file not in LITERAL_PENDING]
    assert not bad, (f"{len(bad)} job state(s) or phase(s) spelled as a string (a typo there is a silent bug; the "
                     "enum's member compares equal to the value read back from job.json):\n  " + "\n  ".join(bad))


def test_literal_allowlists_are_still_needed() -> None:
    found = _spelled()
    assert not set(LITERAL_ALLOWED) - {(file, value) for file, _, value in found}, sorted(LITERAL_ALLOWED)
    assert not set(LITERAL_PENDING) - {file for file, _, _ in found}, sorted(LITERAL_PENDING)


def test_the_literal_check_itself(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text(
        '"""running"""\nfrom enum import Enum\n\n\nclass Status(str, Enum):\n    RUNNING = "running"\n\n\n'
        'def f(phase):\n    """done"""\n    return phase == "running" or f"{phase} running" or {"done": 1}\n')
    assert spelled_literals(tmp_path, "pkg", {"running": "Phase.RUNNING", "done": "Phase.DONE"}) == [
        (f"{tmp_path.name}/pkg/a.py", 11, "done"), (f"{tmp_path.name}/pkg/a.py", 11, "running")]
