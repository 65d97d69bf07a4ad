"""Suite-wide fixtures: an isolated senseforge home per test, no network but loopback, and the
real chromium and PostgreSQL that the ``browser`` and ``postgres`` tests need."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import socket
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

FIXTURES = Path(__file__).parent / "fixtures"

# Rich fixes a console's size for good when COLUMNS and LINES are both set as it is made, and the CLI's consoles are
# made at import: an xdist worker has both set (readline sets them to the terminfo default, 80x24), and some shells
# export them. Without them a console reads COLUMNS when it prints, so the ``COLUMNS`` a test passes to the command
# it runs is the width the command prints at, in one process or many.
for _size in ("COLUMNS", "LINES"):
    os.environ.pop(_size, None)

# Under pytest-xdist each worker gets its share of the cores for the models it runs (llama.cpp, torch, and the builds
# it starts in child processes, which inherit this): two workers on two cores then run two model tests at once at one
# thread each. At two threads each they would oversubscribe the cores, and llama.cpp's threads wait on each other
# (a model test ran three times slower that way); one thread alone is only a third slower than two. Answers do not
# depend on the number of threads (llm/providers/llamacpp.py), so goldens hold.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
if _WORKERS > 1:
    _SHARE = str(max(1, len(os.sched_getaffinity(0)) // _WORKERS))
    for _threads in ("SENSEFORGE_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_threads, _SHARE)


def _is_local(address: Any) -> bool:
    if isinstance(address, (str, bytes)):  # unix socket path
        return True
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Refuse connections to anything but loopback, and keep API keys and hubs out."""
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def guarded(sock: socket.socket, address: Any) -> Any:
        if not _is_local(address):
            raise RuntimeError(f"test tried to reach the network: {address!r}")
        return real_connect(sock, address)

    def guarded_ex(sock: socket.socket, address: Any) -> Any:
        if not _is_local(address):
            raise RuntimeError(f"test tried to reach the network: {address!r}")
        return real_connect_ex(sock, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    monkeypatch.setattr(socket.socket, "connect_ex", guarded_ex)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "SENSEFORGE_STORE_URL", "SENSEFORGE_MODEL", "SENSEFORGE_PRICES"):
        monkeypatch.delenv(key, raising=False)
    yield


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder per test session where the bundled model is assembled once."""
    return tmp_path_factory.mktemp("models")


@pytest.fixture(autouse=True)
def senseforge_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, models_dir: Path) -> Path:
    """Each test gets its own store and price table; bundled models are shared."""
    home = tmp_path / "senseforge-home"
    monkeypatch.setenv("SENSEFORGE_HOME", str(home))
    monkeypatch.setenv("SENSEFORGE_MODELS", str(models_dir))
    os.environ.pop("SENSEFORGE_STORE_URL", None)
    return home


# --- real chromium and PostgreSQL -------------------------------------------------------------
# Tests marked ``browser`` use the ``chromium`` (session) or ``page`` (per test) fixtures; tests
# marked ``postgres`` use ``pg_url`` (a fresh database per test), and a test that takes ``db_url``
# runs once on SQLite and once on PostgreSQL. Without a browser or a server these tests skip on a
# dev machine and fail under CI=true. .ci/run sets SENSEFORGE_TEST_CHROMIUM, SENSEFORGE_TEST_PG_URL
# and SENSEFORGE_TEST_REPORT (where the counts of browser and postgres tests that ran go). Under
# pytest-xdist each worker counts its own tests and the controller adds them up and writes the file.

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
_RAN = {"browser": 0, "postgres": 0}
_MARKED: dict[str, set[str]] = {}  # node id -> which of those markers the test carries


def _under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def _missing(what: str) -> NoReturn:
    """A browser or server the test needs is not there: fail under CI=true, else skip."""
    if _under_ci():
        pytest.fail(f"{what} (CI=true: browser and PostgreSQL tests must run)", pytrace=False)
    pytest.skip(what)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        marked = {mark.name for mark in item.iter_markers()} & _RAN.keys()
        if marked:
            _MARKED[item.nodeid] = marked


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Counts the browser and postgres tests whose body ran (passed or failed, not skipped)."""
    if report.when != "call" or report.skipped:
        return
    for marker in _MARKED.get(report.nodeid, ()):
        _RAN[marker] += 1


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Writes the counts to SENSEFORGE_TEST_REPORT; an xdist worker hands its counts to the controller instead."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["senseforge_ran"] = dict(_RAN)
        return
    target = os.environ.get("SENSEFORGE_TEST_REPORT")
    if target:
        Path(target).write_text(json.dumps(_RAN) + "\n", encoding="utf-8")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """The xdist controller adds each worker's counts up (it collects nothing, so it counts nothing itself)."""
    ran = getattr(node, "workeroutput", {}).get("senseforge_ran", {})
    for marker in _RAN:
        _RAN[marker] += int(ran.get(marker, 0))


