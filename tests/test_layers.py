"""The layering of src/senseforge as a test: the ``[tool.importlinter]`` contracts of pyproject.toml
(run by ``lint-imports``, as ``make lint`` does) and no import cycle between any two modules.

Layers, lowest first: ``errors | _version``, ``data``, ``store``, ``llm | kb``, ``evaluate``,
``pipelines``, ``annotate``, ``cli``, ``__main__``, and the package root ``senseforge`` (its
``__init__``, the public API) above them all. Imports inside functions and under ``TYPE_CHECKING``
count. Import-linter's ``acyclic_siblings`` contract finds cycles between the children of a
package, but not one between a package's ``__init__`` and a module inside it, so the module-level
cycle check below builds the graph with grimp itself.

Recipe packages are tenants: none imports another (an ``independence`` contract) and the annotation
app imports none of them (a ``forbidden`` contract); what they share lives in ``data/`` and ``kb/``.

The same machinery also runs on a throwaway package with the contracts of pyproject.toml, once
clean and once with an upward import, an import of the root, cycles, a recipe importing another and
the app importing a recipe, to show that each can fail.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import tomllib
from collections import deque
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = REPO / "pyproject.toml"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
TOY = "toypkg"


def _lint_imports(cwd: Path, pythonpath: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` from this interpreter's environment on the pyproject.toml in ``cwd``."""
    if not LINT_IMPORTS.exists():
        pytest.fail(f"{LINT_IMPORTS} is missing: install the dev extra (pip install -c constraints.txt -e '.[dev]')")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(pythonpath), os.environ.get("PYTHONPATH")]))}
    env["COLUMNS"] = "200"  # one line per reported import
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _cycles(package: str) -> list[str]:
    """One cycle per strongly connected component of the module import graph, shortest first."""
    graph = grimp.build_graph(package, include_external_packages=False, cache_dir=None)
    imports = {module: sorted(graph.find_modules_directly_imported_by(module)) for module in graph.modules}
    cycles = []
    for component in _strongly_connected(imports):
        if len(component) < 2:
            continue
        cycle = _shortest_cycle(min(component), component, imports)
        steps = []
        for importer, imported in pairwise(cycle):
            lines = sorted({d["line_number"] for d in graph.get_import_details(importer=importer, imported=imported)})
            steps.append(f"{importer} (l.{', '.join(map(str, lines))})")
        size = f" [{len(component)} modules in the cycle's component]" if len(component) > len(cycle) - 1 else ""
        cycles.append(" -> ".join([*steps, cycle[-1]]) + size)
    return sorted(cycles, key=lambda text: (text.count(" -> "), text))


def _strongly_connected(imports: dict[str, list[str]]) -> Iterator[set[str]]:
    """Tarjan's algorithm, without recursion."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    for root in sorted(imports):
        if root in index:
            continue
        work = [(root, iter(imports[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    yield component
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(imports.get(child, []))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])


def _shortest_cycle(start: str, component: set[str], imports: dict[str, list[str]]) -> list[str]:
    """``[start, ..., start]``: the shortest way back to ``start`` inside its component (breadth first)."""
    previous: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in imports[node]:
            if child not in component:
                continue
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [*reversed(path), start]
            if child not in previous:
                previous[child] = node
                queue.append(child)
    raise AssertionError(f"{start} is in a component without a cycle")


# --------------------------------------------------------------------------- senseforge itself


def test_import_linter_contracts_are_kept() -> None:
    result = _lint_imports(REPO, REPO / "src")
    if result.returncode != 0:
        pytest.fail(f"lint-imports failed (rc={result.returncode}):\n{result.stdout}\n{result.stderr}", pytrace=False)
    assert "0 broken" in result.stdout, result.stdout


def test_no_import_cycles_between_modules() -> None:
    cycles = _cycles("senseforge")
    assert not cycles, "import cycles in src/senseforge, one per strongly connected component:\n" + "\n".join(cycles)


def test_the_contracts_cover_every_layer() -> None:
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]
    assert config["root_package"] == "senseforge"
    assert config["include_external_packages"] is False
    types = {contract["type"] for contract in config["contracts"]}
    assert {"layers", "forbidden", "acyclic_siblings", "independence"} <= types
    recipes = {name.rsplit(".", 1)[1] for name in _recipes()}
    on_disk = {path.parent.name for path in (REPO / "src" / "senseforge" / "pipelines").glob("*/recipe.py")}
    assert recipes == on_disk, "every recipe package is in the independence contract"
    (layers,) = (contract for contract in config["contracts"] if contract["type"] == "layers")
    assert layers["exhaustive"] is True
    assert layers["layers"][-1] == "errors | _version"


# --------------------------------------------------------------------------- a throwaway package


def _toy_config() -> str:
    """pyproject.toml's ``[tool.importlinter]`` tables as they are written, for ``toypkg``."""
    text = PYPROJECT.read_text(encoding="utf-8")
    header = re.search(r"^\[tool\.importlinter\]", text, re.MULTILINE)
    assert header, "pyproject.toml has no [tool.importlinter] table"
    start = header.start()
    end = re.compile(r"^\[(?!\[?tool\.importlinter[\].])", re.MULTILINE).search(text, start + 1)
    section = re.sub(r"\bsenseforge\b", TOY, text[start : end.start() if end else len(text)])
    expected = tomllib.loads(re.sub(r"\bsenseforge\b", TOY, text))["tool"]["importlinter"]
    assert tomllib.loads(section)["tool"]["importlinter"] == expected, "could not cut out [tool.importlinter]"
    return section


