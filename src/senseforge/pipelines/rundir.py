"""The run directory: its manifest, whether a run lives there, the resume check, and the config a command
line asks for.

A run directory holds ``manifest.json`` (written once, before the run store) and, by default,
the run store ``run.db``. A folder whose manifest was written but whose store holds nothing is
a start that failed, not a run. Split from :mod:`senseforge.pipelines.runner`.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
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


HIDDEN = "***"
"""What a manifest keeps of a store URL's password."""
STORE_ENV = "SENSEFORGE_STORE_URL"
"""The environment variable that names the LM cache and ledger store (``--store`` reads it too)."""


def hide_password(url: str) -> str:
    """A database URL fit for a manifest or a log line."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url


def password_hidden(url: str) -> bool:
    """Whether ``url`` is a URL as a manifest keeps it, its password hidden (``***``): not one to open."""
    try:
        return make_url(url).password == HIDDEN
    except Exception:
        return False


def _comparable(url: str) -> str:
    """``url`` as two spellings of one store compare: the password hidden, a SQLite file by its absolute path."""
    shown = hide_password(url)
    try:
        parsed = make_url(shown)
    except Exception:
        return shown
    if parsed.get_backend_name() == "sqlite" and parsed.database and parsed.database != ":memory:":
        return parsed.set(database=str(Path(parsed.database).expanduser().resolve())).render_as_string()
    return shown


def _missing_file(url: str) -> bool:
    """Whether ``url`` names a SQLite file that does not exist."""
    try:
        parsed = make_url(url)
    except Exception:
        return False
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return False
    return not Path(parsed.database).expanduser().is_file()


def resumed_url(
    run_dir: Path, recorded: str, given: str | None, *, flag: str, what: str, env: str | None = None
) -> str:
    """The URL of a store a resumed run uses: the one its manifest records (``recorded``), or ``given`` when it
    names the same store (with the password the manifest does not keep).

    Args:
        run_dir: the run directory (for the messages).
        recorded: the URL the manifest keeps (its password hidden).
        given: the URL given again on this command line, or ``None``.
        flag: the option that gives it (``--store``, ``--run-store``).
        what: the store in words, for the messages.
        env: a URL from the environment that may carry the password the manifest hid (used only for that).

    A recorded SQLite file that is no longer there (a run moved from another machine) is not opened anew
    empty: the resume asks where the store is now, and takes ``given`` for it.

    Raises:
        ConfigError: ``given`` names another store, or the recorded URL's password is hidden and no URL of the
            same store gives it, or the recorded SQLite file is gone and none is given.
    """
    gone = _missing_file(recorded)
    if given is not None:
        if _comparable(given) != _comparable(recorded) and not gone:
            raise ConfigError(
                f"{run_dir}: this run's {what} is {recorded}, not {hide_password(given)}; resume it with its own "
                f"(leave {flag} out), or start a new run in another --out"
            )
        return given
    if gone:
        raise ConfigError(f"{run_dir}: this run's {what} {recorded} is no longer there; give {flag} URL of where it is")
    if not password_hidden(recorded):
        return recorded
    if env is not None and _comparable(env) == _comparable(recorded):
        return env
    where = f" (or set {STORE_ENV} to it)" if flag == "--store" else ""
    raise ConfigError(
        f"{run_dir}: this run's {what} is {recorded} and its manifest keeps no password: give the URL again with "
        f"{flag} URL{where}"
    )


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


def check_resume(
    run_dir: Path, config: RecipeConfig, *, resume: bool, manifest: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """The existing manifest when resuming; refuse a fresh build over an old run, or a changed config.

    A folder whose manifest was written but whose store holds nothing (a start that failed,
    e.g. on a missing input) is not a run yet: it is cleared and the build starts afresh, with
    or without ``--resume``.

    ``manifest`` is the run's manifest when the caller has read it already (:func:`resolve_run_manifest`); without
    it, the manifest is read here.

    Raises:
        ConfigError: with what to do next.
    """
    if manifest is None:
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
    run_dir: Path,
    given: str | None = None,
    manifest: Mapping[str, Any] | None = None,
    *,
    flag: str = "--run-store",
    recorded: bool = False,
) -> str:
    """The run store of a run directory: ``given``, or the default ``run.db`` when the run uses it, or (with
    ``recorded``) the URL its manifest records when the manifest keeps all of it.

    Raises:
        ConfigError: no such run directory, or the run's store is elsewhere and no URL was given
            (``flag`` names the option that gives it).
    """
    if given:
        return given
    if not run_dir.is_dir():
        raise ConfigError(f"{run_dir}: no such run directory (build one first, or give {flag})")
    url = (manifest if manifest is not None else _manifest_json(run_dir) or {}).get("run_store_url")
    if url in (None, DEFAULT_RUN_STORE):
        return sqlite_url(run_dir / DEFAULT_RUN_STORE)
    if recorded and isinstance(url, str) and not password_hidden(url):
        return url
    raise ConfigError(f"{run_dir}: this run's store is {url}; give its full URL with {flag}")


def resumed_stores(
    run_dir: Path, manifest: Mapping[str, Any], *, store: str | None, run_store: str | None
) -> tuple[str | None, str]:
    """The LM cache and ledger store and the run store a resumed run uses: each the one its manifest records,
    unless given again (then it must be the same store). ``store`` is ``None`` only for a manifest that records
    none (an older run): the default store then.

    Raises:
        ConfigError: a store given again that is another one, or one whose password the manifest hid and that
            is not given again (see :func:`resumed_url`).
    """
    recorded = manifest.get("run_store_url")
    if recorded in (None, DEFAULT_RUN_STORE):
        recorded = sqlite_url(run_dir / DEFAULT_RUN_STORE)
    run_url = resumed_url(run_dir, str(recorded), run_store, flag="--run-store", what="run store")
    ledger = manifest.get("store_url")
    if not isinstance(ledger, str):
        return store, run_url
    env = os.environ.get(STORE_ENV)
    what = "store (LM cache and ledger)"
    return resumed_url(run_dir, ledger, store, flag="--store", what=what, env=env), run_url


def recorded_url(url: str) -> str:
    """A store URL as a manifest records it: its password hidden, a SQLite file by its absolute path (a resume
    from another folder opens the same file)."""
    return _comparable(url)


def resume_command(recipe: str, run_dir: Path, manifest: Mapping[str, Any] | None = None) -> str:
    """The command that continues the run in ``run_dir``: its settings and stores come from its manifest; a
    store whose password the manifest does not keep is named with ``PASSWORD`` in its place, to fill in."""
    words = ["senseforge", "build", recipe, "--out", str(run_dir), "--resume"]
    for key, flag in (("store_url", "--store"), ("run_store_url", "--run-store")):
        recorded = (manifest or {}).get(key)
        if isinstance(recorded, str) and password_hidden(recorded):
            words += [flag, make_url(recorded).set(password="PASSWORD").render_as_string(hide_password=False)]
    return shlex.join(words)


def resume_note(manifest: Mapping[str, Any] | None) -> str:
    """What to add to :func:`resume_command`'s command by hand: the passwords the manifest does not keep."""
    hidden = [key for key in ("store_url", "run_store_url") if password_hidden(str((manifest or {}).get(key)))]
    return " (with the store's password where PASSWORD stands: the manifest does not keep it)" if hidden else ""


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
    config, run_dir, _ = resolve_run_manifest(
        recipe, flags=flags, out=out, resume=resume, config_file=config_file, sets=sets
    )
    return config, run_dir


def resolve_run_manifest(
    recipe: Recipe,
    *,
    flags: Mapping[str, Any],
    out: Path | None,
    resume: bool,
    config_file: Path | None = None,
    sets: Sequence[str] = (),
) -> tuple[RecipeConfig, Path, dict[str, Any] | None]:
    """As :func:`resolve_run`, with the manifest of the run resumed (``None`` for a fresh run), read once for the
    whole command: :func:`check_resume` and :func:`~senseforge.pipelines.runner.build` take it.

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
    return config, out or recipe.default_run_dir(config), manifest
