"""Running an evaluation: items × formulation × model → per-sample records.

:func:`score_mc` and :func:`score_binary` turn items into :class:`MCSample` and
:class:`BinarySample` records (prompt, choices, scores, prediction, gold, correct) with one
batched backend call each;
:mod:`senseforge.evaluate.report` turns those into metrics, and :func:`run_eval` ties it
together and writes ``results.json`` and ``samples.jsonl``.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
import threading
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from senseforge.data.schema import BinaryExample, MCItem
from senseforge.errors import ConfigError, DataValidationError
from senseforge.evaluate.extract import lenient_letter, strict_letter, yes_no
from senseforge.evaluate.formulations import (
    PROMPT_VARIANTS,
    Formulation,
    MCPrompt,
    PromptVariant,
    binary_prompt,
    mc_prompt,
)
from senseforge.evaluate.judge import JUDGE_SHAPE, JUDGE_SYSTEM, VERDICT_SHAPE, judge_prompt, parse_verdict
from senseforge.evaluate.literals import PromptLanguage
from senseforge.evaluate.records import BinarySample, MCSample
from senseforge.llm.base import (
    LLM,
    MAX_TOP_LOGPROBS,
    GenerateRequest,
    LoglikelihoodRequest,
    Progress,
    ReplyShape,
    letter_probabilities,
)
from senseforge.llm.prompting import DEFAULT_STOP, chat_template, fit, sent

GENERATE_INSTRUCTION = "Answer with the letter of the correct option only."
OPEN_INSTRUCTION = "Answer the question in a few words, in the language it is asked in."
"""``open``: the system turn before the bare question (our wording)."""
JUDGE_MAX_TOKENS = 128
"""The judge's generation budget (a verdict and one sentence)."""
ANSWER_STOP: tuple[str, ...] = ("\n",)
"""Where a base model's answer ends in the ``generate`` and ``open`` formulations and a binary answer: at the end
of its line, before it writes a question of its own (a chat model's request carries no stop)."""
JUDGE_CUE = "\nVerdict (correct or incorrect):"
"""The cue after the judge's prompt when the judge is a base model (a chat judge answers the question as asked)."""


def ask(
    llm: LLM,
    user: str,
    *,
    system: str | None = None,
    stop: tuple[str, ...] = ANSWER_STOP,
    cue: str = "",
    **sampling: object,
) -> tuple[GenerateRequest, dict[str, object]]:
    """The request for ``llm`` (chat turns for a model with a chat template, else a completion prompt with the
    instruction written in) and the record of what it sends (see :mod:`senseforge.llm.prompting`)."""
    template = chat_template(llm)
    request = fit(GenerateRequest.chat(user, system=system, **sampling), template, stop=stop, cue=cue)
    return request, sent(request, template)


VariantChoice = PromptVariant | Literal["putri-all"]

PUTRI_VARIANTS: tuple[PromptVariant, ...] = tuple(v for v in PROMPT_VARIANTS if v.startswith("putri"))
"""What ``--variant putri-all`` runs: Putri et al.'s three prompt structures."""


