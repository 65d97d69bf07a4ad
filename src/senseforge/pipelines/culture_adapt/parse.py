"""What culture-adapt makes of a model's replies: spans, adapted and renamed items, translations, votes.

Models answer in many shapes: JSON fenced or bare, with prose around it, keys in the
language they were asked to write in (Indonesian ``pertanyaan``/``pilihan``/``jawaban``,
Sundanese ``patarosan``/``waleran``), options as an object, a list of strings (labelled
``"A. …"`` or not), a list of ``{"label", "text"}`` objects or an object of ``label``/``text``
lists, and the answer as a label or as the option's text. Parsing only reads, and keeps
every text's case as written; the recipe's checks judge what was read (five options, the
answer among them, the concept in the question). The shapes the prompts ask for (``FoundSpans``, ``AdaptedItem``,
``RenamedItem`` in :mod:`~senseforge.pipelines.culture_adapt.templates`) go with the requests as their reply shapes;
the parsers read them and every other shape as before.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from senseforge.data.lang import LANGUAGE_NAMES
from senseforge.data.text import fold
from senseforge.evaluate.extract import yes_no
from senseforge.llm.jsonx import JSONExtractionError, extract_json
from senseforge.pipelines.culture_adapt.item import Fields

__all__ = ["fold", "parse_adapted", "parse_rename", "parse_spans", "parse_translation", "relevance_vote"]

NAME_KEYS = ("names", "name", "person_names", "persons", "person", "people", "nama", "nama_orang", "ngaran")
PLACE_KEYS = ("places", "place", "locations", "location", "tempat", "lokasi", "nama_tempat", "tempat_tempat")
QUESTION_KEYS = ("question", "pertanyaan", "patarosan", "soal", "soalan", "pitakon", "pitakonan")
CONCEPT_KEYS = ("concept", "question_concept", "question_concepts", "konsep", "konsep_pertanyaan")
OPTION_KEYS = ("options", "choices", "pilihan", "opsi", "pilihan_jawaban", "pilihan_ganda", "piliheun")
ANSWER_KEYS = (
    "answer",
    "answerkey",
    "answer_key",
    "answer_creator",
    "question_answer",
    "correct_answer",
    "jawaban",
    "jawaban_benar",
    "kunci_jawaban",
    "waleran",
    "jawaban_pertanyaan",
)
"""Keys as compared: case-folded, accents dropped, spaces and hyphens as underscores."""

_LABELLED = re.compile(r"^\s*[\(\[]?([A-Za-z])\s*[.):\]]\s*(.*)$", re.DOTALL)
_BARE_LABEL = re.compile(r"^[\(\[]?([A-Za-z])[.):\]]?$")


def _key(key: object) -> str:
    decomposed = unicodedata.normalize("NFKD", str(key).strip().casefold())
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return re.sub(r"[\s\-]+", "_", plain)


def _pick(row: Mapping[Any, Any], keys: Sequence[str]) -> Any:
    """The first non-empty value under any of ``keys`` (compared as :func:`_key`)."""
    by_key: dict[str, Any] = {}
    for key, value in row.items():
        by_key.setdefault(_key(key), value)
    return next((by_key[key] for key in keys if by_key.get(key) not in (None, "", [], {})), None)


def _json(reply: str, prefix: str) -> Any:
    """The JSON value of a reply (with the page's prefix put back first); ``None`` when there is none."""
    candidates = [prefix + reply, reply] if prefix else [reply]
    for candidate in candidates:
        try:
            return extract_json(candidate)
        except JSONExtractionError:
            continue
    return None


def _text(value: Any) -> str | None:
    if isinstance(value, list):
        value = next((v for v in value if isinstance(v, str) and v.strip()), None)
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        text = " ".join(str(value).split())
        return text or None
    return None


# --- spans -----------------------------------------------------------------------------------


def _span_list(value: Any) -> list[str]:
    if isinstance(value, str):
        value = re.split(r"[,;]", value)
    if not isinstance(value, list):
        return []
    out: list[str] = []
    for entry in value:
        if isinstance(entry, Mapping):
            entry = _pick(entry, ("text", "name", "nama", "value", "span"))
        if isinstance(entry, str) and entry.strip():
            out.append(" ".join(entry.split()))
    return out


def _kept(spans: list[str], text: str) -> list[str]:
    haystack = fold(text)
    seen: set[str] = set()
    out: list[str] = []
    for span in spans:
        folded = fold(span)
        if folded and folded in haystack and folded not in seen:
            seen.add(folded)
            out.append(span)
    return out


def parse_spans(reply: str, text: str, prefix: str = "") -> tuple[list[str], list[str]] | None:
    """``(names, places)`` from an extractor's reply, keeping only spans that occur in ``text``.

    >>> parse_spans('Sure: {"nama": ["James", "Bob"], "lokasi": ["illinois"]}', "James went to Illinois.")
    (['James'], ['illinois'])

    Returns ``None`` when the reply holds no JSON at all.
    """
    value = _json(reply, prefix)
    if value is None:
        return None
    if isinstance(value, list):
        names, places = _span_list(value), []
    elif isinstance(value, Mapping):
        names, places = _span_list(_pick(value, NAME_KEYS)), _span_list(_pick(value, PLACE_KEYS))
    else:
        return None
    return _kept(names, text), _kept(places, text)


# --- adapted items ---------------------------------------------------------------------------


def _item_row(value: Any) -> Mapping[Any, Any] | None:
    """The object that holds the item: the value itself, the first in a list, or one nested object."""
    if isinstance(value, list):
        value = next((v for v in value if isinstance(v, Mapping)), None)
    if not isinstance(value, Mapping):
        return None
    if _pick(value, QUESTION_KEYS) is not None and not isinstance(_pick(value, QUESTION_KEYS), Mapping):
        return value
    nested = [v for v in value.values() if isinstance(v, Mapping) and _pick(v, QUESTION_KEYS) is not None]
    return nested[0] if len(nested) == 1 else None


def _label(value: object) -> str:
    label = str(value).strip()
    match = _BARE_LABEL.match(label)
    return match.group(1).upper() if match else label


def _string_options(entries: Sequence[str]) -> list[tuple[str, str]]:
    matches = [_LABELLED.match(entry) for entry in entries]
    labels = [m.group(1).upper() for m in matches if m]
    if len(labels) == len(entries) and len(set(labels)) == len(labels):
        return [(m.group(1).upper(), " ".join(m.group(2).split())) for m in matches if m]
    return [(chr(ord("A") + i), " ".join(entry.split())) for i, entry in enumerate(entries)]


def _choices(value: Any) -> list[tuple[str, str]]:
    if isinstance(value, str):
        value = [line for line in value.splitlines() if line.strip()]
    if isinstance(value, Mapping):
        labels, texts = _pick(value, ("label", "labels")), _pick(value, ("text", "texts"))
        if isinstance(labels, list) and isinstance(texts, list):
            return [(_label(lab), " ".join(str(t).split())) for lab, t in zip(labels, texts, strict=False)]
        return [(_label(lab), _text(t) or "") for lab, t in value.items()]
    if not isinstance(value, list):
        return []
    if all(isinstance(entry, str) for entry in value):
        return _string_options(value)
    out: list[tuple[str, str]] = []
    for index, entry in enumerate(value):
        if isinstance(entry, Mapping) and len(entry) == 1 and _pick(entry, ("label", "text")) is None:
            ((label, text),) = entry.items()  # {"A": "…"}
            out.append((_label(label), _text(text) or ""))
        elif isinstance(entry, Mapping):
            label = _pick(entry, ("label", "key", "id"))
            text = _pick(entry, ("text", "option", "value", "teks", "pilihan"))
            out.append((_label(label) if label is not None else chr(ord("A") + index), _text(text) or ""))
        elif isinstance(entry, str | int | float):
            out.append((chr(ord("A") + index), " ".join(str(entry).split())))
    return out


def _answer(value: Any, choices: Sequence[tuple[str, str]], fallback: str) -> str:
    """The answer's label: given as a label, as ``"C. text"``, or as an option's text."""
    if isinstance(value, Mapping):
        value = _pick(value, ("label", "answer", "text"))
    text = _text(value)
    if text is None:
        return fallback
    labels = {label.upper(): label for label, _ in choices}
    bare = _BARE_LABEL.match(text)
    if bare and bare.group(1).upper() in labels:
        return labels[bare.group(1).upper()]
    by_text = {fold(option): label for label, option in choices}
    if fold(text) in by_text:
        return by_text[fold(text)]
    labelled = _LABELLED.match(text)
    if labelled and labelled.group(1).upper() in labels:
        return labels[labelled.group(1).upper()]
    return text


def parse_adapted(reply: str, source: Fields, prefix: str = "") -> Fields | None:
    """The adapted item of a reply, or ``None`` when its question, concept or options cannot be read.

    A missing answer is the source's label. The options are read as given: their number is
    the checks' business, not the parser's.
    """
    row = _item_row(_json(reply, prefix))
    if row is None:
        return None
    question, concept = _text(_pick(row, QUESTION_KEYS)), _text(_pick(row, CONCEPT_KEYS))
    choices = _choices(_pick(row, OPTION_KEYS))
    if question is None or concept is None or not choices:
        return None
    answer = _answer(_pick(row, ANSWER_KEYS), choices, source.answer)
    return Fields(question=question, concept=concept, choices=tuple(choices), answer=answer)


# --- renamed items ---------------------------------------------------------------------------

_FENCED = re.compile(r"^```[\w-]*\s*\n?(.*?)\n?```$", re.DOTALL)
_RENAME_LABEL = re.compile(
    r"^(?:changed|renamed|new|rewritten)?\s*(?:question|pertanyaan|patarosan)?\s*:\s*", re.IGNORECASE
)


def _plain_question(reply: str, prefix: str) -> str | None:
    text = reply.strip()
    fenced = _FENCED.match(text)
    if fenced:
        text = fenced.group(1).strip()
    if prefix.endswith('"') and '"' in text:
        text = text.split('"', 1)[0]  # a completion cut off after the question's closing quote
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    line = " ".join(_unquote(_RENAME_LABEL.sub("", line, count=1)).split())
    return line if line and line[0] not in "{[" else None


def parse_rename(reply: str, source: Fields, prefix: str = "") -> Fields | None:
    """The source with the renamed question (and options, matched by label); ``None`` when empty.

    A reply without JSON counts as the renamed question.
    """
    value = _json(reply, prefix)
    if isinstance(value, list):
        value = next((v for v in value if isinstance(v, Mapping)), value)
    renamed: dict[str, str] = {}
    question = _text(_pick(value, QUESTION_KEYS)) if isinstance(value, Mapping) else None
    if isinstance(value, Mapping) and question is not None:
        labels = set(source.labels)
        renamed = {label: text for label, text in _choices(_pick(value, OPTION_KEYS)) if label in labels and text}
    elif isinstance(value, Mapping) and not prefix:
        return None  # an object without a question (a completion may hold its options' object only)
    elif isinstance(value, str) and value.strip():
        question = " ".join(value.split())
    else:  # no JSON (or none that holds a question): the reply is the question
        question = _plain_question(reply, prefix)
        if question is None:
            return None
    return source.with_texts({"question": question, **{f"option:{label}": text for label, text in renamed.items()}})


# --- translations ----------------------------------------------------------------------------

_LABEL_WORDS = (
    *LANGUAGE_NAMES.values(),
    "Translation",
    "Translated",
    "Terjemahan",
    "Tarjamahan",
    "Bahasa Indonesia",
    "Bahasa Sunda",
    "Basa Sunda",
    "Bahasa Jawa",
    "Basa Jawa",
    "Bahasa Melayu",
    "Indonesia",
    "Sunda",
    "Jawa",
    "Melayu",
    "Question",
    "Concept",
    "Answer option",
    "Option",
    "Text",
)
_TRANSLATION_LABEL = re.compile(
    r"^\**(?:(?:" + "|".join(re.escape(w) for w in sorted(_LABEL_WORDS, key=len, reverse=True)) + r")"
    r"(?:\s+translation)?(?:\s+[A-E])?(?:\s*\([^)]*\))?)\**\s*:\s*\**\s*",
    re.IGNORECASE,
)
_QUOTES = (('"', '"'), ("'", "'"), ("“", "”"), ("‘", "’"), ("«", "»"), ("„", "“"), ("„", "”"), ("`", "`"))
_NOTE = re.compile(r"^(?:\(|\*|-|#|note\b|catatan\b|explanation\b|penjelasan\b|[^\s:]+(?:\s[^\s:]+)?\s*:)", re.I)
_TERMINAL = (".", "?", "!", "…", "。", "？", "！")


def _unquote(text: str) -> str:
    for _ in range(2):
        text = text.strip()
        for opening, closing in _QUOTES:
            if len(text) >= 2 and text.startswith(opening) and text.endswith(closing):
                text = text[len(opening) : -len(closing)]
                break
        else:
            break
    return text.strip()


def _chosen_lines(text: str) -> str:
    lines = [line.strip() for line in text.splitlines()]
    while lines and (not lines[0] or not _TRANSLATION_LABEL.sub("", lines[0]).strip()):
        lines.pop(0)  # leading blank lines and a line that is only a label
    if not lines:
        return ""
    paragraph: list[str] = []
    for line in lines:
        if not line:
            break
        paragraph.append(line)
    wrapped = all(not line.endswith(_TERMINAL) for line in paragraph[:-1])
    rest_plain = all(not _NOTE.match(line) for line in paragraph[1:])
    one_paragraph = len(paragraph) == len([line for line in lines if line])
    if len(paragraph) > 1 and wrapped and rest_plain and one_paragraph:
        return " ".join(paragraph)
    return paragraph[0]


def parse_translation(reply: str) -> str | None:
    """The translation in a reply: no fence, label, quotes or notes; ``None`` when empty.

    >>> parse_translation('Sundanese: "Naon anu biasana diinum ku Budi?"')
    'Naon anu biasana diinum ku Budi?'
    """
    text = reply.strip()
    fenced = _FENCED.match(text)
    if fenced:
        text = fenced.group(1)
    line = _chosen_lines(_unquote(text))
    line = _unquote(_TRANSLATION_LABEL.sub("", _unquote(line), count=1))
    line = " ".join(line.split())
    return line or None


# --- relevance votes -------------------------------------------------------------------------


RELEVANCE_WORDS: tuple[tuple[str, str], ...] = (("yes", "no"), ("ya", "tidak"))
"""The (yes, no) words a relevance reply is read for, in turn."""


def relevance_vote(reply: str, yes_means_relevant: bool) -> bool | None:
    """``True`` for a vote that the element is irrelevant, ``False`` for relevant, ``None`` if unread.

    >>> relevance_vote("Yes, most people there know it.", yes_means_relevant=True)
    False
    >>> relevance_vote("Tidak.", yes_means_relevant=False)
    False
    """
    said_yes = next((s for yes, no in RELEVANCE_WORDS if (s := yes_no(reply, yes, no)) is not None), None)
    if said_yes is None:
        return None
    return not said_yes if yes_means_relevant else said_yes
