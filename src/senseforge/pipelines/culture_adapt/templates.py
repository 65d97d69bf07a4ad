"""The prompts of culture-adapt, in our own words.

Every call comes in two styles:

* **chat** (instruction-tuned models): an English system instruction and a user turn that
  holds the item;
* **completion** (base models such as the bundled Gemma 3 270M): a few-shot page that the
  model continues with one line (``stop=("\\n",)``); pages asking for JSON end with the
  reply's opening (:data:`EXTRACT_PREFIX`, :data:`ADAPT_PREFIX`, :data:`RENAME_PREFIX`), which
  the parsers put back.

Each template starts with a fixed first line (:data:`OPENINGS`, and each relevance
template's first words) so the dry-run author can tell the kinds apart.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from senseforge.data.lang import language_name
from senseforge.errors import ConfigError
from senseforge.llm.base import GenerateRequest, PromptStyle, ReplyShape
from senseforge.pipelines.choices import FiveOptions, Label
from senseforge.pipelines.culture_adapt.item import Fields

CULTURES: dict[str, str] = {
    "id": "Indonesia",
    "su": "Sunda (West Java, Indonesia)",
    "jv": "Java (Indonesia)",
    "ms": "Malaysia",
    "en": "the United States",
}
"""The culture an item is adapted to when the run names none, by adaptation language."""

ELEMENTS: tuple[str, ...] = ("concept", "names", "places")
"""The three elements judged for relevance to the target culture."""

EXTRACT_PREFIX = '{"names": ['
ADAPT_PREFIX = '{"question": "'
RENAME_PREFIX = '{"question": "'


class _Reply(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FoundSpans(_Reply):
    """An extract reply as the prompts ask for it: the person names and places, empty lists where none."""

    names: list[str]
    places: list[str]


class AdaptedItem(_Reply):
    """An adapt reply as the prompts ask for it: the item rewritten, five options, the answer's label."""

    question: str
    concept: str
    options: FiveOptions
    answer: Label


class RenamedItem(_Reply):
    """A rename reply as the prompts ask for it: the question, and the options by their labels."""

    question: str
    options: dict[str, str]


EXTRACT_SHAPE = ReplyShape.of_model(FoundSpans, name="culture_adapt_spans")
ADAPT_SHAPE = ReplyShape.of_model(AdaptedItem, name="culture_adapt_item")
RENAME_SHAPE = ReplyShape.of_model(RenamedItem, name="culture_adapt_renamed")
"""The shapes of the extract, adapt and rename replies, sent with their requests in both styles (a completion page
ends inside the object; the parsers read the reply with the page's opening put back, or as it is)."""

OPENINGS: dict[str, tuple[str, str]] = {
    "extract": (
        "You list the person names and the places that a multiple-choice question mentions.",
        "Person names and places mentioned in each question, copied exactly as written (JSON, one line each).",
    ),
    "adapt": (
        "You adapt multiple-choice commonsense questions to another culture and language.",
        "Commonsense questions adapted to another culture and language (JSON, one line each).",
    ),
    "rename": (
        "You swap the person names in a multiple-choice question for names common in another culture.",
        "Questions whose person names were swapped for names common in another culture (JSON, one line each).",
    ),
    "translate": (
        "You translate one field of a multiple-choice commonsense question.",
        "Translations of questions and short phrases, one line each.",
    ),
}
"""``kind → (chat first line, completion first line)``."""


def _styled(
    style: PromptStyle, chat: Callable[[], tuple[str, str]], page: Callable[[], str], **sampling: Any
) -> GenerateRequest:
    """A chat request (``chat()`` gives the system and user turns) or a completion page that stops at a newline."""
    if style == "chat":
        system, user = chat()
        return GenerateRequest.chat(user, system=system, **sampling)
    return GenerateRequest(prompt=page(), stop=("\n",), **sampling)


def default_culture(lang: str) -> str:
    """The default target culture of an adaptation language.

    >>> default_culture("su")
    'Sunda (West Java, Indonesia)'

    Raises:
        ConfigError: for a language without a default culture.
    """
    if lang not in CULTURES:
        known = ", ".join(sorted(CULTURES))
        raise ConfigError(
            f"no default target culture for language {lang!r} (we have one for: {known}); "
            "name the culture with --target-culture"
        )
    return CULTURES[lang]


