"""Runs that advance by themselves (``annotate serve --follow``): the follower, the admin page's run state, and an
annotator told that more work is coming.

The follower's own loop runs in a thread; these tests step it by hand with a clock they move (settle times without
sleeps), and its children are real processes: ``senseforge build … --resume``, or a small program that says what it
was asked and exits as the test wants. A child killed mid-advance is stopped at a handshake (named pipes), never
after a sleep.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

import sqlalchemy as sa
from starlette.testclient import TestClient

from senseforge.annotate.app import create_app
from senseforge.annotate.follow import Follower, ready_tasks
from senseforge.annotate.store import AnnotationStore
from senseforge.annotate.tasktypes import task_type
from senseforge.pipelines.human_gen.config import HumanGenConfig
from senseforge.pipelines.human_gen.recipe import HUMAN_GEN
from senseforge.pipelines.runlease import WriterLease, lease_holder
from senseforge.pipelines.runner import build
from senseforge.pipelines.runstore import RunStore, sqlite_url
from senseforge.pipelines.status import run_status
from senseforge.pipelines.tables import assignments

from ..pipelines.golden import outputs, people_rows

PEOPLE = ("ana", "bo", "cy")
TASKS = ("create", "qc", "revise", "answer")


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def config_of(tmp_path: Path) -> HumanGenConfig:
    table = tmp_path / "concepts.csv"
    table.write_text("category,concept\nculinary,rendang\nplace,pasar\n", encoding="utf-8")
    return HumanGenConfig(concepts=str(table), assignment="one", pool=PEOPLE)


def fields(task: str, shown: dict[str, Any]) -> dict[str, Any]:
    """What a person answers, from what the task shows them (the same in every run)."""
    if task == "create":
        return {
            "question": f"Di mana orang biasanya makan {shown['concept']}?",
            "options": ["rumah", "kantor", "pasar malam", "sekolah", "sawah"],
            "answer": "A",
            "distractor": "C",
        }
    if task == "qc":
        return {"verdict": "complete"}
    if task == "answer":
        return {"choice": "A", "certain": "yes"}
    raise AssertionError(f"no {task} task is expected here")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def one_pass(client: TestClient, tokens: dict[str, str]) -> tuple[int, dict[str, bool]]:
    """Everyone does all they are offered, over the JSON API; how many judgements, and who was told more is coming."""
    made = 0
    told: dict[str, bool] = {}
    for who in PEOPLE:
        for task in TASKS:
            while True:
                got = client.post(f"/api/{task}/next", headers=bearer(tokens[who]))
                if got.status_code == 204:
                    told[who] = told.get(who, False)
                    break
                assert got.status_code == 200, got.text
                body = got.json()
                if body["assignment_id"] is None:
                    assert body["more_coming"] is True and got.headers["retry-after"] == str(body["retry_after_s"])
                    told[who] = True
                    break
                sent = client.post(
                    f"/api/{task}/{body['assignment_id']}", headers=bearer(tokens[who]), json=fields(task, body["item"])
                )
                assert sent.status_code == 201, sent.text
                made += 1
    return made, told


def advance(follower: Follower, clock: Clock) -> int | None:
    """Let the follower see the run, wait out its settle time, and run the advance it starts; its exit status."""
    follower.step()
    clock.now += follower.settle_s
    follower.step()
    assert follower.busy, "the follower started no advance"
    return follower.wait(timeout_s=120)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A human-gen run of three people, waiting for its first judgements (create)."""
    folder = tmp_path / "run"
    assert build(HUMAN_GEN, config_of(tmp_path), folder).state == "awaiting_review"
    return folder


@pytest.fixture
def stored_run(tmp_path: Path, db_url: str) -> tuple[Path, str]:
    """The same run with its store on SQLite or PostgreSQL (``--run-store``): the folder and the store's URL."""
    folder = tmp_path / "stored-run"
    assert build(HUMAN_GEN, config_of(tmp_path), folder, run_store_url=db_url).state == "awaiting_review"
    return folder, db_url


def invite(url: str) -> dict[str, str]:
    store = AnnotationStore(url)
    try:
        tokens = {who: store.invite(who) for who in PEOPLE}
        tokens["boss"] = store.invite("boss", "admin")
        return tokens
    finally:
        store.close()


