"""Every registered task type done by keyboard alone: what each queues and the keys a person presses.

Shared by ``tests/annotate/test_keyboard.py`` (each type must be completed this way; the keystrokes of a
verify-style judgement are counted and asserted) and ``benchmarks/annotation_keystrokes.py`` (the same
sessions repeated, with the time each judgement takes, printed as a table). A session starts on the loaded
task page and ends on the page the submit leads to; it presses keys (``page.keyboard``) and types into the
element that has the focus, never clicks and never fills a field by its selector.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn

from senseforge.annotate.app import create_app
from senseforge.annotate.store import AnnotationStore
from senseforge.data.crow_items import AnnotationItem, KnowledgeCheckItem, RewriteCheckItem, RewriteItem
from senseforge.data.schema import Choice, ConceptSlot, Draft, DraftItem, MCItem, OpenAnswer, QCEvent
from senseforge.pipelines.taskqueue import QueuedTask

WHO = "kim"
"""The one annotator of every session (the writer of the slots and drafts to revise, never the creator of a
draft to check)."""


@contextmanager
def serve(db_url: str, start_timeout: float = 20.0) -> Iterator[str]:
    """The app over ``db_url`` under uvicorn on a free loopback port, in a background thread; its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(create_app(db_url), log_level="warning", access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout
    try:
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@dataclass
class Keyboard:
    """The page's keyboard, counting: ``keys`` pressed (shortcuts, Tab, Esc, Enter) and characters ``typed``."""

    page: Any
    keys: int = 0
    typed: int = 0

    def press(self, *keys: str) -> None:
        for key in keys:
            self.page.keyboard.press(key)
            self.keys += 1

    def type(self, text: str) -> None:
        """Type text into whatever has the focus (one keystroke a character)."""
        self.page.keyboard.type(text)
        self.typed += len(text)

    def submit(self, key: str = "Enter") -> None:
        """The key that submits, waiting for the page it leads to."""
        with self.page.expect_navigation():
            self.press(key)

    def focused(self) -> str:
        """What has the focus: ``tag#id`` or ``tag[name]`` (``body`` when nothing does)."""
        return str(
            self.page.evaluate(
                "(() => { const el = document.activeElement; if (!el) return 'none';"
                " return el.tagName.toLowerCase() + (el.id ? '#' + el.id : el.name ? '[' + el.name + ']' : ''); })()"
            )
        )

    def wait_for_focus(self, element_id: str) -> None:
        """Wait until the page's own focus (``autofocus``) is in ``element_id``, as a person sees the cursor."""
        self.page.wait_for_function(f"document.activeElement && document.activeElement.id === {element_id!r}")

    @property
    def total(self) -> int:
        return self.keys + self.typed


@dataclass(frozen=True)
class Session:
    """How one task type is queued and judged by keyboard, and what the judgement must then hold."""

    style: str
    """``verify``: a judgement that picks (asserted to take at most two keystrokes); ``pick``: several picks;
    ``write``: text written."""
    queue: Callable[[AnnotationStore, int], None]
    """Queue ``n`` tasks of the type for :data:`WHO`."""
    judge: Callable[[Keyboard], None]
    """One judgement, from the loaded task page to the page after the submit."""
    check: Callable[[Any], bool]
    """Whether a stored judgement is the one the keys made."""
    path: str = field(default="")
    """The keys, as a person reads them (for the table)."""


def mc_item(n: int, **update: Any) -> MCItem:
    item = MCItem(
        id=f"q{n}",
        lang="en",
        question=f"Where do you put clean plates, number {n}?",
        choices=[{"label": label, "text": f"place {label.lower()}{n}"} for label in "ABCDE"],
        answer="A",
    )
    return item.model_copy(update=update) if update else item


def _adapted(n: int) -> MCItem:
    source = {"lang": "en", "question": "Where is snow kept?", "concept": "snow", "answer": "A",
              "choices": [[label, f"spot {label.lower()}"] for label in "ABCDE"]}  # fmt: skip
    return mc_item(n, question_concept="hujan abu", metadata={"source": source})


def _slot(n: int) -> ConceptSlot:
    return ConceptSlot(id=f"c{n}", lang="en", category="weather", concept="umbrella", creator=WHO)


def _draft(n: int, rnd: int, creator: str, history: list[QCEvent]) -> DraftItem:
    texts = ["an umbrella", "a raincoat", "sunglasses", "a scarf", "a kite"]
    choices = [Choice(label=label, text=text) for label, text in zip("ABCDE", texts, strict=True)]
    question = "Which umbrella do you take along when it rains?"
    return DraftItem(
        id=f"w{n}@{rnd}", item_id=f"w{n}", lang="en", category="weather", concept="umbrella", creator=creator,
        draft=Draft(question=question, choices=choices, answer="A", distractor="B"), history=history,
    )  # fmt: skip


def _to_check(n: int) -> DraftItem:
    return _draft(n, 0, "ana", [QCEvent(status="submitted", by="ana", round=0)])


def _sent_back(n: int) -> DraftItem:
    back = QCEvent(status="needs_revision", by="bo", round=1, comment="say when")
    return _draft(n, 1, WHO, [QCEvent(status="submitted", by=WHO, round=0), back])


def _open(n: int) -> OpenAnswer:
    return OpenAnswer(
        id=f"o{n}::m", item_id=f"o{n}", model="scripted/m", lang="en", question="Where do plates go?",
        gold="a rack", answer="the rack",
    )  # fmt: skip


PAIR = {"task": "safety", "lang": "en", "context_name": "scenario", "target_name": "action", "label": "safe"}
TRIPLE = {"head": "lid", "relation": "UsedFor", "tail": "smothering", "verbalized": "a lid is used for smothering"}


def _pair_to_annotate(n: int) -> AnnotationItem:
    shown = {**PAIR, "id": f"safety/a{n}/0", "context": "Oil in the pan catches fire", "target": "use a lid"}
    return AnnotationItem.model_validate(shown)


def _triple_to_check(n: int) -> KnowledgeCheckItem:
    shown = {**PAIR, "id": f"safety/c{n}/0/0", "context": "A pan of oil catches fire", "target": "cover it"}
    return KnowledgeCheckItem.model_validate({**shown, "triple": TRIPLE})


def _to_rewrite(n: int) -> RewriteItem:
    shown = {**PAIR, "id": f"safety/w{n}/0/0", "context": "Oil catches fire", "target": "cover the pan with a lid"}
    return RewriteItem.model_validate({**shown, "flipped": "unsafe", "triples": [TRIPLE]})


def _rewrite_to_check(n: int) -> RewriteCheckItem:
    shown = {**PAIR, "id": f"safety/v{n}/0/0", "context": "A pan of oil catches fire", "target": "cover it with a lid"}
    broken = [{"head": "lid", "relation": "UsedFor", "tail": "smothering"}]
    return RewriteCheckItem.model_validate(
        {**shown, "rewrite": "cover it with water", "flipped": "unsafe", "violates": broken, "edits": 2}
    )


def _items(task: str, make: Callable[[int], MCItem]) -> Callable[[AnnotationStore, int], None]:
    """Queue ``n`` items for a task type over items, k = 1."""

    def queue(store: AnnotationStore, n: int) -> None:
        store.add_tasks(task, [make(i) for i in range(n)], k=1, group="g")

    return queue


def _tasks(task: str, make: Callable[[int], Any], **extra: Any) -> Callable[[AnnotationStore, int], None]:
    """Queue ``n`` tasks of a type over any input (``extra``: who may take them, k, group, creator)."""

    def queue(store: AnnotationStore, n: int) -> None:
        store.queue([QueuedTask(type=task, input=make(i), **extra) for i in range(n)])

    return queue


def _keys(*keys: str, last: str = "Enter") -> Callable[[Keyboard], None]:
    """A judgement that is keys pressed, the last one submitting."""

    def judge(kb: Keyboard) -> None:
        kb.press(*keys)
        kb.submit(last)

    return judge


def _create(kb: Keyboard) -> None:
    # the page opens in the question box; Tab goes on to each option; Esc leaves the field for the keys
    kb.wait_for_focus("question")
    kb.type("Where do you keep an umbrella?")
    for text in ("in a stand", "in a bag", "on a roof", "in a fridge", "in a kite"):
        kb.press("Tab")
        kb.type(text)
    kb.press("Escape", "1", "Shift+Digit2")
    kb.submit()


def _revise(kb: Keyboard) -> None:
    kb.wait_for_focus("question")
    kb.press("Control+End")  # the page opens in the question box, holding the draft
    kb.type(" today")
    kb.submit("Control+Enter")


def _cka(kb: Keyboard) -> None:
    # no words selected: h and t put the cursor in the current row's head and tail; r opens its relation menu,
    # where letters pick a relation and Enter submits
    kb.press("h")
    kb.type("oil")
    kb.press("Escape", "t")
    kb.type("lid")
    kb.press("Escape", "r", "U")
    kb.submit()


def _wsg(kb: Keyboard) -> None:
    kb.press("r", "Control+Backspace")  # the cursor to the end of the rewrite; the last word goes
    kb.type("towel")
    kb.submit("Control+Enter")


def _triples(judgement: Any) -> list[tuple[str, str, str]]:
    return [(t.head, t.relation, t.tail) for t in judgement.triples]


def _written(judgement: Any) -> tuple[str, str, str | None]:
    return judgement.draft.question, judgement.draft.answer, judgement.draft.distractor


CROW = {"k": 1, "group": "g"}
SESSIONS: dict[str, Session] = {
    "verify": Session("verify", _items("verify", mc_item), _keys("1"), lambda j: j.accept is True, "1 Enter"),
    "answer": Session(
        "verify", _items("answer", mc_item), _keys("2"), lambda j: (j.choice, j.certain) == ("B", True), "2 Enter"
    ),
    "create": Session(
        "write",
        _tasks("create", _slot, eligible=(WHO,)),
        _create,
        lambda j: _written(j) == ("Where do you keep an umbrella?", "A", "B"),
        "the question, Tab and each option, Esc 1 Shift+2 Enter",
    ),
    "qc": Session(
        "verify", _tasks("qc", _to_check, creator="ana"), _keys("1"), lambda j: j.verdict == "complete", "1 Enter"
    ),
    "revise": Session(
        "write",
        _tasks("revise", _sent_back, eligible=(WHO,)),
        _revise,
        lambda j: j.draft.question.endswith("rains? today"),
        "Ctrl+End, the edit, Ctrl+Enter",
    ),
    "adapt-check": Session(
        "verify", _items("adapt-check", _adapted), _keys("1"), lambda j: j.verdict == "correct-major", "1 Enter"
    ),
    "label-errors": Session(
        "pick",
        _items("label-errors", mc_item),
        _keys("1", "a"),
        lambda j: (j.question_error, j.options_error) == ("none", "none"),
        "1 a Enter",
    ),
    "open-judge": Session(
        "verify", _tasks("open-judge", _open), _keys("y"), lambda j: j.verdict == "correct", "y Enter"
    ),
    "cka": Session(
        "write",
        _tasks("cka", _pair_to_annotate, **CROW),
        _cka,
        lambda j: _triples(j) == [("oil", "UsedFor", "lid")],
        "h, the head, Esc t, the tail, Esc r U Enter",
    ),
    "ckv": Session(
        "verify", _tasks("ckv", _triple_to_check, **CROW), _keys("y"), lambda j: j.accept is True, "y Enter"
    ),
    "wsg": Session(
        "write",
        _tasks("wsg", _to_rewrite, **CROW),
        _wsg,
        lambda j: j.rewrite == "cover the pan with a towel",
        "r Ctrl+Backspace, the new word, Ctrl+Enter",
    ),
    "wsv": Session(
        "verify",
        _tasks("wsv", _rewrite_to_check, **CROW),
        _keys("a"),
        lambda j: j.accept is True and all(j.conditions.values()),
        "a Enter",
    ),
}
"""The keyboard session of each task type the app registers, by name."""


@dataclass
class Measured:
    """One task type's judgements by keyboard: keys and characters per judgement, seconds each took."""

    task: str
    keys: list[int] = field(default_factory=list)
    typed: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)