def _options(item: Fields) -> dict[str, str]:
    return {label: text for label, text in item.choices}


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _item_block(item: Fields) -> str:
    """The question and its options as context lines."""
    lines = [f"Question: {_one_line(item.question)}", "Options:"]
    lines += [f"{label}. {_one_line(text)}" for label, text in item.choices]
    return "\n".join(lines)


# --- extract ---------------------------------------------------------------------------------

_EXTRACT_SYSTEM = (
    OPENINGS["extract"][0]
    + """

Read the question and its options. List every name of a person (first names, surnames, \
nicknames) and every place (cities, countries, states, regions, landmarks, named buildings) that \
appears in them. Copy each one exactly as it is written there, with the same spelling and \
capitalisation, once. Do not list ordinary nouns such as "school" or "farm", and do not add \
anything that is not written in the text.

Reply with one JSON object and nothing else: {"names": [...], "places": [...]}, with an empty list \
where there is nothing to list."""
)

_EXTRACT_SHOTS: tuple[tuple[str, tuple[str, ...], dict[str, list[str]]], ...] = (
    (
        "Sally drove from Boston to her aunt's farm. What did she most likely see on the way?",
        ("cornfields", "the ocean floor", "a volcano", "the moon", "a glacier"),
        {"names": ["Sally"], "places": ["Boston"]},
    ),
    (
        "Where do people usually keep milk so that it stays cold?",
        ("refrigerator", "oven", "cupboard", "garden", "bookshelf"),
        {"names": [], "places": []},
    ),
)


def _extract_block(question: str, options: Sequence[tuple[str, str]]) -> str:
    listed = " | ".join(f"{label}. {_one_line(text)}" for label, text in options)
    return f"Question: {_one_line(question)}\nOptions: {listed}\nFound: "


def _extract_page(item: Fields) -> str:
    shots = [
        _extract_block(q, list(zip("ABCDE", opts, strict=True))) + json.dumps(found, ensure_ascii=False)
        for q, opts, found in _EXTRACT_SHOTS
    ]
    query = _extract_block(item.question, item.choices) + EXTRACT_PREFIX
    return "\n\n".join([OPENINGS["extract"][1], *shots, query])


def extract_request(item: Fields, style: PromptStyle, *, max_tokens: int = 128, seed: int = 0) -> GenerateRequest:
    """Ask for the person names and places in an item's question and options (``{"names", "places"}``)."""
    return _styled(
        style,
        lambda: (_EXTRACT_SYSTEM, _item_block(item)),
        lambda: _extract_page(item),
        reply_shape=EXTRACT_SHAPE,
        temperature=0.0,
        max_tokens=max_tokens,
        seed=seed,
    )


# --- relevance -------------------------------------------------------------------------------

RELEVANCE_TEMPLATES: tuple[tuple[str, bool], ...] = (
    (
        "Think of ordinary people who grew up in {culture}.\n\n{item}\n\n"
        "Would most of them be familiar with {what}? Answer with yes or no.",
        True,
    ),
    (
        "Imagine the question below being asked of people in {culture}.\n\n{item}\n\n"
        "Would {what} seem foreign or out of place to them? Answer with yes or no.",
        False,
    ),
    (
        "Consider everyday life in {culture}.\n\n{item}\n\n"
        "Is {what} something people there commonly come across in daily life? Answer with yes or no.",
        True,
    ),
    (
        "A person born and raised in {culture} reads the question below.\n\n{item}\n\n"
        "Would that person need someone to explain {what} to them? Answer with yes or no.",
        False,
    ),
    (
        "Someone is writing commonsense questions for an audience from {culture}.\n\n{item}\n\n"
        "Does {what} belong naturally in a question written for that audience? Answer with yes or no.",
        True,
    ),
)
"""The five relevance prompts and, for each, whether "yes" means the element is relevant."""

_WHAT = {"concept": 'the concept "{value}"', "names": 'the name(s) "{value}"', "places": 'the place(s) "{value}"'}


def relevance_prompts(element: str, value: str, item: Fields, culture: str) -> list[tuple[str, bool]]:
    """The five prompts judging one element, each with whether "yes" means relevant.

    Raises:
        ConfigError: for an element other than those in :data:`ELEMENTS`.
    """
    if element not in _WHAT:
        raise ConfigError(f"unknown relevance element {element!r}; expected one of {', '.join(ELEMENTS)}")
    what = _WHAT[element].format(value=_one_line(value))
    block = _item_block(item)
    return [
        (template.format(culture=culture, item=block, what=what), yes_means_relevant)
        for template, yes_means_relevant in RELEVANCE_TEMPLATES
    ]


