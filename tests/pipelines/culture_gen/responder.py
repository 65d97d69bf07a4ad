"""A scripted writer for the culture-gen tests (``scripted/<this file>:respond``).

Per concept it writes one kind of item, named by the concept itself: ``ok-*`` valid,
``four-*`` four choices, ``letter-*`` the answer ``F``, ``twin-*`` two equal choices,
``lost-*`` the concept missing from the question, ``none-*`` no item at all, ``extra-*``
two items. The options name the batch's category, so a concept asked again in another
category repeats its question with other options, and again in the same category
repeats the whole item. A batch whose first concept is ``prose-*`` is answered with prose.
Items come back in reverse order and name their concept, so nothing may be matched by position.
"""

from __future__ import annotations

import json
import re

from senseforge.llm.base import GenerateRequest


def _choices(category: str, n: int = 5) -> dict[str, str]:
    return {label: f"{category} option {label.lower()}" for label in "ABCDE"[:n]}


def _item(concept: str, category: str) -> list[dict[str, object]]:
    kind = concept.split("-", 1)[0]
    question = f"Apa hubungan {concept} dengan kehidupan sehari-hari?"
    base: dict[str, object] = {
        "question_concept": concept,
        "question": question,
        "choices": _choices(category),
        "answer": "B",
    }
    if kind == "four":
        base["choices"] = _choices(category, 4)
    elif kind == "letter":
        base["answer"] = "F"
    elif kind == "twin":
        base["choices"] = {**_choices(category), "E": f"{category.upper()} Option  A"}
    elif kind == "lost":
        base["question"] = "Apa hubungan benda ini dengan kehidupan sehari-hari?"
    elif kind == "none":
        return []
    elif kind == "extra":
        return [base, {**base, "question": f"Di mana {concept} biasa ditemukan?"}]
    return [base]


def respond(request: GenerateRequest) -> str:
    user = request.as_messages()[-1].content
    if "Marked answer" in user:  # a review judge: everything but ok-2 is right
        return "no" if "ok-2" in user else "yes"
    concepts = [m.group(1).strip() for m in re.finditer(r"^\d+\.\s+(.*)$", user, flags=re.MULTILINE)]
    if concepts and concepts[0].startswith("prose-"):
        return "Tentu! Berikut beberapa pertanyaan yang menarik tentang budaya kita."
    category = re.search(r"^Category: (.*)$", user, flags=re.MULTILINE)
    items = [item for concept in concepts for item in _item(concept, category.group(1) if category else "")]
    return json.dumps(list(reversed(items)), ensure_ascii=False)
