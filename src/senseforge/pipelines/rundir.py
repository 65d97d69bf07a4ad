"""The run directory: its manifest, whether a run lives there, the resume check, and the config a command
line asks for.

A run directory holds ``manifest.json`` (written once, before the run store) and, by default,
the run store ``run.db``. A folder whose manifest was written but whose store holds nothing is
a start that failed, not a run. Split from :mod:`senseforge.pipelines.runner`, which re-exports
these names.
"""

from __future__ import annotations

import json
import platform
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from senseforge._version import __version__
from senseforge.errors import ConfigError
from senseforge.pipelines.config import RecipeConfig, config_differences, resolve_config
from senseforge.pipelines.recipe import Recipe
from senseforge.pipelines.runstore import RunStore, sqlite_url

MANIFEST = "manifest.json"
DEFAULT_RUN_STORE = "run.db"


def hide_password(url: str) -> str:
    """A database URL fit for a manifest or a log line."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url


def _manifest_json(run_dir: Path) -> dict[str, Any] | None:
    """The manifest file as JSON (any manifest, even one without a config), or ``None`` when there is none."""
    path = run_dir / MANIFEST
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: unreadable manifest ({exc})") from exc
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: not a senseforge run manifest")
    return value


def read_manifest(run_dir: Path) -> dict[str, Any] | None:
    """The manifest of a run directory, or ``None`` when there is none.

    Raises:
        ConfigError: an unreadable manifest, or a file that is not one.
    """
    value = _manifest_json(run_dir)
    if value is not None and "config" not in value:
        raise ConfigError(f"{run_dir / MANIFEST}: not a senseforge run manifest")
    return value


RUN_STORE_FILES = (
    DEFAULT_RUN_STORE,
    f"{DEFAULT_RUN_STORE}-wal",
    f"{DEFAULT_RUN_STORE}-shm",
    f"{DEFAULT_RUN_STORE}-journal",
)
"""The files of a run's default SQLite store."""


def stored_results(run_dir: Path, manifest: Mapping[str, Any]) -> int | None:
    """How many results and judgements a run directory's store holds; ``None`` when its store is elsewhere
    (a database URL), which is then taken for a run that started."""
    if manifest.get("run_store_url") not in (None, DEFAULT_RUN_STORE):
        return None
    if not (run_dir / DEFAULT_RUN_STORE).is_file():
        return 0
    store = RunStore(sqlite_url(run_dir / DEFAULT_RUN_STORE))
    try:
        return store.stored()
    finally:
        store.close()


def _clear_failed_start(run_dir: Path) -> None:
    """Remove what a start that stored nothing left (its manifest and empty store), so the folder is free again."""
    for name in (MANIFEST, *RUN_STORE_FILES):
        (run_dir / name).unlink(missing_ok=True)


def check_resume(run_dir: Path, config: RecipeConfig, *, resume: bool) -> dict[str, Any] | None:
    """The existing manifest when resuming; refuse a fresh build over an old run, or a changed config.

    A folder whose manifest was written but whose store holds nothing (a start that failed,
    e.g. on a missing input) is not a run yet: it is cleared and the build starts afresh, with
    or without ``--resume``.

    Raises:
        ConfigError: with what to do next.
    """
    manifest = read_manifest(run_dir)
    if manifest is not None and stored_results(run_dir, manifest) == 0:
        return None  # a failed start: build() clears it before it writes its own manifest
    if manifest is None:
        if resume:
            raise ConfigError(f"{run_dir}: no run to resume (no {MANIFEST}); start it without --resume")
        if run_dir.exists() and any(run_dir.iterdir()):
            raise ConfigError(f"{run_dir}: folder is not empty and holds no run; choose another --out")
        return None
    if not resume:
        raise ConfigError(
            f"{run_dir}: a run already lives here; continue it with --resume, choose another --out, "
            f"or delete the folder to start over (rm -r {run_dir})"
        )
    if manifest.get("recipe") not in (None, config.recipe):
        raise ConfigError(f"{run_dir}: this is a {manifest.get('recipe')} run, not {config.recipe}")
    if manifest.get("config_hash") != config.hash():
        changes = config_differences(manifest["config"], config.model_dump(mode="json"))
        raise ConfigError(
            f"{run_dir}: the config differs from the run's manifest ({'; '.join(changes) or 'hash differs'}); "
            f"resume with the same settings, start a new run in another --out, or delete the folder to start over "
            f"(rm -r {run_dir})"
        )
    # a config may also name inputs outside it that decide what the run makes (mCSQA: its knowledge store)
    changed = config.input_changes(manifest)
    if changed:
        raise ConfigError(
            f"{run_dir}: {'; '.join(changed)} since this run started; resume with the inputs it started with, "
            f"start a new run in another --out, or delete the folder to start over (rm -r {run_dir})"
        )
    return manifest


