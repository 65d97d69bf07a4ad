"""Per-language words and symbols that evaluation prompts are built from.

One table, :data:`LITERALS`, holds for each supported language (a BCP-47 primary tag):

=================  ===========================================================================
key                meaning
=================  ===========================================================================
letters            answer labels, in order (A–E; kept per language so a script may differ)
question           cue before a question (``Question``)
answer             cue before an answer (``Answer``)
yes / no           the words a model answers a binary question with
cause              COPA connector before a cause (``because``)
effect             COPA connector before an effect (``therefore``)
space_separated    whether words are separated by spaces (``False`` for ja, zh, th)
choice_delimiter   what goes between a choice's label and its text (``A. bank``)
colon              what follows a cue word (``Question: …``; ``質問：…``)
question_mark      the question mark of the script (``?``, ``？``)
=================  ===========================================================================

Look values up with :func:`lookup`; a missing language or word is a
:class:`MissingLiteralError` naming both. Adding a language means adding one complete
row here (a test checks that every row has every key).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

from senseforge.data.lang import normalize_tag, primary_language
from senseforge.errors import ConfigError

LiteralValue = str | bool | tuple[str, ...]
"""A table cell: text, a flag, or the tuple of answer letters."""

LITERAL_KEYS: Final[tuple[str, ...]] = (
    "letters",
    "question",
    "answer",
    "yes",
    "no",
    "cause",
    "effect",
    "space_separated",
    "choice_delimiter",
    "colon",
    "question_mark",
)
"""Every key a complete language row has."""

_LATIN = ("A", "B", "C", "D", "E")


def _row(
    question: str,
    answer: str,
    yes: str,
    no: str,
    cause: str,
    effect: str,
    *,
    space_separated: bool = True,
    choice_delimiter: str = ". ",
    colon: str = ": ",
    question_mark: str = "?",
    letters: tuple[str, ...] = _LATIN,
) -> dict[str, LiteralValue]:
    return {
        "letters": letters,
        "question": question,
        "answer": answer,
        "yes": yes,
        "no": no,
        "cause": cause,
        "effect": effect,
        "space_separated": space_separated,
        "choice_delimiter": choice_delimiter,
        "colon": colon,
        "question_mark": question_mark,
    }


# Connectors join a premise to an alternative ("premise, because alternative"), so each
# is the word that opens a main clause after a comma in that language: German "denn"
# and Dutch "want" (not the verb-final "weil"/"omdat"), Tamil "ஏனெனில்".
_TABLE: dict[str, dict[str, LiteralValue]] = {
    "en": _row("Question", "Answer", "yes", "no", "because", "therefore"),
    "de": _row("Frage", "Antwort", "ja", "nein", "denn", "deshalb"),
    "fr": _row("Question", "Réponse", "oui", "non", "parce que", "donc", colon=" : "),
    "it": _row("Domanda", "Risposta", "sì", "no", "perché", "quindi"),
    "pt": _row("Pergunta", "Resposta", "sim", "não", "porque", "portanto"),
    "nl": _row("Vraag", "Antwoord", "ja", "nee", "want", "dus"),
    "ru": _row("Вопрос", "Ответ", "да", "нет", "потому что", "поэтому"),
    "et": _row("Küsimus", "Vastus", "jah", "ei", "sest", "seetõttu"),
    "tr": _row("Soru", "Cevap", "evet", "hayır", "çünkü", "bu yüzden"),
    "id": _row("Pertanyaan", "Jawaban", "ya", "tidak", "karena", "maka"),
    "su": _row("Patarosan", "Jawaban", "enya", "henteu", "sabab", "ku kituna"),
    "ht": _row("Kesyon", "Repons", "wi", "non", "paske", "donk"),
    "qu": _row("Tapuy", "Kutichiy", "arí", "manam", "imaraykuchus", "chayrayku"),
    "sw": _row("Swali", "Jibu", "ndiyo", "hapana", "kwa sababu", "kwa hiyo"),
    "ta": _row("கேள்வி", "பதில்", "ஆம்", "இல்லை", "ஏனெனில்", "எனவே"),
    "vi": _row("Câu hỏi", "Câu trả lời", "có", "không", "bởi vì", "vì vậy"),
    "th": _row("คำถาม", "คำตอบ", "ใช่", "ไม่ใช่", "เพราะ", "ดังนั้น", space_separated=False),
    "ja": _row(
        "質問",
        "答え",
        "はい",
        "いいえ",
        "なぜなら",
        "だから",
        space_separated=False,
        choice_delimiter="．",
        colon="：",
        question_mark="？",
    ),
    "zh": _row(
        "问题",
        "答案",
        "是",
        "否",
        "因为",
        "所以",
        space_separated=False,
        choice_delimiter="．",
        colon="：",
        question_mark="？",
    ),
}

LITERALS: Final = MappingProxyType({lang: MappingProxyType(row) for lang, row in _TABLE.items()})
"""The table: primary language tag → key → value (read-only)."""

SUPPORTED_LANGUAGES: Final[tuple[str, ...]] = tuple(sorted(LITERALS))
"""Languages with a row in the table."""


class MissingLiteralError(ConfigError, KeyError):
    """A language, or one of its words, is not in the literals table."""

    def __str__(self) -> str:
        # KeyError would show the message quoted; keep it plain.
        return str(self.args[0]) if self.args else ""


def lookup(lang: str, key: str) -> LiteralValue:
    """One literal of a language; region and script subtags fall back to the language.

    Args:
        lang: a BCP-47 tag (``pt-BR`` finds ``pt``).
        key: one of :data:`LITERAL_KEYS`.

    Raises:
        MissingLiteralError: the language has no row, or its row lacks ``key``.

    >>> lookup("ja", "answer"), lookup("pt-BR", "yes"), lookup("th", "space_separated")
    ('答え', 'sim', False)
    """
    try:
        tag = normalize_tag(lang)
    except ValueError as exc:
        raise MissingLiteralError(f"missing literal {key!r} for language {lang!r}: {exc}") from exc
    row = LITERALS.get(tag) or LITERALS.get(primary_language(tag))
    if row is None:
        raise MissingLiteralError(
            f"missing literal {key!r} for language {lang!r}: no literals for this language "
            f"(supported: {', '.join(SUPPORTED_LANGUAGES)}); add a row to senseforge.data.literals"
        )
    if key not in row:
        raise MissingLiteralError(
            f"missing literal {key!r} for language {lang!r}; known keys: {', '.join(LITERAL_KEYS)}"
        )
    return row[key]


def lookup_text(lang: str, key: str) -> str:
    """Like :func:`lookup`, for keys whose value is text (``yes``, ``cause`` …).

    Raises:
        MissingLiteralError: as :func:`lookup`.
        TypeError: the key holds a flag or the letters.
    """
    value = lookup(lang, key)
    if not isinstance(value, str):
        raise TypeError(f"literal {key!r} is a {type(value).__name__}, not text")
    return value


def copa_connector(lang: str, question: str) -> str:
    """The connector for a COPA item asking for the ``cause`` or the ``effect``.

    >>> copa_connector("id", "cause"), copa_connector("zh", "effect")
    ('karena', '所以')
    """
    if question not in ("cause", "effect"):
        raise ValueError(f"COPA question must be 'cause' or 'effect', got {question!r}")
    return lookup_text(lang, question)


def missing_keys(lang: str) -> list[str]:
    """Keys of :data:`LITERAL_KEYS` that the language's row lacks (all of them without a row)."""
    row = LITERALS.get(lang, MappingProxyType({}))
    return [key for key in LITERAL_KEYS if key not in row]