# --- adapt -----------------------------------------------------------------------------------

_ADAPT_SYSTEM = (
    OPENINGS["adapt"][0]
    + """

The user gives a multiple-choice commonsense question written for another audience. Rewrite it so \
that it belongs to {culture}: the situation, the names of people, the places, the foods, the \
customs and the objects should all be what someone from there would find natural. Write \
everything in {language}.

- Keep what the question tests: the same option stays the right answer and keeps its label.
- Give the concept the question is about, adapted as well if needed; it must appear word for word \
in the question.
- Keep five options labelled as in the item (A to E); the wrong ones stay plausible but wrong.
- Use normal capitalisation: names of people and places capitalised, ordinary words as usual.

Reply with one JSON object and nothing else: {{"question": "...", "concept": "...", \
"options": {{"A": "...", "B": "...", "C": "...", "D": "...", "E": "..."}}, "answer": "<label>"}}."""
)

_ADAPT_SOURCE: dict[str, Any] = {
    "question": "After skiing in Colorado all morning, Sally wanted a hot drink. What did she most likely order?",
    "concept": "hot drink",
    "options": {"A": "hot chocolate", "B": "lemonade", "C": "iced tea", "D": "milkshake", "E": "tap water"},
    "answer": "A",
}

_ADAPT_EXAMPLES: dict[str, tuple[str, dict[str, Any]]] = {
    "id": (
        "Indonesia",
        {
            "question": "Setelah kehujanan di Bogor sepanjang pagi, Siti ingin minuman hangat. "
            "Apa yang kemungkinan besar ia pesan di warung?",
            "concept": "minuman hangat",
            "options": {
                "A": "wedang jahe",
                "B": "es teh manis",
                "C": "es campur",
                "D": "es kelapa muda",
                "E": "air es",
            },
            "answer": "A",
        },
    ),
    "su": (
        "Sunda (West Java, Indonesia)",
        {
            "question": "Sanggeus kahujanan di Bogor sapanjang isuk, Siti hayang inuman haneut. "
            "Naon anu sigana dipésén ku manéhna di warung?",
            "concept": "inuman haneut",
            "options": {"A": "bandrék", "B": "és téh amis", "C": "és campur", "D": "és kalapa ngora", "E": "cai tiis"},
            "answer": "A",
        },
    ),
    "en": (
        "Indonesia",
        {
            "question": "After getting caught in the rain in Bogor all morning, Siti wanted a warm drink. "
            "What did she most likely order at the food stall?",
            "concept": "warm drink",
            "options": {
                "A": "ginger tea",
                "B": "iced sweet tea",
                "C": "shaved ice dessert",
                "D": "iced young coconut",
                "E": "ice water",
            },
            "answer": "A",
        },
    ),
}


def _adapt_json(item: Fields) -> str:
    body = {"question": item.question, "concept": item.concept, "options": _options(item), "answer": item.answer}
    return json.dumps(body, ensure_ascii=False)


def _adapt_user(item: Fields, source_lang: str, target_lang: str, culture: str) -> str:
    return (
        f"Culture: {culture}\nLanguage: {language_name(target_lang)}\n"
        f"Item (in {language_name(source_lang)}): {_adapt_json(item)}"
    )


def _adapt_page(item: Fields, source_lang: str, target_lang: str, culture: str) -> str:
    example_culture, example = _ADAPT_EXAMPLES.get(target_lang, _ADAPT_EXAMPLES["id"])
    language = language_name(target_lang)
    heading = (
        f"{OPENINGS['adapt'][1]}\nEach adapted item is written in {language}, keeps the answer's label, "
        "names its concept inside the question and has five options."
    )
    shot = (
        f"Culture: {example_culture}\nItem (in English): {json.dumps(_ADAPT_SOURCE, ensure_ascii=False)}\n"
        f"Adapted: {json.dumps(example, ensure_ascii=False)}"
    )
    query = f"Culture: {culture}\nItem (in {language_name(source_lang)}): {_adapt_json(item)}\nAdapted: {ADAPT_PREFIX}"
    return "\n\n".join([heading, shot, query])


