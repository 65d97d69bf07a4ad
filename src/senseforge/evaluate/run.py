"""Running an evaluation: items × formulation × model → per-sample records.

:func:`score_mc` and :func:`score_binary` turn records into per-sample dicts (prompt,
choices, scores, prediction, gold, correct) with one batched backend call each;
:mod:`senseforge.evaluate.report` turns those into metrics, and :func:`run_eval` ties it
together and writes ``results.json`` and ``samples.jsonl``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from senseforge.data.schema import BinaryExample, MCItem
from senseforge.errors import ConfigError
from senseforge.evaluate.extract import lenient_letter, strict_letter, yes_no
from senseforge.evaluate.formulations import Formulation, PromptVariant, binary_prompt, mc_prompt
from senseforge.evaluate.literals import PromptLanguage
from senseforge.llm.base import LLM, GenerateRequest, LoglikelihoodRequest, Progress

Sample = dict[str, Any]

GENERATE_INSTRUCTION = "Answer with the letter of the correct option only."


class EvalConfig(BaseModel):
    """How to evaluate (one config model instead of a growing signature)."""

    model_config = ConfigDict(extra="forbid")

    formulation: Formulation = "loglik"
    """``loglik`` (cloze), ``letter`` (next-token letters) or ``generate`` (text answers)."""
    variant: PromptVariant = "plain"
    """Prompt structure; ``putri1``–``putri3`` for Putri et al.'s three variants."""
    prompt_language: PromptLanguage = "en"
    """English cue words, or the item's language."""
    shots: int = Field(default=0, ge=0)
    """Solved examples before each item (drawn with the seed from ``shots_from``)."""
    seed: int = 0
    """Seed for shots and bootstrap."""
    limit: int | None = Field(default=None, ge=1)
    """Evaluate only the first N items."""
    max_tokens: int = Field(default=32, ge=1)
    """Generation budget (``generate`` and binary generation)."""
    n_bootstrap: int = Field(default=1000, ge=100)
    """Bootstrap resamples for confidence intervals."""
    binary_mode: Literal["loglik", "generate"] = "loglik"
    """Binary tasks: compare log-likelihoods of yes/no, or generate and parse."""
    oracle_knowledge: bool = False
    """Binary tasks: show the knowledge triples in the prompt."""
    chain_of_thought: bool = False
    """Binary tasks: reason first, answer in ``<Answer>`` tags (implies generation)."""


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
) -> list[Sample]:
    """Per-sample records for multiple-choice items (one batched backend call)."""
    prompts = [
        mc_prompt(
            item,
            config.formulation,
            shots=pick_shots(item, shot_pool, config.shots, config.seed),
            variant=config.variant,
            prompt_language=config.prompt_language,
        )
        for item in items
    ]
    if config.formulation == "generate":
        return _generate_mc(items, prompts, llm, config, progress)
    requests = [
        LoglikelihoodRequest(context=prompt.text, continuation=continuation)
        for prompt in prompts
        for continuation in prompt.continuations
    ]
    scores = llm.loglikelihood(requests, progress=progress)
    samples: list[Sample] = []
    cursor = 0
    for item, prompt in zip(items, prompts, strict=True):
        chunk = scores[cursor : cursor + len(prompt.continuations)]
        cursor += len(prompt.continuations)
        labels = [c.label for c in item.choices]
        gold = _gold_index(item)
        sample = _base_sample(item, prompt.text, prompt.continuations)
        failures = [s.failure for s in chunk if s.failure is not None]
        if failures:
            sample.update(error=f"{failures[0].kind}: {failures[0].message}", correct=None)
            samples.append(sample)
            continue
        logprobs = [float(s.logprob if s.logprob is not None else -math.inf) for s in chunk]
        chars = [max(1, len(c)) for c in prompt.continuations]
        nbytes = [max(1, len(c.encode("utf-8"))) for c in prompt.continuations]
        pred = _argmax(logprobs)
        pred_norm = _argmax([lp / n for lp, n in zip(logprobs, chars, strict=True)])
        pred_bytes = _argmax([lp / n for lp, n in zip(logprobs, nbytes, strict=True)])
        sample.update(
            scores=logprobs,
            is_greedy=[bool(s.is_greedy) for s in chunk],
            prediction=labels[pred],
            prediction_norm=labels[pred_norm],
            prediction_bytes=labels[pred_bytes],
            correct=None if gold is None else pred == gold,
            correct_norm=None if gold is None else pred_norm == gold,
            correct_bytes=None if gold is None else pred_bytes == gold,
        )
        samples.append(sample)
    return samples