def reference_run(tmp_path: Path) -> Path:
    """The same run driven the same way over the JSON API but resumed by hand, never interrupted: what a followed
    run must equal."""
    folder = tmp_path / "reference"
    config = config_of(tmp_path)
    summary = build(HUMAN_GEN, config, folder)
    url = sqlite_url(folder / "run.db")
    tokens = invite(url)
    with TestClient(create_app(url, clock=lambda: JUDGED_AT)) as client:
        for _ in range(10):
            if summary.state == "done":
                return folder
            one_pass(client, tokens)
            summary = build(HUMAN_GEN, config, folder, resume=True)
    raise AssertionError("the reference run never finished")


JUDGED_AT = 1_790_000_000.0
"""When every judgement is made (the app stamps it in the item's history): the same in both runs."""


HANDSHAKE = """
import os, sys
from pathlib import Path
from senseforge.pipelines.runstore import RunStore

here = Path(os.environ["SENSEFORGE_TEST_HANDSHAKE"])
if not (here / "used").exists():  # the first advance only: it stops after its first stored batch
    (here / "used").touch()
    stored = RunStore.put

    def put(self, stage, results, **kwargs):
        payloads = stored(self, stage, results, **kwargs)
        if results:
            with open(here / "ready", "w") as fifo:
                fifo.write(f"{os.getpid()} {stage}\\n")
            with open(here / "go") as fifo:  # blocks until the test lets it go (it kills it instead)
                fifo.read()
        return payloads
    RunStore.put = put
from senseforge.cli.main import main
main(sys.argv[1:])
"""


