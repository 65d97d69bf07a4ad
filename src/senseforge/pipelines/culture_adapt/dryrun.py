"""A stand-in model for dry runs of culture-adapt: no model, no network (``scripted/culture-adapt-author``).

It tells the request kinds apart by their tag (the stage that asks) or, for a request without
one, by its first line (:data:`~.templates.OPENINGS` and the first words of each relevance
template), and answers each as a well-behaved model would, deterministically: it finds a few
Western names and places, judges them and a few Western concepts foreign to any culture but
the United States, swaps them for Indonesian ones when adapting or renaming, and "translates"
by returning the text unchanged.
"""

from __future__ import annotations

import json
import re

from senseforge.llm.base import GenerateRequest, LoglikelihoodRequest
from senseforge.pipelines.culture_adapt.templates import (
    ADAPT_PREFIX,
    EXTRACT_PREFIX,
    OPENINGS,
    RELEVANCE_TEMPLATES,
    RENAME_PREFIX,
)

WESTERN_NAMES = ("John", "James", "Mary", "Sally", "Bob", "Billy", "Sarah", "Tom", "Jane", "Mike", "Joe", "Bill")
WESTERN_PLACES = (
    "United States", "New York", "New Mexico", "North Carolina", "Great Britain", "America", "Michigan",
    "London", "Texas", "California", "Illinois", "England", "Boston", "Chicago", "Colorado",
)  # fmt: skip
WESTERN_CONCEPTS = ("snow", "koala", "baseball", "hamburger", "skiing", "thanksgiving", "hockey", "halloween")
LOCAL_NAMES = ("Budi", "Siti", "Andi", "Dewi", "Agus", "Rina", "Joko", "Wati")
LOCAL_PLACES = ("Jakarta", "Bandung", "Surabaya", "Yogyakarta", "Medan", "Bali", "Bogor", "Malang")


def _pattern(words: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(r"\b(" + "|".join(re.escape(w) for w in words) + r")\b", re.IGNORECASE)


_NAMES, _PLACES, _CONCEPTS = _pattern(WESTERN_NAMES), _pattern(WESTERN_PLACES), _pattern(WESTERN_CONCEPTS)


def _swap(text: str, pattern: re.Pattern[str], western: tuple[str, ...], local: tuple[str, ...]) -> str:
    index = {word.casefold(): i for i, word in enumerate(western)}
    return pattern.sub(lambda m: local[index[m.group(1).casefold()] % len(local)], text)


def _western(text: str) -> bool:
    return any(p.search(text) for p in (_NAMES, _PLACES, _CONCEPTS))


def _kind(text: str) -> str:
    for kind, openings in OPENINGS.items():
        if text.startswith(openings):
            return kind
    return "relevance" if _relevance_index(text) is not None else "unknown"


def _relevance_index(text: str) -> int | None:
    return next((i for i, (t, _) in enumerate(RELEVANCE_TEMPLATES) if text.startswith(t.split("{")[0])), None)


def _says_yes(text: str) -> bool:
    """What a sensible judge says: the element (the prompt's last paragraph) fits unless it is Western."""
    relevant = "United States" in text.split("\n", 1)[0] or not _western(text.rstrip().split("\n\n")[-1])
    index = _relevance_index(text)
    return relevant == (RELEVANCE_TEMPLATES[index][1] if index is not None else True)


def _last(text: str, label: str) -> str:
    found = re.findall(rf"^{label}: (.*)$", text, flags=re.MULTILINE)
    return found[-1] if found else ""


def _extract(text: str) -> dict[str, list[str]]:
    tail = text[text.rfind("Question:") :]
    names = list(dict.fromkeys(m.group(0) for m in _NAMES.finditer(tail)))
    return {"names": names, "places": list(dict.fromkeys(m.group(0) for m in _PLACES.finditer(tail)))}


def _adapt(item: dict[str, object]) -> dict[str, object]:
    def local(text: object) -> str:
        return _swap(_swap(str(text), _NAMES, WESTERN_NAMES, LOCAL_NAMES), _PLACES, WESTERN_PLACES, LOCAL_PLACES)

    options = item.get("options")
    adapted = {label: local(text) for label, text in options.items()} if isinstance(options, dict) else {}
    return {
        "question": local(item["question"]),
        "concept": item["concept"],
        "options": adapted,
        "answer": item["answer"],
    }


def _rename(item: dict[str, object]) -> dict[str, object]:
    out: dict[str, object] = {"question": _swap(str(item["question"]), _NAMES, WESTERN_NAMES, LOCAL_NAMES)}
    options = item.get("options")
    changed = {
        label: _swap(str(text), _NAMES, WESTERN_NAMES, LOCAL_NAMES)
        for label, text in (options.items() if isinstance(options, dict) else ())
        if _NAMES.search(str(text))
    }
    return {**out, "options": changed} if changed else out


def _reply(kind: str, text: str, completion: bool) -> str:
    if kind == "extract":
        reply = json.dumps(_extract(text), ensure_ascii=False)
        return reply.removeprefix(EXTRACT_PREFIX) if completion else reply
    if kind in ("adapt", "rename"):
        item = json.loads(_last(text, r"Item(?: \(in [^)]*\))?") or "{}")
        if not isinstance(item, dict) or "question" not in item:
            return ""
        body, prefix = (_adapt(item), ADAPT_PREFIX) if kind == "adapt" else (_rename(item), RENAME_PREFIX)
        reply = json.dumps(body, ensure_ascii=False)
        return reply.removeprefix(prefix) if completion else reply
    if kind == "translate":
        if completion:  # the page ends "<Source>: text\n<Target>:"
            return " " + text.rstrip().split("\n")[-2].split(": ", 1)[-1]
        return text.split("\n", 1)[-1]
    if kind == "relevance":
        return "yes" if _says_yes(text) else "no"
    return ""


_KINDS = {
    "extract": "extract",
    "relevance": "relevance",
    "adapt": "adapt",
    "rename": "rename",
    "localize": "translate",
    "translate": "translate",
    "back_translate": "translate",
}
"""The kind of request each stage's tag means."""


def author_reply(request: GenerateRequest) -> str:
    """The reply to one culture-adapt request (chat or completion), of the kind its tag (or, untagged, its
    first line) says."""
    head, last = request.as_messages()[0].content, request.as_messages()[-1].content
    kind = _KINDS.get(request.tag or "") or _kind(head)
    if request.prompt is not None:
        return _reply(kind, request.prompt, completion=True)
    return _reply(kind, head if kind == "relevance" else last, completion=False)


def author_loglikelihood(request: LoglikelihoodRequest) -> float:
    """Log-likelihood of `` yes``/`` no`` after a relevance prompt: the sensible answer scores higher, and a
    blanked prompt (nothing to judge: the calibration baseline) gives both the same."""
    if '"N/A"' in request.context:
        return -1.0
    preferred = "yes" if _says_yes(request.context.removesuffix("\nAnswer:")) else "no"
    return -0.25 if request.continuation.strip().casefold() == preferred else -2.5
