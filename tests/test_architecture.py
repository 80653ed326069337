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

(a) No import cycles, counted on ``module`` imports only: a lazy import inside a function is the accepted way to
    defer a dependency (it runs once every module involved has finished importing), and type-only imports never run.
    An import names its target only, not the target's parent packages (those are imported first anyway).
(b) No upward imports between top-level packages, by the layer order in ``LAYERS`` (low to high), counted on all
    three kinds. Within the runtime layer only ``RUNTIME_EDGES`` are allowed; ``LAZY_ONLY`` pairs may import
    downward only lazily (function-level or type-only); ``ALLOWED`` lists single accepted exceptions, each with
    its reason. The package root (``smdist_launcher/__init__.py``) is a lazy facade, outside the layers: anything
    may import it (``__version__``), and it may import the package only under TYPE_CHECKING.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "smdist_launcher"
SITE = f"{PACKAGE}.compat.site"  # its modules are top-level modules at run time (see the docstring)

# Low to high: a package may import packages of its own layer only where stated (RUNTIME_EDGES), and of lower
# layers freely. Derived from the imports of today's tree (see the report of the change that added this file).
LAYERS: list[tuple[str, frozenset[str]]] = [
    ("shared", frozenset({"errors", "contract"})),  # exceptions and the SageMaker contract: no dependencies
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

    visit(ast.parse(path.read_text(), str(path)), "module")
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


def module_level_cycles(modules: dict[str, tuple[Path, bool]], edges: list[Edge]) -> list[str]:
    """One report per circle: a shortest chain through it, each step with its file:line, and its other members."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    where: dict[tuple[str, str], Edge] = {}
    for edge in edges:
        if edge.kind == "module":
            graph[edge.source].add(edge.target)
            where.setdefault((edge.source, edge.target), edge)
    reports = []
    for component in _strongly_connected(graph):
        cycle = _shortest_cycle(component[0], graph, set(component))
        steps = "\n".join(f"    {a} -> {b}  ({where[a, b].where()})" for a, b in zip(cycle, cycle[1:], strict=False))
        others = sorted(set(component) - set(cycle))
        more = f"\n    (also in this circle: {', '.join(others)})" if others else ""
        reports.append(f"  {' -> '.join(cycle)}\n{steps}{more}")
    return reports


def test_no_import_cycles_at_module_level() -> None:
    cycles = module_level_cycles(MODULES, EDGES)
    assert not cycles, (f"{len(cycles)} import circle(s) among module-level imports (move the shared piece to a "
                        "module both sides may import; a lazy import inside a function is the way to defer):\n"
                        + "\n".join(cycles))


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
        if low is None or low == high or (edge.source, edge.target) in ALLOWED:
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
    cycles = module_level_cycles(modules, edges)  # a <-> b; b -> plan.model -> a is lazy: not a circle
    assert len(cycles) == 1 and "pkg.jobspec.a -> pkg.jobspec.b -> pkg.jobspec.a" in cycles[0], cycles
    assert "pkg/jobspec/a.py:1" in cycles[0] and "pkg/jobspec/b.py:1" in cycles[0]
    violations = layer_violations(edges)
    assert len(violations) == 1 and ("pkg/jobspec/b.py:4: pkg.jobspec.b -> pkg.plan.model (function-level): "
                                     "jobspec (jobspec layer) imports upward into plan") in violations[0], violations
