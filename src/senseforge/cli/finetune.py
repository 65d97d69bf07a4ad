"""``senseforge finetune`` and ``senseforge transfer``: multiple-choice encoders and the transfer matrix (mCSQA §5)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from senseforge.cli._common import err, out

MODEL_HELP = "A local folder with an AutoModelForMultipleChoice encoder and its tokenizer (nothing is downloaded)."
RATES_HELP = "Learning rates to search, comma-separated (mCSQA: 2e-5,3e-5,5e-5)."


def _config(
    model: Path, batch: int, micro: int | None, rates: str, epochs: int, patience: int, seed: int, length: int
) -> Any:
    from pydantic import ValidationError

    from senseforge.errors import ConfigError
    from senseforge.evaluate.finetune import FinetuneConfig

    try:
        learning_rates = tuple(float(part) for part in rates.split(",") if part.strip())
    except ValueError as exc:
        raise ConfigError(f"--learning-rates {rates!r}: write numbers such as 2e-5,3e-5") from exc
    try:
        return FinetuneConfig(
            model=str(model),
            batch_size=batch,
            micro_batch=micro,
            learning_rates=learning_rates,
            max_epochs=epochs,
            patience=patience,
            seed=seed,
            max_length=length,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"--{str(first['loc'][0]).replace('_', '-')}: {first['msg']}") from exc


def _splits(path: Path) -> Any:
    """A dataset's train, selection (validation, when it has answers) and test items."""
    from senseforge.errors import ConfigError
    from senseforge.evaluate.harness import load_for_eval
    from senseforge.evaluate.transfer import LanguageData

    parts: dict[str, Any] = {}
    for split in ("train", "validation", "test"):
        try:
            loaded = load_for_eval(path, split=split)
        except ConfigError:
            parts[split] = None
            continue
        if loaded.kind != "mc":
            raise ConfigError(f"{path}: fine-tuning reads multiple-choice items, this is {loaded.kind}")
        parts[split] = list(loaded.items)
    if not parts["train"] or not parts["test"]:
        raise ConfigError(f"{path}: needs a train and a test split (items/ or dataset/ train.jsonl and test.jsonl)")
    select = parts["validation"] if parts["validation"] and all(i.answer for i in parts["validation"]) else None
    return LanguageData(train=parts["train"], select=select, test=parts["test"])


_MODEL = typer.Option(..., "--model", "-m", help=MODEL_HELP)
_BATCH = typer.Option(64, "--batch-size", min=1, help="Items per optimiser step (mCSQA: 64).")
_MICRO = typer.Option(None, "--micro-batch", min=1, help="Items per forward pass (gradient accumulation).")
_RATES = typer.Option("2e-5,3e-5,5e-5", "--learning-rates", help=RATES_HELP)
_EPOCHS = typer.Option(10, "--max-epochs", min=1, help="At most this many epochs.")
_PATIENCE = typer.Option(3, "--patience", min=1, help="Stop after this many epochs without a better selection score.")
_SEED = typer.Option(42, "--seed")
_EXECUTOR = typer.Option(
    "local", "--executor", help="local: in this process | ray: each fine-tune a Ray task (needs the ray extra)."
)
_RAY_ADDRESS = typer.Option(
    None,
    "--ray-address",
    help="With --executor ray: the cluster to join (default: a local Ray with this machine's cores).",
)
_RAY_CPUS = typer.Option(1, "--cpus-per-task", min=1, help="With --executor ray: CPUs (torch threads) per fine-tune.")
_LENGTH = typer.Option(128, "--max-length", min=8, help="Tokens per (question, choice) pair (mCSQA: 128).")