def store_url_of(
    run_dir: Path, given: str | None = None, manifest: Mapping[str, Any] | None = None, *, flag: str = "--run-store"
) -> str:
    """The run store of a run directory: ``given``, or the default ``run.db`` when the run uses it.

    Raises:
        ConfigError: no such run directory, or the run's store is elsewhere and no URL was given
            (``flag`` names the option that gives it).
    """
    if given:
        return given
    if not run_dir.is_dir():
        raise ConfigError(f"{run_dir}: no such run directory (build one first, or give {flag})")
    recorded = (manifest if manifest is not None else _manifest_json(run_dir) or {}).get("run_store_url")
    if recorded not in (None, DEFAULT_RUN_STORE):
        raise ConfigError(f"{run_dir}: this run's store is {recorded}; give its full URL with {flag}")
    return sqlite_url(run_dir / DEFAULT_RUN_STORE)


def git_sha() -> str | None:
    """The commit of the senseforge checkout this code runs from, or ``None`` (installed wheel)."""
    here = Path(__file__).resolve().parent
    try:
        result = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = result.stdout.strip()
    return sha if result.returncode == 0 and len(sha) == 40 else None


def build_manifest(
    recipe: Recipe,
    config: RecipeConfig,
    *,
    identities: dict[str, dict[str, str]],
    store_url: str,
    run_store_url: str,
) -> dict[str, Any]:
    """The manifest of a run: config and hash, versions, the recipe's facts, models, stores."""
    return {
        "recipe": config.recipe,
        "config": config.model_dump(mode="json"),
        "config_hash": config.hash(),
        "senseforge_version": __version__,
        "git_sha": git_sha(),
        "python": platform.python_version(),
        **recipe.manifest(config),
        "models": identities,
        "store_url": store_url,
        "run_store_url": run_store_url,
    }


def resolve_run(
    recipe: Recipe,
    *,
    flags: Mapping[str, Any],
    out: Path | None,
    resume: bool,
    config_file: Path | None = None,
    sets: Sequence[str] = (),
) -> tuple[RecipeConfig, Path]:
    """The config and run directory a command line asks for (settings of a resumed run from its manifest).

    Raises:
        ConfigError: nothing to resume, or an invalid setting (named as its flag).
    """
    if resume and out is None:  # the run the flags name by default
        try:
            named = resolve_config(recipe.config_model, config_file=config_file, sets=sets, flags=flags)
        except ConfigError as exc:
            raise ConfigError(
                f"--resume needs the run's folder: give --out RUN_DIR (or the settings that name its default "
                f"folder; {exc})"
            ) from exc
        out = recipe.default_run_dir(named)
    manifest = read_manifest(out) if resume and out is not None else None
    if resume and manifest is None:
        raise ConfigError(f"{out}: no run to resume (no {MANIFEST}); start it without --resume")
    if manifest is not None and manifest.get("recipe") not in (None, recipe.name):
        raise ConfigError(
            f"{out}: this is a {manifest.get('recipe')} run, not {recipe.name}: resume it with "
            f"`senseforge build {manifest.get('recipe')} --out {out} --resume`"
        )
    recorded = manifest["config"] if manifest else None
    config = resolve_config(recipe.config_model, recorded=recorded, config_file=config_file, sets=sets, flags=flags)
    return config, out or recipe.default_run_dir(config)
