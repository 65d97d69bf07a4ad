"""Records are typed: no code in ``senseforge.pipelines`` reads a record's data by string key.

A stage reads ``record.data.question``, never ``record.payload["question"]``: each recipe
declares the pydantic model of its records, and the run store validates them on read. This
test walks the syntax tree of every module (not a grep: comments, strings and formatting do
not fool it) and counts reads by a constant string key — ``x["key"]``, ``x.get("key")``,
``x.pop("key")``, ``x.setdefault("key")`` — on anything reached through a ``payload`` or
``data`` (an attribute ``….payload``/``….data`` and what hangs below it, or a name
``payload``/``data``). The checker is itself tested on a snippet holding each form.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PIPELINES = Path(__file__).resolve().parents[2] / "src" / "senseforge" / "pipelines"
RECORD_NAMES = frozenset({"payload", "data"})
READS = frozenset({"get", "pop", "setdefault"})


def _through_record(node: ast.expr) -> bool:
    """Whether ``node`` is a record's payload or data, or reached through one (``record.data.item``)."""
    while True:
        if isinstance(node, ast.Name):
            return node.id in RECORD_NAMES
        if isinstance(node, ast.Attribute):
            if node.attr in RECORD_NAMES:
                return True
            node = node.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        else:
            return False


def string_key_reads(source: str) -> list[tuple[int, str]]:
    """``(line, key)`` of every read by a constant string key on a record's payload or data."""
    found = []
    for node in ast.walk(ast.parse(source)):
        key = None
        if isinstance(node, ast.Subscript) and _through_record(node.value):
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                key = node.slice.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in READS
            and _through_record(node.func.value)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            key = node.args[0].value
        if key is not None:
            found.append((node.lineno, key))
    return found


def test_the_checker_finds_every_form() -> None:
    snippet = (
        'a = record.payload["question"]\n'
        'b = record.data.item["choices"]\n'
        'c = payload.get("lang")\n'
        'd = r.payload.get("calls", {})\n'
        'e = data.pop("x")\n'
        "f = record.data.question\n"  # typed: fine
        'g = row["question"]\n'  # not a record: fine
        "h = record.payload[key]\n"  # not a constant key: not counted
    )
    assert string_key_reads(snippet) == [(1, "question"), (2, "choices"), (3, "lang"), (4, "calls"), (5, "x")]


@pytest.mark.parametrize(
    "package", [*sorted(p.name for p in PIPELINES.iterdir() if (p / "recipe.py").is_file()), "(engine)"]
)
def test_no_string_key_reads_on_records(package: str) -> None:
    files = sorted(PIPELINES.glob("*.py")) if package == "(engine)" else sorted((PIPELINES / package).rglob("*.py"))
    reads = [
        f"{path.relative_to(PIPELINES)}:{line}: [{key!r}]"
        for path in files
        for line, key in string_key_reads(path.read_text(encoding="utf-8"))
    ]
    assert not reads, f"{len(reads)} string-key read(s) on records:\n" + "\n".join(reads)