def finetune(
    data: Path = typer.Option(..., "--data", "-d", help="A run directory (or folder) with train/validation/test."),
    model: Path = _MODEL,
    out_dir: Path = typer.Option(..., "--out", help="Run folder (resumable: run the same command again)."),
    batch: int = _BATCH,
    micro: int | None = _MICRO,
    rates: str = _RATES,
    epochs: int = _EPOCHS,
    patience: int = _PATIENCE,
    seed: int = _SEED,
    length: int = _LENGTH,
    executor: str = _EXECUTOR,
    ray_address: str | None = _RAY_ADDRESS,
    cpus: int = _RAY_CPUS,
) -> None:
    """Fine-tune a multiple-choice encoder on a dataset (mCSQA Table 10 defaults) and report its test accuracy."""
    from senseforge.evaluate.finetune import finetune as run
    from senseforge.evaluate.finetune import predict
    from senseforge.evaluate.transfer import outcomes

    config = _config(model, batch, micro, rates, epochs, patience, seed, length)
    splits = _splits(data)
    runner = _runner(executor, ray_address, cpus)
    if runner is None:
        result = run(splits.train, splits.select, config, out_dir, progress=err.print)
        rate, selection, model_dir = result.learning_rate, result.selection_accuracy, result.model_dir
        right = sum(o.correct for o in outcomes(splits.test, predict(model_dir, splits.test, config)))
    else:
        from senseforge.evaluate.transfer import SettingJob

        job = SettingJob("finetune", [], splits.train, splits.select, {"test": splits.test}, out_dir)
        [done] = runner([job], config, err.print)
        rate, selection = done.learning_rate, done.selection_accuracy
        model_dir = out_dir / f"lr-{rate:g}" / "best"
        right = sum(o.correct for o in done.outcomes["test"])
    out.print(
        f"learning rate {rate:g} (selection accuracy {selection:.4f}); "
        f"test accuracy {right / len(splits.test):.4f} on {len(splits.test)} items; model: {model_dir}"
    )


def _runner(executor: str, address: str | None, cpus: int) -> Any:
    """``None`` for ``--executor local``; for ``ray``, a fine-tune runner on the joined (or started) Ray."""
    from senseforge.errors import ConfigError

    if executor == "local":
        if address:
            raise ConfigError("--ray-address needs --executor ray")
        return None
    if executor != "ray":
        raise ConfigError(f"--executor {executor}: give local or ray")
    from senseforge.cluster.runtime import connect
    from senseforge.cluster.training import ray_setting_runner

    cluster = connect(address)
    err.print(f"ray: {cluster.nodes} node(s), {cluster.cpus:g} CPUs, {cluster.gpus:g} GPUs")
    return ray_setting_runner(cpus)


def transfer(
    data: list[str] = typer.Option(..., "--data", "-d", help="LANG=PATH, one per language (a run directory)."),
    model: Path = _MODEL,
    out_dir: Path = typer.Option(..., "--out", help="Study folder (resumable)."),
    batch: int = _BATCH,
    micro: int | None = _MICRO,
    rates: str = _RATES,
    epochs: int = _EPOCHS,
    patience: int = _PATIENCE,
    seed: int = _SEED,
    length: int = _LENGTH,
    n_bootstrap: int = typer.Option(1000, "--bootstrap", min=100, help="Bootstrap resamples for the CIs."),
    executor: str = _EXECUTOR,
    ray_address: str | None = _RAY_ADDRESS,
    cpus: int = _RAY_CPUS,
) -> None:
    """Mono, multi and unseen models over the languages given; the transfer matrices and Table 7's rows."""
    from senseforge.errors import ConfigError
    from senseforge.evaluate.transfer import run_transfer

    per_lang: dict[str, Any] = {}
    for pair in data:
        lang, sep, path = pair.partition("=")
        if not sep or not lang.strip() or not path.strip():
            raise ConfigError(f"--data {pair!r}: write LANG=PATH, e.g. ja=runs/mcsqa-ja")
        per_lang[lang.strip()] = _splits(Path(path.strip()))
    config = _config(model, batch, micro, rates, epochs, patience, seed, length)
    runner = _runner(executor, ray_address, cpus)
    result = run_transfer(per_lang, config, out_dir, n_bootstrap=n_bootstrap, progress=err.print, runner=runner)
    if result.get("finding"):
        out.print(str(result["finding"].get("summary", "")))
    out.print(f"wrote {out_dir / 'transfer.json'}, the CSV tables and {out_dir / 'transfer_heatmap.png'}")