def judge_all(page: Any, base: str, store: AnnotationStore, tasks: Sequence[str], n: int = 1) -> dict[str, Measured]:
    """Queue ``n`` tasks of each type for :data:`WHO`, sign in, and do each by keyboard; what it took.

    Raises:
        AssertionError: a type whose page did not take the judgement, or stored another than the keys made.
    """
    for name in tasks:
        SESSIONS[name].queue(store, n)
    page.goto(f"{base}/login?token={store.invite(WHO)}")
    out: dict[str, Measured] = {}
    for name in tasks:
        session, measured = SESSIONS[name], Measured(name)
        page.goto(f"{base}/t/{name}")
        for _ in range(n):
            kb = Keyboard(page)
            started = time.perf_counter()
            session.judge(kb)
            measured.seconds.append(time.perf_counter() - started)
            measured.keys.append(kb.keys)
            measured.typed.append(kb.typed)
            assert "/t/" in page.url, f"{name}: the submit led to {page.url}"
            problems = page.locator("#problems")
            assert problems.count() == 0, f"{name}: the page refused the judgement: {problems.inner_text()}"
        assert f"Nothing left for you in {name}" in page.content(), f"{name}: not every task was judged"
        stored = [j for js in store.judgements(name).values() for j in js if j.annotator == WHO]
        assert len(stored) == n, f"{name}: {len(stored)} judgements stored, {n} made"
        wrong = [j for j in stored if not session.check(j)]
        assert not wrong, f"{name}: stored {wrong[0]!r}, not what the keys made"
        out[name] = measured
    return out
