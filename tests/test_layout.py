"""The architecture as tests: a pure core, a shell in wings, imports one way, small modules."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ("forecasters", "anomaly", "planner")
PACKAGES = ("pipelines", *CORE)
# wings every other wing may use; the rest stand side by side and import neither each other
# nor the layers above them (flows, commands, the CLI)
FOUNDATION = ("store", "runtime")
ABOVE = ("flows", "commands", "cli")
MAX_LINES = 500


def _modules() -> dict[str, Path]:
    found = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _type_checking(tree: ast.Module) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:``: annotations, never run."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skip


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function (a local import hides
    a loop, it does not break it); not those only a type checker reads."""
    out: set[str] = set()
    tree = ast.parse(path.read_text())
    skip = _type_checking(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in MODULES)
    return out


GRAPH = {name: _imports(path) for name, path in MODULES.items()}


def _internal(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph between the project's modules; importing ``a.b.c`` runs ``a`` and ``a.b`` too."""
    edges: dict[str, set[str]] = {}
    for name, targets in graph.items():
        reached = set()
        for t in targets:
            parts = t.split(".")
            reached.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        edges[name] = {t for t in reached if t in MODULES and t != name and not name.startswith(t + ".")}
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def _wing(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "pipelines" and len(parts) > 1 else None


def test_no_import_loop() -> None:
    assert _cycles(_internal(GRAPH)) == []


def test_the_cycle_finder_finds_a_loop() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("module", [m for m in MODULES if m.split(".")[0] in CORE])
def test_the_core_does_no_io(module: str) -> None:
    bad = {t for t in GRAPH[module] if t.split(".")[0] in ("pipelines", "duckdb", "prefect")}
    assert not bad, f"{module} imports {sorted(bad)}"


def test_planner_validates_its_own_inputs() -> None:
    bad = {m: sorted(t for t in GRAPH[m] if t == "anomaly.base") for m in MODULES if m.startswith("planner")}
    assert not any(bad.values()), bad


@pytest.mark.parametrize("module", [m for m in MODULES if _wing(m) not in (None, *ABOVE)])
def test_a_wing_imports_only_itself_the_foundation_and_the_core(module: str) -> None:
    own = _wing(module)
    allowed = {own, *FOUNDATION}
    bad = {t for t in GRAPH[module] if t.startswith("pipelines.") and _wing(t) not in allowed}
    if own in FOUNDATION:  # the foundation stands on nothing of the shell's but itself
        bad |= {t for t in GRAPH[module] if t.startswith("pipelines.") and _wing(t) != own and
                not (own == "store" and _wing(t) == "runtime")}
    assert not bad, f"{module} imports {sorted(bad)}"


@pytest.mark.parametrize("module", [m for m in MODULES if _wing(m) == "flows"])
def test_flows_do_not_import_the_commands(module: str) -> None:
    bad = {t for t in GRAPH[module] if _wing(t) in ("commands", "cli")}
    assert not bad, f"{module} imports {sorted(bad)}"


def test_the_shell_is_in_wings() -> None:
    loose = sorted(p.name for p in (ROOT / "pipelines").glob("*.py"))
    assert loose == ["__init__.py", "cli.py"]
    for wing in (ROOT / "pipelines").iterdir():
        if wing.is_dir() and (wing / "__init__.py").exists():
            assert ast.get_docstring(ast.parse((wing / "__init__.py").read_text())), f"{wing.name} says nothing"


def test_no_module_is_over_500_lines() -> None:
    files = [p for d in (*PACKAGES, "tests", "benchmarks") for p in (ROOT / d).rglob("*.py")]
    long = {str(p.relative_to(ROOT)): n for p in files if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, long