class EvalConfig(BaseModel):
    """How to evaluate (one config model instead of a growing signature; ``eval run``'s options are its fields)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    formulation: Formulation = "loglik"
    """``loglik`` (cloze), ``letter`` (next-token letters), ``generate`` (text answers) or ``open`` (the
    question without its options; a :attr:`judge` model compares the free answer with the gold option)."""
    variant: VariantChoice = "plain"
    """Prompt structure; ``putri1``–``putri3`` for Putri et al.'s three variants, ``putri-all`` for all three."""
    prompt_language: PromptLanguage = "en"
    """English cue words, or the item's language."""
    shots: int = Field(default=0, ge=0)
    """Solved examples before each item (drawn with the seed from ``shots_from``)."""
    seed: int = 0
    """Seed for shots and bootstrap."""
    limit: int | None = Field(default=None, ge=1)
    """Evaluate only the first N items."""
    max_tokens: int = Field(default=32, ge=1)
    """Generation budget (``generate``, ``open`` and binary generation)."""
    n_bootstrap: int = Field(default=1000, ge=100)
    """Bootstrap resamples for confidence intervals."""
    binary_mode: Literal["loglik", "generate"] = "loglik"
    """Binary tasks: compare log-likelihoods of yes/no, or generate and parse."""
    oracle_knowledge: bool = False
    """Binary tasks: show the knowledge triples in the prompt."""
    chain_of_thought: bool = False
    """Binary tasks: reason first, answer in ``<Answer>`` tags (implies generation)."""
    crow_parity: bool = False
    """Binary tasks: count dimensions as CRoW's scripts do (per knowledge triple; a task without a
    dimension counts 0 in the cross-task mean) instead of once per example over the tasks that have it."""
    gold_key: Literal["answer_creator", "answer_majority"] = "answer_creator"
    """Multiple choice: the gold answer of items that carry both (Putri et al.'s Human_Gen): the creator's
    (the item's answer, as every format has it) or the majority of the other annotators."""
    judge: str | None = None
    """``open`` only (and required there): the judge model, as ``provider/model``."""
    top_logprobs: int = Field(default=0, ge=0, le=MAX_TOP_LOGPROBS)
    """``generate`` only: ask the endpoint for this many likeliest tokens at each answer position, and record each
    choice's probability where the answer letter is written (a sample's ``label_probs``); 0: none asked."""

    @model_serializer(mode="wrap")
    def _no_top_logprobs(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        shown: dict[str, Any] = handler(self)
        if shown.get("top_logprobs") == 0:  # not asked: the config (and an evaluation's identity) as before
            del shown["top_logprobs"]
        return shown

    def with_gold(self, items: Sequence[MCItem]) -> list[MCItem]:
        """The items with the gold answer :attr:`gold_key` names.

        Raises:
            DataValidationError: ``answer_majority`` asked for, and an item without one (named).
        """
        if self.gold_key == "answer_creator":
            return list(items)
        out: list[MCItem] = []
        for item in items:
            majority = item.metadata.get("answer_majority")
            if not isinstance(majority, str) or majority not in [c.label for c in item.choices]:
                raise DataValidationError(
                    f"item {item.id!r} has no answer_majority among its labels; --gold-key answer_majority "
                    "needs data with the annotators' majority (Putri et al.'s Human_Gen shape)"
                )
            out.append(item.model_copy(update={"answer": majority}))
        return out

    def variants(self) -> tuple[PromptVariant, ...]:
        """The prompt variants this run scores (three for ``putri-all``)."""
        return PUTRI_VARIANTS if self.variant == "putri-all" else (self.variant,)

    def check_variant(self) -> None:
        """The Putri variants differ in how the choices are listed, which the cloze prompt never shows.

        Raises:
            ConfigError: a Putri variant with the ``loglik`` formulation.
        """
        if self.variant.startswith("putri") and self.formulation in ("loglik", "open"):
            raise ConfigError(
                f"--variant {self.variant} changes how the choices are listed, and the {self.formulation} prompt "
                "lists none: use --formulation generate (Putri et al.'s protocol) or letter"
            )

    def check_judge(self) -> None:
        """``open`` needs a judge, and only ``open`` uses one; only ``generate`` uses :attr:`top_logprobs`.

        Raises:
            ConfigError: ``open`` without :attr:`judge`, a judge with another formulation, or top log-probabilities
                asked of another formulation than ``generate``.
        """
        if self.formulation == "open" and not self.judge:
            raise ConfigError(
                "--formulation open needs --judge provider/model: the model that decides whether each free "
                "answer means the gold option"
            )
        if self.judge and self.formulation != "open":
            raise ConfigError(f"--judge is used by --formulation open only (this run uses {self.formulation})")
        if self.top_logprobs and self.formulation != "generate":
            raise ConfigError(
                f"--top-logprobs is used by --formulation generate only (this run uses {self.formulation}): the "
                "other formulations score the choices themselves"
            )


def pick_shots(item: MCItem, pool: Sequence[MCItem], k: int, seed: int) -> list[MCItem]:
    """``k`` solved examples for ``item``, drawn with a per-item seed, never the item itself."""
    if k == 0:
        return []
    candidates = [shot for shot in pool if shot.id != item.id and shot.answer is not None]
    if len(candidates) < k:
        raise ConfigError(f"need {k} solved shots for item {item.id}, the shot pool has {len(candidates)}")
    return random.Random(f"{seed}\x1f{item.id}").sample(candidates, k)


def _argmax(values: Sequence[float]) -> int:
    best = 0
    for index, value in enumerate(values):
        if value > values[best]:
            best = index
    return best


def _gold_index(item: MCItem) -> int | None:
    labels = [c.label for c in item.choices]
    return labels.index(item.answer) if item.answer is not None else None


def score_mc(
    items: Sequence[MCItem],
    llm: LLM,
    config: EvalConfig,
    *,
    shot_pool: Sequence[MCItem] = (),
    progress: Progress | None = None,
    judge: LLM | None = None,
    letter_shape: bool = False,
) -> list[MCSample]:
    """Per-sample records for multiple-choice items (one batched backend call per prompt variant).

    With ``letter_shape``, each ``generate`` request carries the shape of its reply, one of the item's letters
    (:attr:`~senseforge.llm.base.GenerateRequest.reply_shape`), for a backend that constrains its decoding to it:
    the verification panel's generating members ask so. Off by default, so an evaluation still measures whether
    a model writes a letter that can be read.

    With several variants (``putri-all``) every item is scored once per variant, in variant
    order, and each record names its variant. ``open`` needs ``judge``, the opened model
    :attr:`EvalConfig.judge` names (one more batched call, to it). ``progress`` is told of items as they are
    scored (an item once per variant), not of the requests sent for them (see :func:`per_item`).

    Raises:
        ConfigError: a Putri variant with a prompt that lists no choices; ``open`` without a judge.
    """
    config.check_variant()
    config.check_judge()
    if config.formulation == "open" and judge is None:
        raise ConfigError(f"--formulation open: the judge {config.judge!r} was named but not opened (pass judge=)")
    variants = config.variants()
    samples: list[MCSample] = []
    for variant in variants:
        prompts = [
            mc_prompt(
                item,
                config.formulation,
                shots=pick_shots(item, shot_pool, config.shots, config.seed),
                variant=variant,
                prompt_language=config.prompt_language,
            )
            for item in items
        ]
        if config.formulation == "generate":
            scored = _generate_mc(items, prompts, llm, config, progress, letter_shape)
        elif config.formulation == "open" and judge is not None:
            scored = _open_mc(items, prompts, llm, judge, config, progress)
        else:
            scored = _loglik_mc(items, prompts, llm, progress)
        if len(variants) > 1:
            scored = [sample.model_copy(update={"variant": variant}) for sample in scored]
        samples += scored
    return samples


def _loglik_mc(
    items: Sequence[MCItem], prompts: Sequence[MCPrompt], llm: LLM, progress: Progress | None
) -> list[MCSample]:
    requests = [
        LoglikelihoodRequest(context=prompt.text, continuation=continuation)
        for prompt in prompts
        for continuation in prompt.continuations
    ]
    scores = llm.loglikelihood(requests, progress=per_item(progress, [len(p.continuations) for p in prompts]))
    samples: list[MCSample] = []
    cursor = 0
    for item, prompt in zip(items, prompts, strict=True):
        chunk = scores[cursor : cursor + len(prompt.continuations)]
        cursor += len(prompt.continuations)
        labels = [c.label for c in item.choices]
        gold = _gold_index(item)
        base = _base_sample(item, prompt)
        failures = [s.failure for s in chunk if s.failure is not None]
        if failures:
            samples.append(_mc(base, error=f"{failures[0].kind}: {failures[0].message}", correct=None))
            continue
        logprobs = [float(s.logprob if s.logprob is not None else -math.inf) for s in chunk]
        # lm-eval's acc_norm / acc_bytes: divide by the length of the text after the delimiter
        # (the delimiter is scored but not counted)
        texts = prompt.normalised()
        chars = [max(1, len(text)) for text in texts]
        nbytes = [max(1, len(text.encode("utf-8"))) for text in texts]
        pred = _argmax(logprobs)
        pred_norm = _argmax([lp / n for lp, n in zip(logprobs, chars, strict=True)])
        pred_bytes = _argmax([lp / n for lp, n in zip(logprobs, nbytes, strict=True)])
        samples.append(
            _mc(
                base,
                scores=logprobs,
                is_greedy=[bool(s.is_greedy) for s in chunk],
                prediction=labels[pred],
                prediction_norm=labels[pred_norm],
                prediction_bytes=labels[pred_bytes],
                correct=None if gold is None else pred == gold,
                correct_norm=None if gold is None else pred_norm == gold,
                correct_bytes=None if gold is None else pred_bytes == gold,
            )
        )
    return samples


def per_item(progress: Progress | None, shares: Sequence[int]) -> Progress | None:
    """A progress callback told of requests that tells ``progress`` of items, the ``i``-th item having
    ``shares[i]`` requests: items are counted in order, one once the requests answered cover its share and those of
    the items before it. The count is in items, never more than there are, and all of them once every request is
    answered (a concurrent backend answers out of order, so it is items' worth of answers, not those very items).

    >>> seen = []
    >>> tick = per_item(seen.append, [2, 3])
    >>> for _ in range(5):
    ...     tick(1)
    >>> seen
    [1, 1]
    """
    if progress is None:
        return None
    ends = list(itertools.accumulate(shares))
    answered = [0, 0]  # requests answered, items told
    lock = threading.Lock()

    def tick(n: int) -> None:
        with lock:
            answered[0] += n
            items = bisect.bisect_right(ends, answered[0])
            fresh, answered[1] = items - answered[1], items
        if fresh > 0:
            progress(fresh)

    return tick


def _mc(base: dict[str, object], **fields: object) -> MCSample:
    return MCSample.model_validate({**base, **fields})


def _binary(base: dict[str, object], **fields: object) -> BinarySample:
    return BinarySample.model_validate({**base, **fields})


def _base_sample(item: MCItem, prompt: MCPrompt) -> dict[str, object]:
    return {
        "id": item.id,
        "lang": item.lang,
        "difficulty": item.difficulty,
        "category": item.category,
        "recipe": item.provenance.recipe,
        "review": item.provenance.review,
        "prompt": prompt.text,
        "choices": [c.text for c in item.choices],
        "labels": [c.label for c in item.choices],
        "continuations": list(prompt.continuations),
        "gold": item.answer,
    }


def _generate_mc(
    items: Sequence[MCItem],
    prompts: Sequence[MCPrompt],
    llm: LLM,
    config: EvalConfig,
    progress: Progress | None,
    letter_shape: bool = False,
) -> list[MCSample]:
    asked = [
        ask(
            llm,
            prompt.text,
            system=GENERATE_INSTRUCTION,
            max_tokens=config.max_tokens,
            temperature=0.0,
            top_logprobs=config.top_logprobs,
            reply_shape=ReplyShape.one_of("answer_letter", prompt.letters) if letter_shape else None,
        )
        for prompt in prompts
    ]
    completions = llm.generate([request for request, _ in asked], progress=progress)  # one request an item
    samples: list[MCSample] = []
    for item, prompt, completion, (_, record) in zip(items, prompts, completions, asked, strict=True):
        base = {**_base_sample(item, prompt), "sent": record}
        labels = [c.label for c in item.choices]
        letters = list(prompt.letters)
        if completion.failure is not None:
            samples.append(_mc(base, error=f"{completion.failure.kind}: {completion.failure.message}", correct=None))
            continue
        strict = strict_letter(completion.text, letters)
        lenient = lenient_letter(completion.text, letters, [c.text for c in item.choices])
        as_label = {letter: label for letter, label in zip(letters, labels, strict=True)}
        prediction = as_label.get(lenient) if lenient else None
        prediction_strict = as_label.get(strict) if strict else None
        probs = letter_probabilities(completion, letters)
        if probs is not None:  # only where asked and given: other samples are written as they always were
            base["label_probs"] = {as_label[letter]: p for letter, p in probs.items()}
        samples.append(
            _mc(
                base,
                response=completion.text,
                finish_reason=completion.finish_reason,
                prediction=prediction,
                prediction_strict=prediction_strict,
                parsed=prediction is not None,
                parsed_strict=prediction_strict is not None,
                # an unparsed answer is a wrong answer
                correct=None if item.answer is None else prediction == item.answer,
                correct_strict=None if item.answer is None else prediction_strict == item.answer,
            )
        )
    return samples


def _open_mc(
    items: Sequence[MCItem],
    prompts: Sequence[MCPrompt],
    llm: LLM,
    judge: LLM,
    config: EvalConfig,
    progress: Progress | None,
) -> list[MCSample]:
    """The free answer to the bare question, then the judge's verdict against the gold option.

    ``progress`` counts an item once it is scored: after its verdict, or after its answer when there is nothing to
    judge."""
    asked = [
        ask(llm, prompt.text, system=OPEN_INSTRUCTION, max_tokens=config.max_tokens, temperature=0.0)
        for prompt in prompts
    ]
    completions = llm.generate([request for request, _ in asked])
    to_judge: list[tuple[int, GenerateRequest]] = []
    judge_sent: dict[int, dict[str, object]] = {}
    shape = JUDGE_SHAPE if chat_template(judge) is not None else VERDICT_SHAPE
    for index, (item, completion) in enumerate(zip(items, completions, strict=True)):
        gold = item.answer_text()
        if completion.failure is not None or item.answer is None or gold is None:
            continue
        others = [c.text for c in item.choices if c.label != item.answer]
        text = judge_prompt(item.question, gold, others, completion.text)
        request, record = ask(
            judge,
            text,
            system=JUDGE_SYSTEM,
            cue=JUDGE_CUE,
            max_tokens=JUDGE_MAX_TOKENS,
            temperature=0.0,
            reply_shape=shape,
        )
        to_judge.append((index, request))
        judge_sent[index] = record
    if progress is not None and len(to_judge) < len(items):
        progress(len(items) - len(to_judge))
    verdicts = dict(
        zip(
            [index for index, _ in to_judge],
            judge.generate([request for _, request in to_judge], progress=progress) if to_judge else [],
            strict=True,
        )
    )
    samples: list[MCSample] = []
    for index, (item, prompt, completion) in enumerate(zip(items, prompts, completions, strict=True)):
        base = {**_base_sample(item, prompt), "sent": asked[index][1]}
        if completion.failure is not None:
            samples.append(_mc(base, error=f"{completion.failure.kind}: {completion.failure.message}", correct=None))
            continue
        base["finish_reason"] = completion.finish_reason
        reply = verdicts.get(index)
        if reply is None:  # no gold answer: nothing to judge
            samples.append(_mc(base, response=completion.text, correct=None))
            continue
        base["judge_sent"] = judge_sent[index]
        if reply.failure is not None:
            samples.append(
                _mc(
                    base,
                    response=completion.text,
                    judge=config.judge,
                    error=f"judge {reply.failure.kind}: {reply.failure.message}",
                    correct=None,
                )
            )
            continue
        verdict = parse_verdict(reply.text)
        fields: dict[str, object] = {
            "response": completion.text,
            "judge": config.judge,
            "judge_response": reply.text,
            "parsed": verdict.correct is not None,
            # an unread verdict is a wrong answer (and flagged by parsed=False)
            "correct": bool(verdict.correct),
        }
        if verdict.label is not None:
            fields["judge_verdict"] = verdict.label
        if verdict.reason is not None:
            fields["judge_reason"] = verdict.reason
        samples.append(_mc(base, **fields))
    return samples


def score_binary(
    examples: Sequence[BinaryExample],
    llm: LLM,
    config: EvalConfig,
    *,
    progress: Progress | None = None,
) -> list[BinarySample]:
    """Per-sample records for (context, target) pairs judged yes/no; ``progress`` is told of examples as they are
    scored, not of the requests sent for them."""
    prompts = [
        binary_prompt(
            ex,
            oracle_knowledge=config.oracle_knowledge,
            chain_of_thought=config.chain_of_thought,
            prompt_language=config.prompt_language,
        )
        for ex in examples
    ]
    samples: list[BinarySample] = []
    generate = config.binary_mode == "generate" or config.chain_of_thought
    if generate:
        budget = max(config.max_tokens, 256) if config.chain_of_thought else config.max_tokens
        # a base model's reasoning may run over several lines: it ends at a blank line instead
        stop = DEFAULT_STOP if config.chain_of_thought else ANSWER_STOP
        asked = [ask(llm, p.text, stop=stop, max_tokens=budget, temperature=0.0) for p in prompts]
        completions = llm.generate([request for request, _ in asked], progress=progress)  # one request an example
        for ex, prompt, completion, (_, record) in zip(examples, prompts, completions, asked, strict=True):
            base = {**binary_sample_fields(ex, prompt.text), "sent": record}
            if completion.failure is not None:
                sample = _binary(
                    base, error=f"{completion.failure.kind}: {completion.failure.message}", prediction=None
                )
            else:
                pred = yes_no(completion.text, prompt.yes, prompt.no)
                sample = _binary(
                    base,
                    response=completion.text,
                    finish_reason=completion.finish_reason,
                    prediction=pred,
                    parsed=pred is not None,
                )
            sample.correct = sample.prediction == ex.label if sample.prediction is not None else False
            samples.append(sample)
        return samples
    requests = [
        LoglikelihoodRequest(context=p.text, continuation=p.space + word) for p in prompts for word in (p.yes, p.no)
    ]
    scores = llm.loglikelihood(requests, progress=per_item(progress, [2] * len(prompts)))
    for index, (ex, prompt) in enumerate(zip(examples, prompts, strict=True)):
        yes, no = scores[2 * index], scores[2 * index + 1]
        base = binary_sample_fields(ex, prompt.text)
        failure = yes.failure or no.failure
        if failure is not None or yes.logprob is None or no.logprob is None:
            message = f"{failure.kind}: {failure.message}" if failure else "no log-likelihood returned"
            samples.append(_binary(base, error=message, prediction=None, correct=False))
        else:
            pred = yes.logprob > no.logprob
            samples.append(
                _binary(base, scores=[yes.logprob, no.logprob], prediction=pred, parsed=True, correct=pred == ex.label)
            )
    return samples


def binary_sample_fields(example: BinaryExample, prompt: str) -> dict[str, object]:
    """A :class:`BinarySample`'s fields that come from the example (ids, task, dimensions, gold).

    Shared with :mod:`senseforge.evaluate.submission`, so a scored submission's per-dimension
    metrics count exactly as ``eval run``'s.
    """
    dimensions = sorted({k.dimension for k in example.knowledge if k.dimension}) or ["other"]
    base: dict[str, object] = {
        "id": example.id,
        "context_id": example.context_id,
        "task": example.task,
        "lang": example.lang,
        "dimensions": dimensions,
        "prompt": prompt,
        "target": example.target,
        "gold": example.label,
    }
    if example.knowledge:
        base["triple_dimensions"] = [k.dimension or None for k in example.knowledge]
    return base
