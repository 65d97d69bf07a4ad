"""Every fenced shell block of the documentation (``docs/`` and README.md) runs, or says why not.

A block is a fence opened with ```` ```bash ````, ```` ```sh ```` or ```` ```console ```` (in a console block only the
``$ `` lines are commands). It runs in a fresh folder with its own ``SENSEFORGE_HOME``, offline, with this
checkout's sources first on ``PYTHONPATH`` and this interpreter's ``bin`` first on ``PATH``; it fails the test
when it exits non-zero. A block that cannot run here (a paid API, a multi-GB dump, minutes of compiling) is
preceded by a marker on the line before it::

    <!-- not-run: the reason, in words -->

and is reported as skipped with that reason, so the count of blocks that do not run stays visible.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_FENCE = re.compile(r"^```(bash|sh|console)\s*$")
_NOT_RUN = re.compile(r"^<!-- not-run: (\S.*?) -->$")


@dataclass(frozen=True)
class Block:
    """One fenced shell block: where it is, its commands, and why it does not run (if it does not)."""

    path: str
    line: int
    script: str
    not_run: str | None


def blocks(text: str, path: str) -> list[Block]:
    """The shell blocks of one Markdown text, with their not-run reasons.

    >>> text = "<!-- not-run: slow -->\\n```bash\\nmake demo\\n```\\n```console\\n$ ls\\nfoo\\n```"
    >>> [(b.script, b.not_run) for b in blocks(text, "x")]
    [('make demo\\n', 'slow'), ('ls\\n', None)]
    """
    lines = text.split("\n")
    found: list[Block] = []
    index = 0
    while index < len(lines):
        match = _FENCE.match(lines[index])
        if match is None:
            index += 1
            continue
        end = next((j for j in range(index + 1, len(lines)) if lines[j].startswith("```")), None)
        if end is None:
            raise ValueError(f"{path}:{index + 1}: a shell block that is never closed")
        body = lines[index + 1 : end]
        if match.group(1) == "console":
            body = [line[2:] for line in body if line.startswith("$ ")]
        before = next((lines[j] for j in range(index - 1, -1, -1) if lines[j].strip()), "")
        marker = _NOT_RUN.match(before.strip())
        if before.strip().startswith("<!-- not-run") and marker is None:
            raise ValueError(f"{path}:{index}: write the marker as <!-- not-run: REASON -->")
        found.append(Block(path, index + 1, "\n".join(body) + "\n", marker.group(1) if marker else None))
        index = end + 1
    return found


def _all_blocks() -> list[Block]:
    pages = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
    return [block for page in pages for block in blocks(page.read_text(encoding="utf-8"), str(page.relative_to(ROOT)))]


BLOCKS = _all_blocks()


def test_the_docs_have_shell_blocks_and_some_run() -> None:
    runnable = [block for block in BLOCKS if block.not_run is None]
    assert BLOCKS and runnable, "no shell block of the docs runs"
    print(f"{len(BLOCKS)} shell blocks: {len(runnable)} run, {len(BLOCKS) - len(runnable)} marked not-run")


@pytest.mark.parametrize("block", BLOCKS, ids=[f"{block.path}:{block.line}" for block in BLOCKS])
def test_shell_block(block: Block, tmp_path: Path) -> None:
    if block.not_run is not None:
        pytest.skip(f"not-run: {block.not_run}")
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")])),
        "SENSEFORGE_HOME": str(tmp_path / "home"),
        "HF_HUB_OFFLINE": "1",
        "NO_COLOR": "1",
    }
    # its own session: whatever the block left running (a server it started, when a later command failed) is
    # ended with it
    process = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", block.script],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        process.wait()
    assert process.returncode == 0, f"{block.path}:{block.line} exited {process.returncode}\n{stdout}\n{stderr}"


def test_the_readme_is_short_and_keeps_the_quickstart() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    assert "make demo   # install into .venv and run the offline demo on the bundled model\n" in readme
    assert "make test   # install everything the tests need, lint, type-check and run the whole suite\n" in readme


def test_no_page_points_outside_the_repository() -> None:
    pages = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
    outside = [str(page.relative_to(ROOT)) for page in pages if "../shared" in page.read_text(encoding="utf-8")]
    assert not outside, f"pages that point outside the repository: {outside}"
