"""Prompts for the three LM stages of the mCSQA recipe: generate, refine, distractors.

mCSQA (§3.2, Appendix D) found that prompts written in each target language work better
than one English prompt, so every supported language has its own template set, written
in that language (``template_data/<lang>.toml``; the wording is ours, not the paper's).

Each stage comes in two styles:

``chat``
    A :class:`~senseforge.llm.base.GenerateRequest` with a system and a user message, for
    instruction-tuned chat models.
``completion``
    A plain prompt for base models (e.g. the bundled Gemma 270M): a short instruction, two
    worked examples in the same language, and the target block, ending exactly where the
    model should continue. Generation stops at the end of the line.

The stages:

generate
    One question per (question set, chosen target): the chosen target is the only right
    answer, the other two are wrong, none of the three words may appear in the question,
    no surface cues (word length, letter counts), a question mark at the end, objective
    and answerable by common sense, one short sentence. The chat prompt also names the
    anchor (the question concept) as the topic. The relation is not named: ConceptNet
    relation names are English identifiers and the paper's prompt leaves them out too.
refine
    Repeat the question word for word if it is natural, else rewrite it naturally with
    the same meaning, rules and answer.
distractors
    Given only the three choices (never the question), two more plausible, distinct
    choices in the same language and style, as ``{"distractors": ["…", "…"]}``. The
    completion prompt ends inside that JSON object (:data:`DISTRACTORS_PREFIX`);
    :func:`senseforge.pipelines.mcsqa.parse.parse_distractors` accepts the bare continuation as well as full JSON.

Default sampling per stage follows the paper's Table 3 (:data:`GENERATE_SAMPLING`,
:data:`REFINE_SAMPLING`, :data:`DISTRACTORS_SAMPLING`). :func:`template_hash` identifies a
template for run manifests.

>>> from senseforge.data.schema import QuestionSet
>>> qs = QuestionSet(id="q1", lang="en", anchor="fish", relation="AtLocation",
...                  direction="forward", targets=["river", "aquarium", "market"])
>>> request = build_generate(qs, "aquarium", style="completion")
>>> request.prompt.splitlines()[-1]
'Question:'
>>> parse_question(' "Where do people keep fish as pets?"', "en")
'Where do people keep fish as pets?'
>>> parse_distractors('"pond", "restaurant"]}')
['pond', 'restaurant']
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from senseforge.data.lang import normalize_tag
from senseforge.data.schema import QuestionSet
from senseforge.errors import ConfigError
from senseforge.llm.base import GenerateRequest, PromptStyle, ReplyShape

WriteStep = Literal["generate", "refine", "distractors"]
"""A step that writes with an LM and has its own templates (the name of its stage, not a stage object)."""

STAGES: tuple[WriteStep, ...] = ("generate", "refine", "distractors")
"""The LM stages of the mCSQA recipe, in pipeline order."""
STYLES: tuple[PromptStyle, ...] = ("chat", "completion")
"""Prompt styles: chat messages, or a plain few-shot prompt for base models."""
SUPPORTED_LANGUAGES: tuple[str, ...] = ("en", "ja", "zh", "de", "pt", "nl", "fr", "ru", "id", "su")
"""Languages with a template set (primary subtags; ``zh`` is Simplified Chinese)."""


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters of one stage."""

    temperature: float
    top_p: float
    seed: int | None = 0


GENERATE_SAMPLING = Sampling(temperature=0.0, top_p=0.0, seed=0)
"""Question generation: greedy (mCSQA Table 3)."""
REFINE_SAMPLING = Sampling(temperature=0.7, top_p=0.5, seed=0)
"""Question refinement (mCSQA Table 3)."""
DISTRACTORS_SAMPLING = Sampling(temperature=1.2, top_p=0.7, seed=0)
"""Distractor augmentation (mCSQA Table 3)."""
DEFAULT_SAMPLING: Mapping[WriteStep, Sampling] = {
    "generate": GENERATE_SAMPLING,
    "refine": REFINE_SAMPLING,
    "distractors": DISTRACTORS_SAMPLING,
}
MAX_TOKENS: Mapping[WriteStep, int] = {"generate": 128, "refine": 128, "distractors": 96}
"""Default generation budget per stage (a question or two short choices)."""

COMPLETION_STOP: tuple[str, ...] = ("\n",)
"""Completion-style prompts want one line back."""
DISTRACTORS_PREFIX = '{"distractors": ['
"""Where completion-style distractor prompts end: the model continues the JSON list."""


