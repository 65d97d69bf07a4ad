"""What the fit reads: ``eval run`` output folders, a run's ``panel.jsonl``, or JSONL rows.

* an ``eval run`` folder (``results.json`` and ``samples.jsonl``): one respondent per evaluation
  identity (labelled by model, formulation/variant and the identity hash's first 8 characters), and per
  prompt variant when one run scored several; items are matched by id. Folders
  that evaluated different data (``results.json``'s ``data.name``) are refused, naming both.
* a JSONL file (a panel's ``panel.jsonl`` or a simulation) of rows
  ``{"respondent", "item", "correct"[, "choice"[, "key"]]}``; errors are located by line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from senseforge.errors import DataValidationError
from senseforge.evaluate.records import MCSample, read_results, read_samples


@dataclass
class Responses:
    """Right/wrong answers of respondents to items, with their choices where known."""

    respondents: list[str] = field(default_factory=list)
    items: list[str] = field(default_factory=list)
    answers: dict[tuple[str, str], bool] = field(default_factory=dict)
    choices: dict[tuple[str, str], str] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)
    data: str | None = None
    """The evaluated data's name (eval run folders)."""
    models: set[str] = field(default_factory=set)
    """The models of the eval run folders read."""

    def add(self, respondent: str, item: str, correct: bool, choice: str | None, key: str | None) -> None:
        """One answer (a later answer of the same pair replaces the earlier)."""
        if respondent not in self._seen_r:
            self._seen_r.add(respondent)
            self.respondents.append(respondent)
        if item not in self._seen_i:
            self._seen_i.add(item)
            self.items.append(item)
        self.answers[(respondent, item)] = correct
        if choice is not None:
            self.choices[(respondent, item)] = choice
        if key is None and correct and choice is not None:
            key = choice  # a right answer's choice is the key
        if key is not None:
            self.keys.setdefault(item, key)

    def __post_init__(self) -> None:
        self._seen_r: set[str] = set(self.respondents)
        self._seen_i: set[str] = set(self.items)

    def matrix(self) -> np.ndarray:
        """Respondents x items: 1.0 right, 0.0 wrong, NaN unanswered."""
        out = np.full((len(self.respondents), len(self.items)), np.nan)
        r_index = {r: i for i, r in enumerate(self.respondents)}
        i_index = {k: i for i, k in enumerate(self.items)}
        for (r, item), correct in self.answers.items():
            out[r_index[r], i_index[item]] = 1.0 if correct else 0.0
        return out


def read_responses(inputs: list[Path]) -> Responses:
    """All inputs' answers together (see the module docstring)."""
    if not inputs:
        raise DataValidationError("analyze irt: give at least one eval run folder or JSONL file")
    out = Responses()
    data_of: dict[str, Path] = {}
    for path in inputs:
        if path.is_dir() and (path / "results.json").is_file():
            _read_run(path, out, data_of)
        elif path.is_dir() and (path / "panel.jsonl").is_file():
            _read_rows(path / "panel.jsonl", out)
        elif path.is_file():
            _read_rows(path, out)
        else:
            raise DataValidationError(f"{path}: not an eval run folder (results.json), a panel.jsonl or a JSONL file")
    if len(out.respondents) < 2:
        raise DataValidationError(f"analyze irt: {len(out.respondents)} respondent(s); a fit needs at least 2")
    return out


def _read_run(folder: Path, out: Responses, data_of: dict[str, Path]) -> None:
    results = read_results(folder / "results.json")
    name = results.data.name
    if data_of and name not in data_of:
        first_name, first = next(iter(data_of.items()))
        raise DataValidationError(
            f"{folder}: evaluated {name!r}, but {first} evaluated {first_name!r}; items of different data do not match"
        )
    data_of.setdefault(name, folder)
    out.data = name
    out.models.add(results.model.name)
    identity = (results.identity_hash or "")[:8]
    setup = "/".join(str(results.config[k]) for k in ("formulation", "variant") if results.config.get(k))
    base = results.model.name + (f" {setup}" if setup else "") + (f" [{identity}]" if identity else f" ({folder.name})")
    for sample in read_samples(folder):
        if sample.correct is None:
            continue
        label = f"{base} {sample.variant}" if isinstance(sample, MCSample) and sample.variant else base
        if isinstance(sample, MCSample):
            out.add(label, sample.id, bool(sample.correct), sample.prediction, sample.gold)
        else:
            out.add(label, sample.id, bool(sample.correct), None, None)


def _read_rows(path: Path, out: Responses) -> None:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise DataValidationError(f"{path}: not readable ({exc})") from exc
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise DataValidationError(f"{path}:{number}: not JSON ({exc})") from exc
        if not isinstance(row, dict) or not {"respondent", "item", "correct"} <= row.keys():
            raise DataValidationError(f"{path}:{number}: a row needs respondent, item and correct")
        if not isinstance(row["correct"], bool):
            raise DataValidationError(f"{path}:{number}: correct must be true or false, got {row['correct']!r}")
        choice, key = row.get("choice"), row.get("key")
        out.add(
            str(row["respondent"]),
            str(row["item"]),
            row["correct"],
            None if choice is None else str(choice),
            None if key is None else str(key),
        )