@pytest.fixture(scope="session")
def chromium() -> Iterator[Browser]:
    """Debian's chromium (SENSEFORGE_TEST_CHROMIUM, else /usr/bin/chromium) driven by Playwright."""
    path = os.environ.get("SENSEFORGE_TEST_CHROMIUM") or "/usr/bin/chromium"
    if not os.access(path, os.X_OK):
        _missing(f"no chromium at {path} (apt-get install chromium, or set SENSEFORGE_TEST_CHROMIUM)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed (pip install -e '.[dev]')")
    playwright = sync_playwright().start()
    try:
        browser = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
    except Exception as error:
        playwright.stop()
        _missing(f"chromium at {path} does not start: {error}")
    try:
        yield browser
    finally:
        browser.close()
        playwright.stop()


@pytest.fixture
def page(chromium: Browser) -> Iterator[Page]:
    """A fresh browser context and page per test, closed after it."""
    context = chromium.new_context()
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture(autouse=True)
def _asyncio_outside_browser(request: pytest.FixtureRequest) -> Iterator[None]:
    """Lets tests that use no browser call ``asyncio.run`` after the session's chromium started.

    Playwright's sync API leaves its event loop marked as running in this thread between calls;
    tests that do not touch the browser get the mark cleared, and it is put back after them."""
    hidden = asyncio._get_running_loop()
    if hidden is None or "chromium" in request.fixturenames:
        yield
        return
    asyncio._set_running_loop(None)
    try:
        yield
    finally:
        asyncio._set_running_loop(hidden)


@pytest.fixture(scope="session")
def pg_admin_url() -> str:
    """SENSEFORGE_TEST_PG_URL (``postgresql+psycopg://user@127.0.0.1:port/db``), checked to answer."""
    url = os.environ.get("SENSEFORGE_TEST_PG_URL")
    if not url:
        _missing("no PostgreSQL server (set SENSEFORGE_TEST_PG_URL; .ci/run starts one)")
    try:
        import psycopg
    except ImportError:
        _missing("psycopg is not installed (pip install -e '.[dev]')")
    try:
        with psycopg.connect(_libpq(url), connect_timeout=10) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as error:
        _missing(f"PostgreSQL at {url} does not answer: {error}")
    return url


def _libpq(url: str, database: str | None = None) -> str:
    """The SQLAlchemy URL as a libpq one, optionally naming another database."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url).set(drivername="postgresql")
    if database is not None:
        parsed = parsed.set(database=database)
    return parsed.render_as_string(hide_password=False)


@pytest.fixture
def pg_url(pg_admin_url: str) -> Iterator[str]:
    """A SQLAlchemy URL of a database made for this test alone, dropped after it."""
    import psycopg
    from psycopg import sql
    from sqlalchemy.engine import make_url

    name = f"senseforge_t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(_libpq(pg_admin_url), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_url(pg_admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(_libpq(pg_admin_url), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database per test: a SQLite file, and (the ``postgres`` param) a PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'test.db'}"
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
def tiny_gpt2() -> Callable[[Path, list[str]], None]:
    """A builder of random-weight 2-layer GPT-2 folders with a byte-level BPE tokenizer trained on ``texts``."""
    return build_tiny_gpt2


def build_tiny_gpt2(folder: Path, texts: list[str]) -> None:
    """A random-weight 2-layer GPT-2 with a byte-level BPE tokenizer trained on ``texts``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    special = "<|endoftext|>"
    fast = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tokenizer, bos_token=special, eos_token=special, pad_token=special, unk_token=special
    )
    fast.save_pretrained(folder)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(fast), n_positions=512, n_layer=2, n_head=2, n_embd=32)
    config.bos_token_id = config.eos_token_id = config.pad_token_id = fast.eos_token_id
    GPT2LMHeadModel(config).save_pretrained(folder)


def run_lm_eval(model: Path | str, tasks: str, include_path: Path, out: Path, *extra: str) -> None:
    """Run lm-evaluation-harness offline on a local hf ``model`` (``--model hf``, CPU); fail on a non-zero exit."""
    import subprocess
    import sys

    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HOME": str(out.parent / "hf-home"),
        "TOKENIZERS_PARALLELISM": "false",
    }
    command = [sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args", f"pretrained={model}"]
    command += ["--tasks", tasks, "--include_path", str(include_path), "--device", "cpu", "--output_path", str(out)]
    done = subprocess.run([*command, *extra], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]


@pytest.fixture
def lm_eval_runner() -> Callable[..., None]:
    """:func:`run_lm_eval`, for tests that run the exported lm-eval tasks."""
    return run_lm_eval
