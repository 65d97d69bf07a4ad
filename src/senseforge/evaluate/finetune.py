"""Fine-tuning a multiple-choice encoder on senseforge items (mCSQA §5, Table 10).

Any ``AutoModelForMultipleChoice`` encoder in a local folder (mBERT, XLM-R, mDeBERTa …;
nothing is downloaded) reads each item as its (question, choice) pairs, at most
``max_length`` tokens each, and learns to score the right choice highest. The defaults are
mCSQA's Table 10: batch 64 (split into micro-batches with gradient accumulation when memory
is short), a learning rate searched over 2e-5 / 3e-5 / 5e-5 and chosen by accuracy on the
selection split, seed 42, warm-up over the first 10% of steps, early stopping after 3
epochs without a better selection accuracy, at most 10 epochs, the best epoch's weights
kept.

A run folder holds one sub-folder per learning rate (``lr-2e-05/``): its best weights
(``best/``), its state after the last finished epoch (``state.pt``: weights, optimiser,
schedule, history), and ``done.json`` once it has stopped. A killed run resumes at the
last finished epoch of the learning rate it was on; a finished learning rate is not
trained again. ``manifest.json`` records every choice and the chosen learning rate.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from senseforge.data.io import atomic_open
from senseforge.data.schema import MCItem
from senseforge.errors import ConfigError, DataValidationError, MissingDependencyError

Progress = Callable[[str], None]


class FinetuneConfig(BaseModel):
    """How an encoder is fine-tuned (recorded in the run's manifest)."""

    model_config = ConfigDict(extra="forbid")

    model: str
    """A local folder with an encoder and its tokenizer (``save_pretrained`` layout)."""
    batch_size: int = Field(default=64, ge=1)
    micro_batch: int | None = Field(default=None, ge=1)
    """Items per forward pass (gradient accumulation up to ``batch_size``); ``None``: the whole batch."""
    learning_rates: tuple[float, ...] = (2e-5, 3e-5, 5e-5)
    seed: int = 42
    warmup_ratio: float = Field(default=0.1, ge=0.0, lt=1.0)
    patience: int = Field(default=3, ge=1)
    max_epochs: int = Field(default=10, ge=1)
    max_length: int = Field(default=128, ge=8)
    device: str = "auto"
    """``auto`` (a GPU when there is one), ``cpu`` or ``cuda``."""


@dataclass
class FinetuneResult:
    """The chosen learning rate, its best weights and the selection accuracy of every rate tried."""

    learning_rate: float
    model_dir: Path
    selection_accuracy: float
    history: dict[str, dict[str, Any]]


def _torch() -> Any:
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise MissingDependencyError("fine-tuning needs torch and transformers: pip install 'senseforge[hf]'") from exc
    return torch


def selection_split(train: Sequence[MCItem], seed: int, share: float = 0.1) -> tuple[list[MCItem], list[MCItem]]:
    """A seeded ``share`` of the training items held out for selection (for data whose dev has no answers)."""
    order = sorted(range(len(train)), key=lambda i: train[i].id)
    random.Random(seed).shuffle(order)
    cut = max(1, round(len(order) * share))
    held = set(order[:cut])
    return [item for i, item in enumerate(train) if i not in held], [item for i, item in enumerate(train) if i in held]


def _labelled(items: Sequence[MCItem], what: str) -> list[tuple[MCItem, int]]:
    out = []
    sizes = {len(item.choices) for item in items}
    if len(sizes) > 1:
        raise DataValidationError(f"{what}: every item needs the same number of choices, found {sorted(sizes)}")
    for item in items:
        labels = [c.label for c in item.choices]
        if item.answer not in labels:
            raise DataValidationError(
                f"{what}: item {item.id} has no answer among its choices (answer {item.answer!r})"
            )
        out.append((item, labels.index(item.answer)))
    if not out:
        raise DataValidationError(f"{what}: no items")
    return out


def _encode(tokenizer: Any, items: Sequence[MCItem], max_length: int, torch: Any) -> dict[str, Any]:
    """Token tensors ``[items, choices, max_length]`` of the (question, choice) pairs."""
    questions = [item.question for item in items for _ in item.choices]
    choices = [choice.text for item in items for choice in item.choices]
    encoded = tokenizer(
        questions, choices, truncation=True, max_length=max_length, padding="max_length", return_tensors="pt"
    )
    width = len(items[0].choices)
    return {key: value.view(len(items), width, -1) for key, value in encoded.items()}


def _device(config: FinetuneConfig, torch: Any) -> Any:
    if config.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(config.device)


def _accuracy(model: Any, tokenizer: Any, labelled: Sequence[tuple[MCItem, int]], config: FinetuneConfig) -> float:
    predictions = _predict(model, tokenizer, [item for item, _ in labelled], config)
    return sum(p == gold for p, (_, gold) in zip(predictions, labelled, strict=True)) / len(labelled)


def _predict(model: Any, tokenizer: Any, items: Sequence[MCItem], config: FinetuneConfig) -> list[int]:
    torch = _torch()
    device = next(model.parameters()).device
    model.eval()
    out: list[int] = []
    step = config.micro_batch or config.batch_size
    with torch.no_grad():
        for start in range(0, len(items), step):
            batch = _encode(tokenizer, items[start : start + step], config.max_length, torch)
            logits = model(**{k: v.to(device) for k, v in batch.items()}).logits
            out += [int(i) for i in logits.argmax(dim=-1).tolist()]
    return out


def predict(model_dir: Path, items: Sequence[MCItem], config: FinetuneConfig) -> list[int]:
    """The index of the choice a fine-tuned model picks for each item."""
    torch = _torch()
    from transformers import AutoModelForMultipleChoice, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForMultipleChoice.from_pretrained(str(model_dir)).to(_device(config, torch))
    return _predict(model, tokenizer, items, config)


def _write(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path) as handle:
        handle.write(json.dumps(value, indent=2, sort_keys=True) + "\n")


def _warmup_then_linear(warmup: int, total: int) -> Callable[[int], float]:
    """The learning-rate factor per step: up from 0 over ``warmup`` steps, then down to 0 at ``total``.

    >>> [round(_warmup_then_linear(2, 6)(s), 2) for s in range(7)]
    [0.0, 0.5, 1.0, 0.75, 0.5, 0.25, 0.0]
    """

    def factor(step: int) -> float:
        if step < warmup:
            return step / max(1, warmup)
        return max(0.0, (total - step) / max(1, total - warmup))

    return factor


def _train_rate(
    rate: float,
    train: Sequence[tuple[MCItem, int]],
    select: Sequence[tuple[MCItem, int]],
    config: FinetuneConfig,
    folder: Path,
    progress: Progress,
) -> dict[str, Any]:
    """Train at one learning rate (resuming a killed run at its last finished epoch); its ``done.json``."""
    done = folder / "done.json"
    if done.is_file():
        return dict(json.loads(done.read_text(encoding="utf-8")))
    torch = _torch()
    from transformers import AutoModelForMultipleChoice, AutoTokenizer

    torch.manual_seed(config.seed)
    device = _device(config, torch)
    tokenizer = AutoTokenizer.from_pretrained(config.model)
    model = AutoModelForMultipleChoice.from_pretrained(config.model).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=rate)
    steps_per_epoch = -(-len(train) // config.batch_size)
    total = steps_per_epoch * config.max_epochs
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, _warmup_then_linear(round(total * config.warmup_ratio), total)
    )
    state_path = folder / "state.pt"
    history: list[float] = []
    best, stale, epoch = -1.0, 0, 0
    if state_path.is_file():
        state = torch.load(state_path, map_location=device, weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        history, best, stale, epoch = state["history"], state["best"], state["stale"], state["epoch"]
    micro = min(config.micro_batch or config.batch_size, config.batch_size)
    while epoch < config.max_epochs and stale < config.patience:
        model.train()
        order = list(range(len(train)))
        random.Random(f"{config.seed}:{epoch}").shuffle(order)
        for start in range(0, len(order), config.batch_size):
            batch = [train[i] for i in order[start : start + config.batch_size]]
            optimizer.zero_grad()
            for piece in range(0, len(batch), micro):
                part = batch[piece : piece + micro]
                inputs = _encode(tokenizer, [item for item, _ in part], config.max_length, torch)
                labels = torch.tensor([gold for _, gold in part], device=device)
                loss = model(**{k: v.to(device) for k, v in inputs.items()}, labels=labels).loss
                (loss * len(part) / len(batch)).backward()
            optimizer.step()
            schedule.step()
        epoch += 1
        accuracy = _accuracy(model, tokenizer, select, config)
        history.append(accuracy)
        if accuracy > best:
            best, stale = accuracy, 0
            model.save_pretrained(str(folder / "best"))
            tokenizer.save_pretrained(str(folder / "best"))
        else:
            stale += 1
        progress(f"lr {rate:g} · epoch {epoch}: selection accuracy {accuracy:.4f} (best {best:.4f})")
        state = {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "schedule": schedule.state_dict(),
            "history": history,
            "best": best,
            "stale": stale,
            "epoch": epoch,
        }
        partial = state_path.with_suffix(".tmp")
        torch.save(state, partial)
        partial.replace(state_path)
    result = {"learning_rate": rate, "best_accuracy": best, "epochs": epoch, "history": history}
    _write(done, result)
    state_path.unlink(missing_ok=True)
    return result


def finetune(
    train: Sequence[MCItem],
    select: Sequence[MCItem] | None,
    config: FinetuneConfig,
    out_dir: Path,
    *,
    progress: Progress | None = None,
) -> FinetuneResult:
    """Fine-tune ``config.model`` on ``train``, choosing the learning rate on ``select`` (``None``: a seeded 10%
    of ``train``); the chosen rate's best weights are in ``<out_dir>/lr-<rate>/best``.

    Raises:
        ConfigError: the model folder is missing.
        DataValidationError: no items, an item without its answer, or items with different numbers of choices.
    """
    if not Path(config.model).is_dir():
        raise ConfigError(f"--model {config.model}: no such folder (a local encoder with its tokenizer)")
    say = progress or (lambda _line: None)
    if select is None:
        train, select = selection_split(train, config.seed)
    labelled, chosen_on = _labelled(train, "train"), _labelled(select, "selection split")
    history: dict[str, dict[str, Any]] = {}
    for rate in config.learning_rates:
        history[f"{rate:g}"] = _train_rate(rate, labelled, chosen_on, config, out_dir / f"lr-{rate:g}", say)
    best_rate = max(config.learning_rates, key=lambda r: (history[f"{r:g}"]["best_accuracy"], -r))
    manifest = {
        "config": config.model_dump(mode="json"),
        "train_items": len(labelled),
        "selection_items": len(chosen_on),
        "learning_rate": best_rate,
        "history": history,
    }
    _write(out_dir / "manifest.json", manifest)
    return FinetuneResult(
        learning_rate=best_rate,
        model_dir=out_dir / f"lr-{best_rate:g}" / "best",
        selection_accuracy=float(history[f"{best_rate:g}"]["best_accuracy"]),
        history=history,
    )
