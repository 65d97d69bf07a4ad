"""How an item becomes prompts: cloze by log-likelihood, answer letters, generation, or an open question.

Prompt building is separate from scoring (``run.py``): each function here returns the
text a model sees and the continuations or requests to score, and nothing else. Words
that depend on the language (cue words, yes/no, letters, whether words are separated by
spaces) come from :mod:`senseforge.evaluate.literals`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from senseforge.data.schema import BinaryExample, MCItem
from senseforge.evaluate.literals import Literals, PromptLanguage, copa_connector, literals

Formulation = Literal["loglik", "letter", "generate", "open"]
PromptVariant = Literal["plain", "putri1", "putri2", "putri3"]

PROMPT_VARIANTS: tuple[PromptVariant, ...] = ("plain", "putri1", "putri2", "putri3")
"""``plain`` is the cue-word prompt; ``putri1``–``putri3`` follow the structure of the three
zero-shot prompts of Putri et al. (Appendix E), worded by us: a header naming the
concept; a question cue and a choices header; or both."""


@dataclass(frozen=True)
class MCPrompt:
    """What the model sees for one multiple-choice item."""

    text: str
    """The prompt (shots included) up to and including the answer cue."""
    continuations: tuple[str, ...]
    """For ``loglik``: the choice texts as scored; for ``letter``: the letters as scored."""
    letters: tuple[str, ...]
    """The labels shown for the choices, in order."""
    delimiter: str = ""
    """What each continuation starts with before its text (a space, or nothing for ``ja``, ``zh`` …)."""

    def normalised(self) -> tuple[str, ...]:
        """Each continuation without its delimiter: what ``acc_norm`` and ``acc_bytes`` divide by.

        lm-eval scores the delimiter but counts only the choice text (its ``target_delimiter``
        is not part of the choice), and so do we.
        """
        cut = len(self.delimiter)
        return tuple(c[cut:] if c.startswith(self.delimiter) else c for c in self.continuations)


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def prompt_hash(template_id: str) -> str:
    """A short, stable hash identifying a prompt template (recorded in results)."""
    return hashlib.sha256(template_id.encode("utf-8")).hexdigest()[:12]


def _sep(lit: Literals) -> str:
    return " " if lit.space_separated else ""


def _question_block(item: MCItem, lit: Literals, *, with_choices: bool, variant: PromptVariant) -> str:
    letters = lit.letters[: len(item.choices)]
    listed = "\n".join(f"{letter}. {c.text}" for letter, c in zip(letters, item.choices, strict=True))
    concept = item.question_concept or ""
    header = lit.header.format(concept=concept) + "\n\n" if concept else ""
    if not with_choices:
        return f"{lit.question}: {item.question}\n{lit.answer}:"
    if variant == "putri1":
        return f"{header}{item.question}\n{listed}\n{lit.answer}:"
    if variant == "putri2":
        return f"{lit.question}: {item.question}\n{lit.choices}:\n{listed}\n{lit.answer}:"
    if variant == "putri3":
        return f"{header}{lit.question}: {item.question}\n{listed}\n{lit.answer}:"
    return f"{lit.question}: {item.question}\n{listed}\n{lit.answer}:"


def _answer_text(item: MCItem, lit: Literals, formulation: Formulation) -> str:
    if item.answer is None:
        return ""
    if formulation in ("loglik", "open"):
        return _sep(lit) + (item.answer_text() or "")
    index = [c.label for c in item.choices].index(item.answer)
    return _sep(lit) + lit.letters[index]


def mc_prompt(
    item: MCItem,
    formulation: Formulation,
    *,
    shots: Sequence[MCItem] = (),
    variant: PromptVariant = "plain",
    prompt_language: PromptLanguage = "en",
) -> MCPrompt:
    """The prompt and scored continuations of one item.

    Args:
        item: the evaluated item.
        formulation: ``loglik`` scores each choice text after a question-and-answer cue;
            ``letter`` lists the choices and scores each letter; ``generate`` lists the
            choices and lets the model answer in text; ``open`` shows the question alone (no
            choices, nothing scored) for a free answer that a judge compares with the gold.
        shots: solved examples put before the item (never the item itself).
        variant: prompt structure (see :data:`PROMPT_VARIANTS`).
        prompt_language: English cue words, or the item's own (see :mod:`.literals`).
    """
    lit = literals(item.lang, prompt_language)
    letters = tuple(lit.letters[: len(item.choices)])
    copa = item.metadata.get("copa_question")
    if formulation == "loglik" and copa in ("cause", "effect") and not shots:
        # COPA as cloze: "<premise without its full stop> because|therefore" + " <choice>"
        connector = copa_connector(item.lang, str(copa), prompt_language)
        premise = item.question.rstrip().rstrip(".。")
        return MCPrompt(
            text=f"{premise}{_sep(lit)}{connector}",
            continuations=tuple(_sep(lit) + _lower_first(c.text) for c in item.choices),
            letters=letters,
            delimiter=_sep(lit),
        )
    with_choices = formulation not in ("loglik", "open")
    blocks = [
        _question_block(shot, lit, with_choices=with_choices, variant=variant) + _answer_text(shot, lit, formulation)
        for shot in shots
        if shot.id != item.id
    ]
    blocks.append(_question_block(item, lit, with_choices=with_choices, variant=variant))
    text = "\n\n".join(blocks)
    if formulation == "loglik":
        continuations = tuple(_sep(lit) + c.text for c in item.choices)
    elif formulation == "open":
        continuations = ()
    else:
        continuations = tuple(_sep(lit) + letter for letter in letters)
    return MCPrompt(text=text, continuations=continuations, letters=letters, delimiter=_sep(lit))


@dataclass(frozen=True)
class BinaryPrompt:
    """What the model sees for one (context, target) pair."""

    text: str
    yes: str
    no: str
    space: str


def binary_prompt(
    example: BinaryExample,
    *,
    oracle_knowledge: bool = False,
    chain_of_thought: bool = False,
    prompt_language: PromptLanguage = "en",
) -> BinaryPrompt:
    """A yes/no question about whether the target fits the context.

    Args:
        example: the pair.
        oracle_knowledge: also show the knowledge triples that link context and target.
        chain_of_thought: ask for reasoning first and the answer inside ``<Answer>`` tags.
    """
    lit = literals(example.lang or "en", prompt_language)
    parts = [f"{lit.context}: {example.context}", f"{lit.target}: {example.target}"]
    if oracle_knowledge and example.knowledge:
        facts = "; ".join(f"{k.head} {k.relation} {k.tail}" for k in example.knowledge)
        parts.append(f"{lit.knowledge}: {facts}")
    parts.append(lit.binary_question)
    if chain_of_thought:
        parts.append(lit.think_then_tag.format(yes=lit.yes, no=lit.no))
    else:
        parts.append(f"{lit.answer}:")
    return BinaryPrompt(text="\n".join(parts), yes=lit.yes, no=lit.no, space=_sep(lit))
