"""A stand-in annotator, rewriter and validator for dry runs of ``build crow`` (``scripted/crow-author``).

No model, no network: each reply is computed from the request, deterministically, the
way a careful but imperfect worker would answer, so every check has something to do.

* **CKA**: one to three triples linking a content word of the context with one of the
  target, with relations taken in turn from the table; about one context in eight gets
  "no knowledge", about one triple in six an unknown relation (``CausedBy``).
* **WSG**: the target with one of its words swapped for a word the context does not
  support; about one pair in seven gets "no alternative", one in seven a rewrite of too
  many words, one in nine a bare negation (flagged).
* **CKV / WSV**: "yes", except where a hash of the question says "no" (one in four), so the
  three phrasings of one item disagree now and then.
"""

from __future__ import annotations

import hashlib
import json
import re

from senseforge.llm.base import GenerateRequest, LoglikelihoodRequest
from senseforge.pipelines.crow.templates import CKA_MARK, WSG_MARK

_RELATIONS = ("HasProperty", "Causes", "UsedFor", "xIntent", "AtLocation", "IsA", "HasPrerequisite", "Implies")
_SWAPS = ("rocket", "volcano", "glacier", "spaceship", "umbrella", "piano", "desert", "submarine")
_STOP = frozenset(
    [
        "the",
        "a",
        "an",
        "and",
        "or",
        "but",
        "if",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "with",
        "by",
        "from",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "it",
        "its",
        "this",
        "that",
        "you",
        "your",
        "they",
        "them",
        "their",
        "he",
        "she",
        "his",
        "her",
        "we",
        "our",
        "i",
        "my",
        "me",
        "do",
        "does",
        "did",
        "not",
        "no",
        "so",
        "as",
        "can",
        "will",
        "would",
        "should",
        "could",
        "have",
        "has",
        "had",
        "what",
        "which",
        "who",
        "when",
        "where",
        "there",
        "here",
        "then",
        "than",
        "up",
        "out",
        "about",
        "into",
        "over",
        "after",
        "before",
    ]
)


_TARGET_LINE = re.compile(r"^[A-Z][^:()\n]*\([^)\n]*\): ")


def _n(text: str) -> int:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], 16)


def _content(text: str) -> list[str]:
    words = re.findall(r"[A-Za-z][A-Za-z'-]{2,}", text)
    return [w for w in words if w.lower() not in _STOP] or re.findall(r"\w+", text)[:1] or ["thing"]


def _field(text: str, name: str) -> str:
    match = re.search(rf"^{name}[^:\n]*:\s*(.*)$", text, flags=re.MULTILINE)
    return match[1].strip() if match else ""


def _last_item(text: str) -> str:
    """The part of a few-shot page after its last worked example."""
    cut = max(text.rfind("\nTask:"), text.rfind("\nContext:"))
    return text[cut:] if cut >= 0 else text


def _cka(body: str, chat: bool) -> str:
    lines = body.strip().splitlines()
    marked = [i for i, line in enumerate(lines) if _TARGET_LINE.match(line)] or [len(lines)]
    context = "\n".join(lines[1 : marked[0]]).split(":", 1)[-1]
    target = " ".join(lines[i].split(":", 1)[1] for i in marked if i < len(lines)) or context
    key = _n(context + target)
    if key % 8 == 0:
        return "[]" if chat else " none"
    heads, tails = _content(context), _content(target)
    triples = []
    for index in range(1 + key % 3):
        relation = "CausedBy" if _n(f"{key}:{index}") % 6 == 0 else _RELATIONS[(key + index) % len(_RELATIONS)]
        head = heads[(key + index) % len(heads)]
        tail = tails[(key // 3 + index) % len(tails)]
        triples.append({"head": head, "relation": relation, "tail": tail})
    if chat:
        return json.dumps(triples)
    return " " + "\n- ".join(f"{t['head']} | {t['relation']} | {t['tail']}" for t in triples)


def _rewrite(target: str, key: int) -> str | None:
    words = target.split()
    if not words or key % 7 == 0:
        return None
    if key % 7 == 1:
        return " ".join(_SWAPS[(key + i) % len(_SWAPS)] for i in range(len(words) + 6))
    if key % 9 == 2:
        return f"not {target}"
    spots = [i for i, w in enumerate(words) if w.lower().strip(".,!?") not in _STOP] or [len(words) - 1]
    at = spots[key % len(spots)]
    tail = words[at][len(words[at].rstrip(".,!?")) :]
    words[at] = _SWAPS[key % len(_SWAPS)] + tail
    return " ".join(words)


def _wsg(body: str, chat: bool) -> str:
    if chat:
        target_line = next((line for line in body.splitlines() if _TARGET_LINE.match(line)), "")
    else:
        target_line = next((line for line in body.splitlines() if line.startswith("Target (")), "")
    target = target_line.split(":", 1)[1].strip() if ":" in target_line else ""
    rewrite = _rewrite(target, _n(body))
    if chat:
        return json.dumps({"rewrite": rewrite})
    return f" {rewrite}" if rewrite is not None else " none"


def _verdict(question: str) -> str:
    return "no" if _n(question) % 4 == 0 else "yes"


def _stage(request: GenerateRequest) -> str:
    """The stage asking: the request's tag, or (untagged) the mark its prompt starts with."""
    if request.tag:
        return request.tag
    first = request.as_messages()[0].content
    return "cka" if first.startswith(CKA_MARK) else "wsg" if first.startswith(WSG_MARK) else "ckv"


def crow_author(request: GenerateRequest | LoglikelihoodRequest) -> str | float:
    """``scripted/crow-author``: the dry-run stand-in for every CRoW stage (see the module notes)."""
    if isinstance(request, LoglikelihoodRequest):
        wanted = _verdict(request.context)
        return -1.0 if request.continuation.strip() == wanted else -2.0
    messages = request.as_messages()
    chat = request.prompt is None
    text = messages[-1].content if chat else _last_item(messages[0].content)
    stage = _stage(request)
    if stage == "cka":
        return _cka(text, chat=chat)
    if stage == "wsg":
        return _wsg(text, chat=chat)
    return _verdict(messages[-1].content if chat else messages[0].content)