def adapt_request(
    item: Fields,
    source_lang: str,
    target_lang: str,
    culture: str,
    style: PromptStyle,
    *,
    temperature: float = 0.2,
    max_tokens: int = 512,
    seed: int = 0,
) -> GenerateRequest:
    """Ask for the item rewritten for ``culture`` in ``target_lang`` (question, concept, options, answer).

    ``source_lang`` names the item's language (the completion page's worked example is an
    English item whatever it is).
    """
    return _styled(
        style,
        lambda: (
            _ADAPT_SYSTEM.format(culture=culture, language=language_name(target_lang)),
            _adapt_user(item, source_lang, target_lang, culture),
        ),
        lambda: _adapt_page(item, source_lang, target_lang, culture),
        reply_shape=ADAPT_SHAPE,
        temperature=temperature,
        max_tokens=max_tokens,
        seed=seed,
    )


# --- rename ----------------------------------------------------------------------------------

_RENAME_SYSTEM = (
    OPENINGS["rename"][0]
    + """

Replace every person's name in the question and its options with a name that is common in \
{culture}. The same person keeps the same new name everywhere. Change nothing else: every other \
word, the punctuation and the language ({language}) stay exactly as they are. Places are not names \
of people; leave them alone.

Reply with one JSON object and nothing else: {{"question": "...", "options": {{"<label>": "..."}}}}, \
where "options" holds only the options whose text you changed (leave it out when none held a name)."""
)

_RENAME_EXAMPLES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "en": (
        {
            "question": "Bob lent his ladder to Mary. Why did she need it?",
            "options": {
                "A": "to pick mangoes",
                "B": "to paint Bob's fence",
                "C": "to go swimming",
                "D": "to cook rice",
                "E": "to read a book",
            },
        },
        {"question": "Budi lent his ladder to Siti. Why did she need it?", "options": {"B": "to paint Budi's fence"}},
    ),
    "id": (
        {
            "question": "Bob meminjamkan tangganya kepada Mary. Untuk apa Mary membutuhkannya?",
            "options": {
                "A": "memetik mangga",
                "B": "mengecat pagar rumah Bob",
                "C": "berenang",
                "D": "menanak nasi",
                "E": "membaca buku",
            },
        },
        {
            "question": "Budi meminjamkan tangganya kepada Siti. Untuk apa Siti membutuhkannya?",
            "options": {"B": "mengecat pagar rumah Budi"},
        },
    ),
}


def _rename_json(item: Fields) -> str:
    return json.dumps({"question": item.question, "options": _options(item)}, ensure_ascii=False)


def _rename_page(item: Fields, source_lang: str, culture: str) -> str:
    source, renamed = _RENAME_EXAMPLES.get(source_lang, _RENAME_EXAMPLES["en"])
    heading = (
        f"{OPENINGS['rename'][1]}\nOnly the names of people change; every other word stays as it was, "
        f"in {language_name(source_lang)}."
    )
    shot = (
        f"Culture: Indonesia\nItem: {json.dumps(source, ensure_ascii=False)}\n"
        f"Renamed: {json.dumps(renamed, ensure_ascii=False)}"
    )
    query = f"Culture: {culture}\nItem: {_rename_json(item)}\nRenamed: {RENAME_PREFIX}"
    return "\n\n".join([heading, shot, query])


def rename_request(
    item: Fields,
    source_lang: str,
    culture: str,
    style: PromptStyle,
    *,
    temperature: float = 0.2,
    max_tokens: int = 256,
    seed: int = 0,
) -> GenerateRequest:
    """Ask for the item with each person name replaced by one common in ``culture``, nothing else changed."""
    return _styled(
        style,
        lambda: (
            _RENAME_SYSTEM.format(culture=culture, language=language_name(source_lang)),
            f"Culture: {culture}\nItem: {_rename_json(item)}",
        ),
        lambda: _rename_page(item, source_lang, culture),
        reply_shape=RENAME_SHAPE,
        temperature=temperature,
        max_tokens=max_tokens,
        seed=seed,
    )


# --- translate -------------------------------------------------------------------------------

_TRANSLATE_SYSTEM = (
    OPENINGS["translate"][0]
    + """

Translate the text the user gives from {source} into {target}, faithfully and naturally: keep its \
meaning, keep the names of people and places as they are, and keep its capitalisation (proper \
nouns capitalised, ordinary words as in the source). Add nothing and explain nothing. A short \
phrase (a concept or an answer option) stays a short phrase; do not make it a sentence, and never \
answer the question.

Reply with the translation only: no quotes, no label, no notes."""
)