def test_a_followed_human_gen_run_goes_from_create_to_done_with_no_resume_typed(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three people over the JSON API; the follower resumes the run each time their judgements let it move on. Its
    first advance is stopped mid-way (after its first stored batch) and killed with SIGKILL while a `build --resume`
    typed by hand is refused; the next advance takes over the dead child's lease; the run ends done, its outputs and
    people's work identical to a run never interrupted."""
    url = sqlite_url(run_dir / "run.db")
    tokens = invite(url)
    here = tmp_path / "handshake"
    here.mkdir()
    os.mkfifo(here / "ready")
    os.mkfifo(here / "go")
    monkeypatch.setenv("SENSEFORGE_TEST_HANDSHAKE", str(here))
    script = tmp_path / "child.py"
    script.write_text(HANDSHAKE, encoding="utf-8")
    clock = Clock()
    follower = Follower(run_dir, url, settle_s=5.0, poll_s=3600.0, command=[sys.executable, str(script)], clock=clock)
    state = lambda: run_status(run_dir).model_dump(mode="json")  # noqa: E731
    app = create_app(url, clock=lambda: JUDGED_AT, follower=follower, run_state=state)
    waits: list[str] = []
    with TestClient(app) as client:

        def admin() -> str:
            page = client.get("/admin", headers=bearer(tokens["boss"]))
            assert page.status_code == 200
            return page.text

        # the first advance: killed mid-way, while a resume typed by hand is refused
        waits.append(admin().split('id="run-state"', 1)[1].split("</p>", 1)[0])
        made, told = one_pass(client, tokens)
        assert made == 2 and told == {"ana": True, "bo": True, "cy": True}  # nothing left now, but more is coming
        page = client.get("/t/create", headers=bearer(tokens["cy"]))
        assert 'id="more-coming"' in page.text and 'id="done"' not in page.text
        follower.step()
        clock.now += follower.settle_s
        follower.step()
        with open(here / "ready") as fifo:
            pid_text, stage = fifo.read().split()
        assert follower.child_pid() == int(pid_text) and stage == "create"  # stopped with create's results stored
        typed = subprocess.run(
            [sys.executable, "-m", "senseforge", "build", "human-gen", "--out", str(run_dir), "--resume"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert typed.returncode == 75, typed.stderr
        lines = typed.stderr.strip().splitlines()  # the run it names (as every build says first), then one error
        assert len(lines) == 2 and lines[0].startswith("run: "), typed.stderr
        line = lines[1]
        assert line.startswith("error: another process builds this run: pid " + pid_text), line
        assert "State: <strong" in admin() and "an advance is running now" in admin()
        os.kill(int(pid_text), 9)
        assert follower.wait(timeout_s=60) == -9
        assert run_status(run_dir).state == "stopped"  # its process is gone mid-build
        assert "killed by signal 9, will resume" in admin()

        # the next advances: each after the people's judgements settle, until the run is done
        assert advance(follower, clock) == 0
        for _ in range(10):
            if follower.finished:
                break
            waits.append(admin().split('id="run-state"', 1)[1].split("</p>", 1)[0])
            made, _ = one_pass(client, tokens)
            assert made > 0
            assert advance(follower, clock) == 0
        assert follower.finished and not follower.following
        final = admin()
        assert '<strong id="run-state-label">done</strong>' in final
        assert final.count("<td>ok: ") == len(follower.advances()) - 1  # every advance but the killed one
        # the run is done: nothing more is coming
        assert client.post("/api/answer/next", headers=bearer(tokens["ana"])).status_code == 204
        assert 'id="done"' in client.get("/t/answer", headers=bearer(tokens["ana"])).text
    assert any("create" in wait for wait in waits) and any("qc" in wait for wait in waits)
    assert any("answer" in wait for wait in waits)
    assert all("waiting on people" in wait for wait in waits)
    reference = reference_run(tmp_path)
    assert outputs(run_dir) == outputs(reference)
    differing = [name for name in outputs(run_dir) if (run_dir / name).read_bytes() != (reference / name).read_bytes()]
    assert not differing
    assert people_rows(run_dir) == people_rows(reference)


def program(tmp_path: Path, code: int, line: str) -> list[str]:
    """A stand-in for ``senseforge``: records the arguments it was given, prints ``line`` and exits ``code``."""
    script = tmp_path / f"child{code}.py"
    script.write_text(
        "import sys\n"
        f"open({str(tmp_path / 'argv')!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        f"print({line!r})\n"
        f"sys.exit({code})\n",
        encoding="utf-8",
    )
    return [sys.executable, str(script)]


def judge_one_create(url: str) -> None:
    """ana writes her item: one create task complete."""
    store = AnnotationStore(url)
    try:
        kind = task_type("create")
        lease = store.next_assignment("ana", "create")
        assert lease is not None
        assert store.submit(lease.id, "ana", kind.parse(lease.input, fields("create", kind.view(lease.input))))
    finally:
        store.close()


def test_an_advance_waits_for_settled_judgements_and_an_undo_waits_again(
    stored_run: tuple[Path, str], tmp_path: Path
) -> None:
    run_dir, url = stored_run
    clock = Clock()
    follower = Follower(run_dir, url, settle_s=10.0, command=program(tmp_path, 0, "resumed"), clock=clock)
    try:
        follower.step()
        assert not follower.busy  # nothing judged: nothing to decide
        judge_one_create(url)
        (ready,) = ready_tasks(follower.run.engine)
        assert ready[0] == "create"
        follower.step()
        clock.now += 9.0
        follower.step()
        assert not follower.busy  # within the settle time
        with follower.run.engine.begin() as conn:  # the judgement taken back (as an undo does): the task is open
            conn.execute(sa.update(assignments).values(done_at=None))
        follower.step()
        clock.now += 1.0
        follower.step()
        assert not follower.busy and not ready_tasks(follower.run.engine)
        with follower.run.engine.begin() as conn:  # judged again: the wait starts again
            conn.execute(sa.update(assignments).values(done_at=1.0))
        follower.step()
        clock.now += 9.5
        follower.step()
        assert not follower.busy
        clock.now += 0.5
        follower.step()
        assert follower.busy
        assert follower.wait(timeout_s=60) == 0
        (done,) = follower.advances()
        assert done.why == "judged: create 1" and done.outcome == "ok: resumed"
        assert (tmp_path / "argv").read_text() == f"build human-gen --out {run_dir.resolve()} --resume\n"
        follower.step()
        clock.now += 100.0
        follower.step()
        assert not follower.busy  # what it resumed for is consumed: no second advance for the same judgements
    finally:
        follower.stop()


def test_a_run_someone_else_builds_is_waited_for_never_forced_and_a_failed_advance_stops_following(
    stored_run: tuple[Path, str], tmp_path: Path
) -> None:
    run_dir, url = stored_run
    judge_one_create(url)
    clock = Clock()
    busy = Follower(
        run_dir, url, settle_s=1.0, command=program(tmp_path, 75, "error: another process builds"), clock=clock
    )
    store = RunStore(url)
    try:
        lease = WriterLease(store, every_s=3600.0).acquire()  # a build typed by hand holds the run
        busy.step()
        clock.now += 1.0
        busy.step()
        assert not busy.busy and busy.waiting_for is not None and f"pid {os.getpid()}" in busy.waiting_for
        lease.release()
        assert advance(busy, clock) == 75  # refused all the same (it lost a race): recorded, and tried again
        assert busy.following and busy.advances()[0].outcome.startswith("busy (another process builds the run)")
    finally:
        busy.stop()
        store.close()
    failing = Follower(
        run_dir, url, settle_s=1.0, command=program(tmp_path, 1, "error: the model is gone"), clock=clock
    )
    app = create_app(url, follower=failing)
    tokens = invite(url)
    try:
        assert advance(failing, clock) == 1
        assert not failing.following and failing.cause == "error: the model is gone"
        with TestClient(app) as client:
            page = client.get("/admin", headers=bearer(tokens["boss"])).text
            assert '<span id="run-cause">error: the model is gone</span>' in page
            assert "failed (exit 1): error: the model is gone" in page
            # no longer followed: an empty queue says thank you, as without --follow
            assert client.post("/api/create/next", headers=bearer(tokens["cy"])).status_code == 204
    finally:
        failing.stop()


def test_a_server_killed_mid_advance_leaves_it_marked_interrupted_for_the_next(run_dir: Path, tmp_path: Path) -> None:
    url = sqlite_url(run_dir / "run.db")
    judge_one_create(url)
    clock = Clock()
    first = Follower(run_dir, url, settle_s=1.0, command=program(tmp_path, 0, "resumed"), clock=clock)
    first.step()
    clock.now += 1.0
    first.step()
    assert first.busy
    first.wait(timeout_s=60)
    with first.run.engine.begin() as conn:  # as a server killed before it recorded the end leaves it
        conn.exec_driver_sql("UPDATE advances SET finished = NULL, exit_code = NULL")
    second = Follower(run_dir, url, settle_s=1.0, command=program(tmp_path, 0, "resumed"), clock=clock)
    try:
        (row,) = second.advances()
        assert row.outcome == "interrupted (the server stopped first)"
    finally:
        second.stop()
        first.run.close()


def test_a_new_follower_does_not_resume_for_what_the_last_build_already_read(run_dir: Path, tmp_path: Path) -> None:
    url = sqlite_url(run_dir / "run.db")
    judge_one_create(url)
    assert build(HUMAN_GEN, config_of(tmp_path), run_dir, resume=True).state == "awaiting_review"  # read it
    clock = Clock()
    follower = Follower(run_dir, url, settle_s=1.0, command=program(tmp_path, 0, "resumed"), clock=clock)
    try:
        follower.step()
        clock.now += 5.0
        follower.step()
        assert not follower.busy and len(ready_tasks(follower.run.engine)) == 1
    finally:
        follower.stop()
    (run_dir / "review" / "queue.jsonl").write_text("not json\n", encoding="utf-8")
    unsure = Follower(run_dir, url, settle_s=1.0, command=program(tmp_path, 0, "resumed"), clock=clock)
    try:  # a queue it cannot read: one advance checks
        assert advance(unsure, clock) == 0
    finally:
        unsure.stop()


SITE_HOOK = """
import os, sys
from pathlib import Path

here = os.environ.get("SENSEFORGE_TEST_HANDSHAKE")
if here and "build" in sys.argv and not (Path(here) / "used").exists():  # the first advance only
    (Path(here) / "used").touch()
    from senseforge.pipelines.runstore import RunStore

    stored = RunStore.put

    def put(self, stage, results, **kwargs):
        payloads = stored(self, stage, results, **kwargs)
        if results:
            with open(Path(here) / "ready", "w") as fifo:
                fifo.write(f"{os.getpid()} {stage}\\n")
            with open(Path(here) / "go") as fifo:
                fifo.read()
        return payloads

    RunStore.put = put
"""


def read_fifo(path: Path, timeout_s: float) -> str:
    """What a writer writes into the named pipe ``path`` (the deadline only bounds a broken test)."""
    import select

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        got = b""
        deadline = time.monotonic() + timeout_s
        while not got.endswith(b"\n"):
            left = deadline - time.monotonic()
            assert left > 0, f"nothing came through {path}"
            readable, _, _ = select.select([fd], [], [], left)
            if readable:
                got += os.read(fd, 4096)
        return got.decode()
    finally:
        os.close(fd)


def test_a_real_server_killed_mid_advance_loses_nothing_and_the_next_server_goes_on(
    run_dir: Path, tmp_path: Path
) -> None:
    """``annotate serve --follow`` as its own process: killed (SIGKILL) while its advance is mid-way; the orphaned
    advance finishes; a new server marks it interrupted in the log and follows the run to done."""
    httpx = pytest.importorskip("httpx")
    url = sqlite_url(run_dir / "run.db")
    tokens = invite(url)
    here = tmp_path / "handshake"
    here.mkdir()
    os.mkfifo(here / "ready")
    os.mkfifo(here / "go")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SITE_HOOK, encoding="utf-8")
    env = {
        **os.environ,
        "SENSEFORGE_TEST_HANDSHAKE": str(here),
        "PYTHONPATH": os.pathsep.join([str(hooks), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "senseforge", "annotate", "serve", str(run_dir), "--port", str(port)]
    command += ["--no-access-log", "--follow", "--settle", "0"]

    def serve() -> subprocess.Popen[bytes]:
        server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/favicon.ico", timeout=1.0).status_code == 204:
                    return server
            except httpx.TransportError:
                time.sleep(0.1)
        server.kill()
        raise AssertionError("the annotation server did not come up")

    def work() -> int:
        made = 0
        for who in PEOPLE:
            for task in TASKS:
                while True:
                    headers = bearer(tokens[who])
                    got = httpx.post(f"{base}/api/{task}/next", headers=headers, timeout=30)
                    if got.status_code == 204 or got.json()["assignment_id"] is None:
                        break
                    body = got.json()
                    answer = fields(task, body["item"])
                    sent = httpx.post(f"{base}/api/{task}/{body['assignment_id']}", headers=headers, json=answer)
                    assert sent.status_code == 201, sent.text
                    made += 1
        return made

    server = serve()
    try:
        assert work() == 2  # the two creates
        pid_text, stage = read_fifo(here / "ready", 120).split()
        assert stage == "create"
        store = RunStore(url)
        try:
            holder = lease_holder(store)
            assert holder is not None and holder.pid == int(pid_text)  # the advance holds the run mid-way
        finally:
            store.close()
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=10)
        with open(here / "go", "w") as fifo:  # the advance the dead server started goes on, and finishes
            fifo.write("go\n")
        deadline = time.monotonic() + 120
        store = RunStore(url)
        try:
            while lease_holder(store) is not None or store.meta("state") == "running":
                assert time.monotonic() < deadline, "the orphaned advance never finished"
                time.sleep(0.1)
        finally:
            store.close()
        server = serve()
        deadline = time.monotonic() + 240
        while True:
            admin = httpx.get(f"{base}/admin", headers=bearer(tokens["boss"]), timeout=30).text
            if '<strong id="run-state-label">done</strong>' in admin:
                break
            assert time.monotonic() < deadline, "the run never got done"
            if not work():
                time.sleep(0.2)
        assert "interrupted (the server stopped first)" in admin
        assert httpx.post(f"{base}/api/answer/next", headers=bearer(tokens["ana"]), timeout=30).status_code == 204
    finally:
        server.kill()
        server.wait(timeout=10)
    assert run_status(run_dir).state == "done"
    assert len((run_dir / "id" / "dataset" / "test.jsonl").read_text(encoding="utf-8").splitlines()) == 2
