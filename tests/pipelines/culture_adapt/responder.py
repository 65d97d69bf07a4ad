"""A scripted model for the culture-adapt tests (``scripted/<this file>:respond``), keyed by the items' words.

* extract: the names and places of :data:`NAMES` / :data:`PLACES` found in the text, plus ``Paris``, which is in
  no item (the parser must drop a span the text does not hold);
* relevance: names and places are foreign; the concepts ``snow`` and ``baseball`` too; ``hockey`` by exactly
  two of the five prompts (the first two); everything else belongs (each prompt's polarity respected);
* adapt: ``snow`` answered with Indonesian keys, options as ``"A. …"`` strings and the answer as its text;
  ``baseball`` with seven options; ``cowboy`` with prose (no JSON);
* rename: James → Budi, Sally → Siti;
* transient failures: the first relevance call of one prompt about ``hockey``, and the first call of each
  Sundanese translation that names ``umbrella`` (its question and concept), answer with a rate limit;
* translate: the text unchanged, except into Sundanese the ``kettle`` question loses its concept, and every
  field of the ``bicycle`` item (and its back-translation) becomes something else, its concept word kept.
"""

from __future__ import annotations

import json
import re

from senseforge.llm.base import Completion, Failure, GenerateRequest
from senseforge.pipelines.culture_adapt.templates import OPENINGS, RELEVANCE_TEMPLATES

NAMES = ("James", "Sally", "John")
PLACES = ("Texas", "Michigan", "New York")
FOREIGN = {"snow", "baseball"}
ELEMENT = re.compile(r'the (concept|name\(s\)|place\(s\)) "([^"]*)"')


def _item(user: str) -> dict[str, object]:
    return json.loads(user[user.index("{") :])


def _extract(user: str) -> str:
    found = {"names": [n for n in NAMES if n in user] + ["Paris"], "places": [p for p in PLACES if p in user]}
    return json.dumps(found)


def _relevance(user: str) -> str:
    index = next(i for i, (text, _) in enumerate(RELEVANCE_TEMPLATES) if user.startswith(text.split("{culture}")[0]))
    yes_means_relevant = RELEVANCE_TEMPLATES[index][1]
    match = ELEMENT.search(user)
    assert match is not None, user
    kind, value = match.groups()
    foreign = kind != "concept" or value in FOREIGN or (value == "hockey" and index < 2)
    return "Yes." if foreign != yes_means_relevant else "No."


def _adapt(user: str) -> str:
    item = _item(user)
    if item["concept"] == "snow":
        reply = {
            "pertanyaan": "Apa yang turun dari langit ketika terjadi hujan abu vulkanik di Indonesia?",
            "konsep": "hujan abu vulkanik",
            "pilihan": ["A. Abu", "B. Salju", "C. Air", "D. Batu", "E. Daun"],
            "jawaban": "Abu",
        }
        return "Berikut hasilnya:\n```json\n" + json.dumps(reply, ensure_ascii=False) + "\n```"
    if item["concept"] == "baseball":
        options = {label: f"pilihan {label}" for label in "ABCDEFG"}
        reply = {"question": "Olahraga apa yang dimainkan dengan tongkat kasti?", "concept": "kasti"}
        return json.dumps({**reply, "options": options, "answer": "B"})
    if item["concept"] == "cowboy":
        return "Maaf, saya tidak dapat mengubah soal ini."
    return json.dumps({**item, "question": str(item["question"]).replace("Texas", "Jakarta")})


def _rename(user: str) -> str:
    item = _item(user)
    question = str(item["question"]).replace("James", "Budi").replace("Sally", "Siti")
    return json.dumps({"question": question})


BICYCLE = {"What do you need to ride a bicycle?", "pedals", "wings", "sails", "rails", "oars"}
"""The bicycle item's question and options (its concept, ``bicycle``, is translated as it is)."""


def _translate(system: str, user: str) -> str:
    languages = re.search(r"from (\w+) into (\w+)", system)
    assert languages is not None, system
    source, target = languages.groups()
    field, text = user.split("\n", 1)
    if target == "Sundanese" and "kettle" in text and field.startswith("Question"):
        return text.replace("kettle", "alat")
    if target == "Sundanese" and text in BICYCLE:
        return "Saha anu resep nyanyi bicycle di pasar peuting?" if field.startswith("Question") else f"kopi {text}"
    if source == "Sundanese" and "nyanyi bicycle" in text:
        return "Siapa yang tidur di kantor polisi kemarin sore?"
    if source == "Sundanese" and text.startswith("kopi "):
        return f"gula aren {len(text)}"
    return text


_FAILED: set[str] = set()
"""Requests already answered with a rate limit once (the next attempt succeeds)."""


def _flaky(key: str) -> Completion | None:
    """A rate limit the first time ``key`` is asked, nothing after."""
    if key in _FAILED:
        return None
    _FAILED.add(key)
    return Completion(failure=Failure(kind="rate_limit", message="429: slow down (scripted)"))


def respond(request: GenerateRequest) -> str | Completion:
    messages = request.as_messages()
    system = messages[0].content if messages[0].role == "system" else ""
    user = messages[-1].content
    if system.startswith(OPENINGS["extract"][0]):
        return _extract(user)
    if system.startswith(OPENINGS["adapt"][0]):
        return _adapt(user)
    if system.startswith(OPENINGS["rename"][0]):
        return _rename(user)
    if system.startswith(OPENINGS["translate"][0]):
        if "umbrella" in user and "into Sundanese" in system:
            return _flaky(system + user) or _translate(system, user)
        return _translate(system, user)
    if "hockey" in user and user.startswith("Consider everyday life"):
        return _flaky(user) or _relevance(user)
    return _relevance(user)