def _base_sample(item: MCItem, prompt: str, continuations: Sequence[str]) -> Sample:
    return {
        "id": item.id,
        "lang": item.lang,
        "difficulty": item.difficulty,
        "category": item.category,
        "recipe": item.provenance.recipe,
        "review": item.provenance.review,
        "prompt": prompt,
        "choices": [c.text for c in item.choices],
        "labels": [c.label for c in item.choices],
        "continuations": list(continuations),
        "gold": item.answer,
    }


def _generate_mc(
    items: Sequence[MCItem],
    prompts: Sequence[Any],
    llm: LLM,
    config: EvalConfig,
    progress: Progress | None,
) -> list[Sample]:
    requests = [
        GenerateRequest.chat(prompt.text, system=GENERATE_INSTRUCTION, max_tokens=config.max_tokens, temperature=0.0)
        for prompt in prompts
    ]
    completions = llm.generate(requests, progress=progress)
    samples = []
    for item, prompt, completion in zip(items, prompts, completions, strict=True):
        sample = _base_sample(item, prompt.text, prompt.continuations)
        labels = [c.label for c in item.choices]
        letters = list(prompt.letters)
        if completion.failure is not None:
            sample.update(error=f"{completion.failure.kind}: {completion.failure.message}", correct=None)
            samples.append(sample)
            continue
        strict = strict_letter(completion.text, letters)
        lenient = lenient_letter(completion.text, letters, [c.text for c in item.choices])
        as_label = {letter: label for letter, label in zip(letters, labels, strict=True)}
        prediction = as_label.get(lenient) if lenient else None
        prediction_strict = as_label.get(strict) if strict else None
        sample.update(
            response=completion.text,
            prediction=prediction,
            prediction_strict=prediction_strict,
            parsed=prediction is not None,
            parsed_strict=prediction_strict is not None,
            correct=None if item.answer is None else prediction == item.answer,
            correct_strict=None if item.answer is None else prediction_strict == item.answer,
        )
        samples.append(sample)
    return samples


def score_binary(
    examples: Sequence[BinaryExample],
    llm: LLM,
    config: EvalConfig,
    *,
    progress: Progress | None = None,
) -> list[Sample]:
    """Per-sample records for (context, target) pairs judged yes/no."""
    prompts = [
        binary_prompt(
            ex,
            oracle_knowledge=config.oracle_knowledge,
            chain_of_thought=config.chain_of_thought,
            prompt_language=config.prompt_language,
        )
        for ex in examples
    ]
    samples: list[Sample] = []
    generate = config.binary_mode == "generate" or config.chain_of_thought
    if generate:
        budget = max(config.max_tokens, 256) if config.chain_of_thought else config.max_tokens
        completions = llm.generate(
            [GenerateRequest.chat(p.text, max_tokens=budget, temperature=0.0) for p in prompts], progress=progress
        )
        for ex, prompt, completion in zip(examples, prompts, completions, strict=True):
            sample = _binary_sample(ex, prompt.text)
            if completion.failure is not None:
                sample.update(error=f"{completion.failure.kind}: {completion.failure.message}", prediction=None)
            else:
                pred = yes_no(completion.text, prompt.yes, prompt.no)
                sample.update(response=completion.text, prediction=pred, parsed=pred is not None)
            sample["correct"] = sample.get("prediction") == ex.label if sample.get("prediction") is not None else False
            samples.append(sample)
        return samples
    requests = [
        LoglikelihoodRequest(context=p.text, continuation=p.space + word) for p in prompts for word in (p.yes, p.no)
    ]
    scores = llm.loglikelihood(requests, progress=progress)
    for index, (ex, prompt) in enumerate(zip(examples, prompts, strict=True)):
        yes, no = scores[2 * index], scores[2 * index + 1]
        sample = _binary_sample(ex, prompt.text)
        if yes.failure is not None or no.failure is not None:
            failure = yes.failure or no.failure
            assert failure is not None
            sample.update(error=f"{failure.kind}: {failure.message}", prediction=None, correct=False)
        else:
            assert yes.logprob is not None and no.logprob is not None
            pred = yes.logprob > no.logprob
            sample.update(scores=[yes.logprob, no.logprob], prediction=pred, parsed=True, correct=pred == ex.label)
        samples.append(sample)
    return samples


def _binary_sample(example: BinaryExample, prompt: str) -> Sample:
    dimensions = sorted({k.dimension for k in example.knowledge if k.dimension}) or ["other"]
    return {
        "id": example.id,
        "context_id": example.context_id,
        "task": example.task,
        "lang": example.lang,
        "dimensions": dimensions,
        "prompt": prompt,
        "target": example.target,
        "gold": example.label,
    }
