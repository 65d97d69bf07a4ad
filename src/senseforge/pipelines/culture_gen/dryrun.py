"""A stand-in writer for dry runs of culture-gen: no model, no network (``scripted/culture-gen-author``).

It answers each request the way a well-behaved model would, deterministically from the
request: one item per listed concept, written in the language the prompt asks for, with
the concept in the question. About one concept in six gets four options only, so the
checks have something to reject.
"""

from __future__ import annotations

import hashlib
import json
import re

from senseforge.data.lang import LANGUAGE_NAMES
from senseforge.llm.base import GenerateRequest
from senseforge.pipelines.culture_gen.templates import COMPLETION_PREFIX, TARGET_INSTRUCTIONS

_QUESTION = {
    "id": "Apa yang paling sering dikaitkan orang dengan {concept}?",
    "su": "Naon anu paling sering dipatalikeun ku jalma sareng {concept}?",
    "en": "What do people most often link with {concept}?",
}
_OPTIONS = {
    "id": ("kebiasaan sehari-hari", "hari libur", "musim hujan", "kota besar", "pelajaran sekolah"),
    "su": ("kabiasaan sapopoé", "poé pere", "usum hujan", "kota gedé", "palajaran sakola"),
    "en": ("daily habits", "holidays", "the rainy season", "big cities", "school lessons"),
}


def _lang_of(text: str) -> str:
    for lang, instruction in TARGET_INSTRUCTIONS.items():
        if text.startswith(instruction[:40]):
            return lang
    for lang, name in LANGUAGE_NAMES.items():
        if f"directly in {name}" in text:
            return lang
    if "budaya Sunda" in text:
        return "su"
    if "budaya Indonesia" in text:
        return "id"
    return "en"


def _items(lang: str, concepts: list[str]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for concept in concepts:
        n = int(hashlib.sha256(concept.encode("utf-8")).hexdigest()[:8], 16)
        texts = list(_OPTIONS.get(lang, _OPTIONS["en"]))
        texts[n % 5] = f"{texts[n % 5]} ({concept})"
        labels = "ABCDE" if n % 6 else "ABCD"
        out.append(
            {
                "question_concept": concept,
                "question": _QUESTION.get(lang, _QUESTION["en"]).format(concept=concept),
                "choices": {label: text for label, text in zip(labels, texts, strict=False)},
                "answer": "ABCDE"[n % 5] if n % 6 else "A",
            }
        )
    return out


def author_reply(request: GenerateRequest) -> str:
    """The reply to one culture-gen request (chat or completion)."""
    if request.prompt is not None:
        found = re.findall(r"^concepts: (\[.*\])$", request.prompt, flags=re.MULTILINE)
        concepts = json.loads(found[-1]) if found else []
        reply = json.dumps(_items(_lang_of(request.prompt), concepts), ensure_ascii=False)
        return reply.removeprefix(COMPLETION_PREFIX)
    messages = request.as_messages()
    system = messages[0].content if messages else ""
    user = messages[-1].content if messages else ""
    concepts = [m.group(1).strip() for m in re.finditer(r"^\d+\.\s+(.*)$", user, flags=re.MULTILINE)]
    return "```json\n" + json.dumps(_items(_lang_of(system), concepts), ensure_ascii=False, indent=1) + "\n```"