def _layer_names() -> list[str]:
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]
    (layers,) = (contract for contract in config["contracts"] if contract["type"] == "layers")
    return [name.strip(" ()") for layer in layers["layers"] for name in re.split(r"[|:]", layer)]


def _recipes() -> list[str]:
    """The recipe packages of the independence contract."""
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]
    (recipes,) = (contract for contract in config["contracts"] if contract["type"] == "independence")
    return list(recipes["modules"])


def _write_toy(root: Path, *, broken: bool) -> None:
    """``toypkg`` with every layer of the real contracts; ``broken`` adds the violations."""
    names = _layer_names()
    packages = {"data", "kb", "llm", "cli", "pipelines", "annotate"}
    assert packages <= set(names), names
    files = {"__init__.py": '__version__ = "0"\n', **{f"{n}.py": "" for n in names if n not in packages}}
    for package in packages:
        files[f"{package}/__init__.py"] = ""
    files["data/low.py"] = "from toypkg import errors\n"
    files["kb/a.py"] = "from toypkg.kb import b\n"
    files["kb/b.py"] = "from toypkg import data\n"
    files["llm/__init__.py"] = "from toypkg.llm.base import Base\n"
    files["llm/base.py"] = "class Base:\n    pass\n"
    files["cli/__init__.py"] = "import toypkg.kb.a\nimport toypkg.llm\n"
    recipes = [name.rsplit(".", 1)[1] for name in _recipes()]
    for recipe in recipes:
        files[f"pipelines/{recipe}/__init__.py"] = ""
        files[f"pipelines/{recipe}/stages.py"] = "from toypkg.kb import a\nfrom toypkg.pipelines import shared\n"
    files["pipelines/shared.py"] = "from toypkg import data\n"
    files["annotate/app.py"] = "from toypkg.pipelines import shared\n"
    if broken:
        # upward, and lazy: data sits below cli
        files["data/low.py"] += "\n\ndef f() -> None:\n    import toypkg.cli\n"
        # the package root, from the store layer
        files["store.py"] = "from toypkg import __version__\n"
        # a cycle between two siblings (the way back is lazy)
        files["kb/b.py"] += "\n\ndef g() -> None:\n    from toypkg.kb import a\n"
        # a cycle between a package's __init__ and its own module, which acyclic_siblings does not see
        files["llm/base.py"] = "from toypkg.llm import VERSION\n\n\nclass Base:\n    pass\n"
        # one recipe borrowing another's word list, and the app reaching into a recipe
        files[f"pipelines/{recipes[1]}/stages.py"] += f"from toypkg.pipelines.{recipes[0]} import stages\n"
        files["annotate/app.py"] += f"from toypkg.pipelines.{recipes[-1]}.stages import a\n"
    for name, body in files.items():
        path = root / TOY / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(body), encoding="utf-8")
    (root / "pyproject.toml").write_text(_toy_config(), encoding="utf-8")


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, TOY, raising=False)
    return tmp_path


def test_a_clean_toy_package_keeps_the_contracts(toy: Path) -> None:
    _write_toy(toy, broken=False)
    result = _lint_imports(toy, toy)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout
    assert _cycles(TOY) == []


def test_the_contracts_catch_an_upward_import_the_root_and_a_cycle(toy: Path) -> None:
    _write_toy(toy, broken=True)
    result = _lint_imports(toy, toy)
    out = " ".join(result.stdout.split())
    assert result.returncode == 1, result.stdout + result.stderr
    assert "0 kept, 5 broken" in out, result.stdout
    assert "toypkg.data is not allowed to import toypkg.cli" in out, result.stdout
    assert "toypkg.data.low -> toypkg.cli (l.5)" in out, result.stdout
    assert "toypkg.store is not allowed to import toypkg:" in out, result.stdout
    assert "No cycles are allowed in toypkg.kb" in out, result.stdout
    recipes = [name.replace("senseforge", TOY) for name in _recipes()]
    assert f"{recipes[1]} is not allowed to import {recipes[0]}" in out, result.stdout
    assert f"toypkg.annotate is not allowed to import {recipes[-1]}" in out, result.stdout


def test_the_cycle_check_finds_every_cycle(toy: Path) -> None:
    _write_toy(toy, broken=True)
    assert _cycles(TOY) == [
        "toypkg.kb.a (l.1) -> toypkg.kb.b (l.5) -> toypkg.kb.a",
        "toypkg.llm (l.1) -> toypkg.llm.base (l.1) -> toypkg.llm",
    ]