_PARALLEL: tuple[dict[str, str], ...] = (
    {
        "en": "What does Budi usually drink in the morning?",
        "id": "Apa yang biasanya diminum Budi pada pagi hari?",
        "su": "Naon anu biasana diinum ku Budi isuk-isuk?",
        "jv": "Apa sing biasane diombe Budi ing wayah esuk?",
        "ms": "Apakah yang biasanya diminum oleh Budi pada waktu pagi?",
    },
    {"en": "rice field", "id": "sawah", "su": "sawah", "jv": "sawah", "ms": "sawah padi"},
    {
        "en": "going to the market",
        "id": "pergi ke pasar",
        "su": "indit ka pasar",
        "jv": "lunga menyang pasar",
        "ms": "pergi ke pasar",
    },
)
"""Three short parallel examples; a page uses the source's text where we have it, else English."""

_FIELD_NOUNS = {"question": "Question", "concept": "Concept (a short phrase)"}


def _field_noun(field: str) -> str:
    if field.startswith("option:"):
        return "Answer option (a short phrase)"
    return _FIELD_NOUNS.get(field, "Text")


def _translate_page(text: str, source_lang: str, target_lang: str) -> str:
    source, target = language_name(source_lang), language_name(target_lang)
    lines = [f"{OPENINGS['translate'][1]}\nFrom {source} into {target}."]
    if all(target_lang in row for row in _PARALLEL):
        shown_lang = source_lang if all(source_lang in row for row in _PARALLEL) else "en"
        shown = language_name(shown_lang)
        lines += [f"{shown}: {row[shown_lang]}\n{target}: {row[target_lang]}" for row in _PARALLEL]
    lines.append(f"{source}: {_one_line(text)}\n{target}:")
    return "\n\n".join(lines)


def translate_request(
    text: str,
    field: str,
    source_lang: str,
    target_lang: str,
    style: PromptStyle,
    *,
    max_tokens: int = 256,
    seed: int = 0,
) -> GenerateRequest:
    """Ask for one field (``question``, ``concept`` or ``option:<label>``) translated, the translation only."""
    return _styled(
        style,
        lambda: (
            _TRANSLATE_SYSTEM.format(source=language_name(source_lang), target=language_name(target_lang)),
            f"{_field_noun(field)}:\n{text}",
        ),
        lambda: _translate_page(text, source_lang, target_lang),
        temperature=0.0,
        max_tokens=max_tokens,
        seed=seed,
    )


# --- hashes ----------------------------------------------------------------------------------

_PROBE = Fields(
    question="<question>",
    concept="<concept>",
    choices=tuple((label, f"<option {label}>") for label in "ABCDE"),
    answer="A",
)


def _text_of(request: GenerateRequest) -> str:
    if request.prompt is not None:
        return request.prompt
    return "\n\n".join(f"[{m.role}]\n{m.content}" for m in request.as_messages())


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def translation_pairs(langs: Sequence[str]) -> list[tuple[str, str]]:
    """The translation directions a run over ``langs`` uses (``langs[0]`` is the adaptation language)."""
    if not langs:
        return []
    first, further = langs[0], list(langs[1:])
    pairs = [("en", first)] + [(first, lang) for lang in further] + [(lang, first) for lang in further]
    return list(dict.fromkeys(pair for pair in pairs if pair[0] != pair[1]))


def template_hashes(langs: Sequence[str], style: PromptStyle) -> dict[str, str]:
    """``{name: sha256}`` of each template's fixed text (rendered around placeholder items)."""
    culture = "<culture>"
    out = {f"extract/{style}": _sha(_text_of(extract_request(_PROBE, style)))}
    for index, (template, yes_means_relevant) in enumerate(RELEVANCE_TEMPLATES):
        out[f"relevance/{index}"] = _sha(f"{template}\n{yes_means_relevant}")
    if langs:
        first = langs[0]
        out[f"adapt/{first}/{style}"] = _sha(_text_of(adapt_request(_PROBE, "en", first, culture, style)))
        renames = [_text_of(rename_request(_PROBE, lang, culture, style)) for lang in dict.fromkeys(("en", first))]
        out[f"rename/{style}"] = _sha("\n\n".join(renames))
    for source, target in translation_pairs(langs):
        request = translate_request("<text>", "question", source, target, style)
        out[f"translate/{source}-{target}/{style}"] = _sha(_text_of(request))
    return out