class DistractorsReply(BaseModel):
    """The reply the distractors prompt asks for: ``{"distractors": ["…", "…"]}``, two new choices."""

    model_config = ConfigDict(extra="forbid")

    distractors: list[str] = Field(min_length=2, max_length=2)


DISTRACTORS_SHAPE = ReplyShape.of_model(DistractorsReply, name="mcsqa_distractors")
"""The shape of a distractors reply, sent with every distractors request (chat and completion alike)."""

_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
_FIELDS: Mapping[WriteStep, frozenset[str]] = {
    "generate": frozenset({"anchor", "answer", "wrong", "words"}),
    "refine": frozenset({"choices", "answer", "question"}),
    "distractors": frozenset({"choices"}),
}


# --------------------------------------------------------------------------- template data


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _clean_text(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


class _Labels(_Model):
    topic: str = Field(min_length=1)
    answer: str = Field(min_length=1)
    wrong: str = Field(min_length=1)
    question: str = Field(min_length=1)
    choices: str = Field(min_length=1)
    natural: str = Field(min_length=1)


class _GenerateExample(_Model):
    anchor: str = Field(min_length=1)
    answer: str = Field(min_length=1)
    wrong: tuple[str, str]
    question: str = Field(min_length=1)


class _RefineExample(_Model):
    choices: tuple[str, str, str]
    answer: str = Field(min_length=1)
    question: str = Field(min_length=1)
    natural: str = Field(min_length=1)


class _DistractorsExample(_Model):
    choices: tuple[str, str, str]
    distractors: tuple[str, str]


class _StageText(_Model):
    stage: ClassVar[WriteStep]
    system: str = Field(min_length=1)
    user: str = Field(min_length=1)
    instruction: str = Field(min_length=1)

    @field_validator("system", "user", "instruction", mode="before")
    @classmethod
    def _strip_text(cls, value: Any) -> Any:
        return _clean_text(value)

    @model_validator(mode="after")
    def _placeholders(self) -> _StageText:
        found = set(_PLACEHOLDER.findall(self.user))
        expected = _FIELDS[self.stage]
        if found != expected:
            raise ValueError(f"{self.stage} user template has placeholders {sorted(found)}, want {sorted(expected)}")
        for name in ("system", "instruction"):
            if _PLACEHOLDER.search(getattr(self, name)):
                raise ValueError(f"{self.stage} {name} must not contain placeholders")
        return self


class _GenerateText(_StageText):
    stage: ClassVar[WriteStep] = "generate"
    examples: tuple[_GenerateExample, _GenerateExample]


class _RefineText(_StageText):
    stage: ClassVar[WriteStep] = "refine"
    examples: tuple[_RefineExample, _RefineExample]


class _DistractorsText(_StageText):
    stage: ClassVar[WriteStep] = "distractors"
    examples: tuple[_DistractorsExample, _DistractorsExample]


class LanguageTemplates(_Model):
    """One language's template set, as stored in ``template_data/<lang>.toml``."""

    lang: str
    """Primary language subtag."""
    name: str
    """The language's own name for itself."""
    colon: str = ": "
    """Label separator in completion prompts (``：`` for ja/zh, `` : `` for fr)."""
    refusals: tuple[str, ...]
    """How a refusal starts in this language (matched case-insensitively at a line's start)."""
    labels: _Labels
    generate: _GenerateText
    refine: _RefineText
    distractors: _DistractorsText

    def stage(self, stage: WriteStep) -> _StageText:
        """The texts of one stage."""
        text: _StageText = getattr(self, stage)
        return text


@cache
def templates(lang: str) -> LanguageTemplates:
    """The template set for ``lang`` (any tag whose primary subtag is supported).

    Raises:
        ConfigError: when the language has no template set.
    """
    code = resolve_language(lang)
    resource = resources.files("senseforge.pipelines.mcsqa").joinpath("template_data", f"{code}.toml")
    try:
        data = tomllib.loads(resource.read_text(encoding="utf-8"))
        loaded = LanguageTemplates.model_validate(data)
    except (OSError, tomllib.TOMLDecodeError, ValidationError) as exc:  # a packaging or editing bug
        raise ConfigError(f"broken prompt templates for {code!r}: {exc}") from exc
    if loaded.lang != code:
        raise ConfigError(f"template_data/{code}.toml declares lang {loaded.lang!r}")
    return loaded


def resolve_language(lang: str) -> str:
    """The supported template language for a BCP-47 tag: ``pt-BR`` → ``pt``.

    Traditional Chinese tags (``zh-Hant``, ``zh-TW``, ``zh-HK``, ``zh-MO``) are refused: the
    ``zh`` templates are in Simplified Chinese and would steer the model to it.

    Raises:
        ConfigError: for a malformed tag or a language without templates.
    """
    supported = ", ".join(SUPPORTED_LANGUAGES)
    try:
        tag = normalize_tag(lang)
    except ValueError as exc:
        raise ConfigError(f"{lang!r} is not a language tag; prompt templates exist for: {supported}") from exc
    parts = tag.split("-")
    primary = parts[0]
    if primary == "zh" and ({"Hant", "TW", "HK", "MO"} & set(parts[1:])) and "Hans" not in parts:
        raise ConfigError(
            f"no prompt templates for {lang!r}: the zh templates are Simplified Chinese; supported: {supported}"
        )
    if primary not in SUPPORTED_LANGUAGES:
        raise ConfigError(f"no mCSQA prompt templates for language {lang!r}; supported: {supported}")
    return primary


# --------------------------------------------------------------------------- rendering


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) folded into one space."""
    return " ".join(text.split())


def _json_list(items: Sequence[str]) -> str:
    return json.dumps([one_line(item) for item in items], ensure_ascii=False)


def _fill(template: str, values: Mapping[str, str]) -> str:
    """Replace ``{name}`` placeholders in one pass (values are never re-scanned)."""
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def _line(t: LanguageTemplates, label: str, value: str) -> str:
    return f"{label}{t.colon}{value}"


def _prompt_end(t: LanguageTemplates, label: str) -> str:
    return f"{label}{t.colon.rstrip()}"


def _completion_skeleton(t: LanguageTemplates, stage: WriteStep) -> str:
    """The completion prompt with its examples filled in and the target block as placeholders."""
    lb = t.labels
    blocks: list[str] = []
    if stage == "generate":
        for g in t.generate.examples:
            blocks.append(
                "\n".join(
                    [
                        _line(t, lb.topic, g.anchor),
                        _line(t, lb.answer, g.answer),
                        _line(t, lb.wrong, _json_list(g.wrong)),
                        _line(t, lb.question, g.question),
                    ]
                )
            )
        tail = [
            _line(t, lb.topic, "{anchor}"),
            _line(t, lb.answer, "{answer}"),
            _line(t, lb.wrong, "{wrong}"),
            _prompt_end(t, lb.question),
        ]
        instruction = t.generate.instruction
    elif stage == "refine":
        for r in t.refine.examples:
            blocks.append(
                "\n".join(
                    [
                        _line(t, lb.choices, _json_list(r.choices)),
                        _line(t, lb.answer, r.answer),
                        _line(t, lb.question, r.question),
                        _line(t, lb.natural, r.natural),
                    ]
                )
            )
        tail = [
            _line(t, lb.choices, "{choices}"),
            _line(t, lb.answer, "{answer}"),
            _line(t, lb.question, "{question}"),
            _prompt_end(t, lb.natural),
        ]
        instruction = t.refine.instruction
    else:
        for d in t.distractors.examples:
            answer = json.dumps({"distractors": list(d.distractors)}, ensure_ascii=False)
            blocks.append("\n".join([_line(t, lb.choices, _json_list(d.choices)), answer]))
        tail = [_line(t, lb.choices, "{choices}"), DISTRACTORS_PREFIX]
        instruction = t.distractors.instruction
    return "\n\n".join([instruction, *blocks, "\n".join(tail)])


def _check_style(style: str) -> PromptStyle:
    if style == "chat":
        return "chat"
    if style == "completion":
        return "completion"
    raise ConfigError(f"unknown prompt style {style!r}; use one of: {', '.join(STYLES)}")


def _check_stage(stage: str) -> WriteStep:
    for known in STAGES:
        if stage == known:
            return known
    raise ConfigError(f"unknown mCSQA stage {stage!r}; use one of: {', '.join(STAGES)}")


def _request(
    stage: WriteStep,
    lang: str,
    style: str,
    values: Mapping[str, str],
    sampling: Sampling | None,
    max_tokens: int | None,
) -> GenerateRequest:
    t = templates(lang)
    chosen = _check_style(style)
    params = sampling or DEFAULT_SAMPLING[stage]
    common: dict[str, Any] = {
        "temperature": params.temperature,
        "top_p": params.top_p,
        "seed": params.seed,
        "max_tokens": max_tokens or MAX_TOKENS[stage],
    }
    shaped: dict[str, Any] = {"reply_shape": DISTRACTORS_SHAPE} if stage == "distractors" else {}
    if chosen == "chat":
        text = t.stage(stage)
        return GenerateRequest.chat(
            _fill(text.user, values), system=text.system, json_mode=stage == "distractors", **shaped, **common
        )
    return GenerateRequest(
        prompt=_fill(_completion_skeleton(t, stage), values), stop=COMPLETION_STOP, **shaped, **common
    )


def build_generate(
    qs: QuestionSet,
    answer: str,
    lang: str | None = None,
    style: PromptStyle = "chat",
    *,
    sampling: Sampling | None = None,
    max_tokens: int | None = None,
) -> GenerateRequest:
    """The request that asks for one question whose only right answer is ``answer``.

    Args:
        qs: The question set (anchor and three targets).
        answer: One of ``qs.targets``; the other two are named as wrong answers.
        lang: Template language; defaults to ``qs.lang``.
        style: ``chat`` or ``completion``.
        sampling: Overrides :data:`GENERATE_SAMPLING`.
        max_tokens: Overrides the stage's default budget.

    Raises:
        ValueError: when ``answer`` is not one of the targets.
        ConfigError: for an unsupported language or an unknown style.
    """
    if answer not in qs.targets:
        raise ValueError(f"answer {answer!r} is not one of the question set's targets {qs.targets}")
    wrong = [target for target in qs.targets if target != answer]
    values = {
        "anchor": one_line(qs.anchor),
        "answer": one_line(answer),
        "wrong": _json_list(wrong),
        "words": _json_list(qs.targets),
    }
    return _request("generate", lang or qs.lang, style, values, sampling, max_tokens)


def build_refine(
    question: str,
    answer: str,
    choices: Sequence[str],
    lang: str,
    style: PromptStyle = "chat",
    *,
    sampling: Sampling | None = None,
    max_tokens: int | None = None,
) -> GenerateRequest:
    """The request that asks the model to repeat a natural question or rewrite an unnatural one.

    Args:
        question: The generated question.
        answer: Its answer, one of ``choices``.
        choices: The question set's three targets.
        lang: Template language.
        style: ``chat`` or ``completion``.
        sampling: Overrides :data:`REFINE_SAMPLING`.
        max_tokens: Overrides the stage's default budget.

    Raises:
        ValueError: for an empty question, or an answer that is not one of the choices.
        ConfigError: for an unsupported language or an unknown style.
    """
    if not question.strip():
        raise ValueError("the question to refine is empty")
    if answer not in choices:
        raise ValueError(f"answer {answer!r} is not one of the choices {list(choices)}")
    values = {"choices": _json_list(choices), "answer": one_line(answer), "question": one_line(question)}
    return _request("refine", lang, style, values, sampling, max_tokens)


def build_distractors(
    choices: Sequence[str],
    lang: str,
    style: PromptStyle = "chat",
    *,
    sampling: Sampling | None = None,
    max_tokens: int | None = None,
) -> GenerateRequest:
    """The request that asks for two more plausible choices, given only the three choices.

    Raises:
        ValueError: unless ``choices`` holds three non-empty, distinct strings.
        ConfigError: for an unsupported language or an unknown style.
    """
    cleaned = [one_line(choice) for choice in choices]
    if len(cleaned) != 3 or not all(cleaned) or len(set(cleaned)) != 3:
        raise ValueError(f"give three distinct non-empty choices, got {list(choices)}")
    return _request("distractors", lang, style, {"choices": _json_list(cleaned)}, sampling, max_tokens)


# --------------------------------------------------------------------------- identity


def template_text(stage: str, lang: str, style: str) -> str:
    """The fixed text of one template, placeholders unfilled (chat: system and user turns)."""
    t = templates(lang)
    checked_stage = _check_stage(stage)
    if _check_style(style) == "chat":
        text = t.stage(checked_stage)
        return f"[system]\n{text.system}\n[user]\n{text.user}"
    return _completion_skeleton(t, checked_stage)


def template_hash(stage: str, lang: str, style: str) -> str:
    """SHA-256 (hex) of a template for the run manifest.

    It covers the template text and the request shape that goes with it (stop strings, JSON
    mode), not the sampling parameters, which a manifest records on their own.
    """
    checked_stage = _check_stage(stage)
    chat = _check_style(style) == "chat"
    payload = {
        "text": template_text(checked_stage, lang, style),
        "stop": [] if chat else list(COMPLETION_STOP),
        "json_mode": chat and checked_stage == "distractors",
    }
    canonical = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
