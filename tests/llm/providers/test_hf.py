"""The ``hf`` provider against a tiny random-weight GPT-2 built in the test.

No download: the tokenizer is a byte-level BPE trained here in milliseconds and the
model is a two-layer GPT-2 with random weights. The reference numbers come from plain
forward passes over the same folder.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from senseforge.errors import ConfigError  # noqa: E402
from senseforge.llm.base import LLM, GenerateRequest, LoglikelihoodRequest, Message, ReplyShape  # noqa: E402
from senseforge.llm.cache import CachedLLM  # noqa: E402
from senseforge.llm.prices import PriceTable  # noqa: E402
from senseforge.llm.providers import hf  # noqa: E402
from senseforge.llm.registry import get_llm  # noqa: E402
from senseforge.store.db import Store  # noqa: E402

SENTENCES = [
    "The cat sat on the mat and looked at the rain.",
    "A dog runs in the park every morning before breakfast.",
    "People share tea with their neighbours when it is cold outside.",
    "She put the umbrella by the door because the sky was grey.",
    "In the market, the baker sells bread, rice cakes and sweet buns.",
    "Children walk to school together and greet the old man at the corner.",
    "He said thank you, bowed, and took off his shoes at the entrance.",
]

PAIRS = [
    ("The cat sat on the", " mat"),
    ("A dog runs in the park every morning", " before breakfast."),
    ("People share tea with their neighbours when it is ", "cold outside"),  # trailing space moves over
    ("She put", " the umbrella by the door because the sky was grey."),
    ("Hi", "!"),
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved tokenizer + random GPT-2 folder, as ``save_pretrained`` writes it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<pad>", "<bos>", "<eos>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    raw.train_from_iterator(SENTENCES, trainer)
    bos_id = raw.token_to_id("<bos>")
    # like Llama or Gemma: the tokenizer puts BOS in front of every text itself
    raw.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A <bos> $B", special_tokens=[("<bos>", bos_id)]
    )
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=raw, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>"
    )
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=raw.get_vocab_size(),
        n_positions=128,
        n_embd=32,
        n_layer=2,
        n_head=2,
        bos_token_id=bos_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = transformers.GPT2LMHeadModel(config).eval()
    path = tmp_path_factory.mktemp("tiny-gpt2")
    tokenizer.save_pretrained(path)
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def reference(folder: Path) -> tuple[Any, Any]:
    """The same tokenizer and model, loaded directly."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True).eval()
    return tokenizer, model


@pytest.fixture(scope="module")
def llm(folder: Path) -> Iterator[hf.HFLLM]:
    backend = hf.create(str(folder), hf.Options(batch_size=3), None)
    yield backend
    backend.close()


def manual_score(tokenizer: Any, model: Any, context: str, continuation: str) -> tuple[float, bool, int]:
    """Unbatched reference: one forward pass over context + continuation."""
    n_space = len(context) - len(context.rstrip())
    if n_space:
        context, continuation = context[:-n_space], context[-n_space:] + continuation
    if context:
        whole = tokenizer.encode(context + continuation, add_special_tokens=False)
        context_ids = tokenizer.encode(context, add_special_tokens=False)
        targets = whole[len(context_ids) :]
        tokens = [tokenizer.bos_token_id, *context_ids, *targets]
    else:
        targets = tokenizer.encode(continuation, add_special_tokens=False)
        tokens = [tokenizer.bos_token_id, *targets]
    with torch.no_grad():
        logits = model(torch.tensor([tokens])).logits[0]
    logprobs = torch.log_softmax(logits.double(), dim=-1)
    n = len(targets)
    rows = range(len(tokens) - 1 - n, len(tokens) - 1)
    total = sum(float(logprobs[row, target]) for row, target in zip(rows, targets, strict=True))
    greedy = all(int(logits[row].argmax()) == target for row, target in zip(rows, targets, strict=True))
    return total, greedy, n


def test_tokenizer_adds_bos(reference: tuple[Any, Any]) -> None:
    tokenizer, _ = reference
    assert tokenizer.encode("the cat", add_special_tokens=True)[0] == tokenizer.bos_token_id


def test_loglikelihood_matches_manual_forward(llm: hf.HFLLM, folder: Path, reference: tuple[Any, Any]) -> None:
    tokenizer, model = reference
    requests = [LoglikelihoodRequest(context=c, continuation=x) for c, x in PAIRS]
    seen: list[int] = []
    batched = llm.loglikelihood(requests, progress=seen.append)
    assert sum(seen) == len(requests)
    single = hf.create(str(folder), hf.Options(batch_size=1)).loglikelihood(requests)
    for (context, continuation), got, one in zip(PAIRS, batched, single, strict=True):
        assert got.ok, got.failure
        expected, greedy, n = manual_score(tokenizer, model, context, continuation)
        assert got.logprob == pytest.approx(expected, abs=1e-4)
        assert one.logprob == pytest.approx(got.logprob, abs=1e-5)
        assert got.is_greedy is greedy
        assert got.n_tokens == n
        assert got.tokens_in is not None and got.tokens_in > n


def test_is_greedy_for_the_argmax_token(llm: hf.HFLLM, reference: tuple[Any, Any]) -> None:
    tokenizer, model = reference
    context = "The cat sat on the"
    ids = tokenizer.encode(context, add_special_tokens=True)
    with torch.no_grad():
        best = int(model(torch.tensor([ids])).logits[0, -1].argmax())
    continuation = tokenizer.decode([best])
    if not continuation.strip() or tokenizer.encode(context + continuation)[len(ids) :] != [best]:
        pytest.skip("the argmax token does not survive a decode/encode round trip")
    [score] = llm.loglikelihood([LoglikelihoodRequest(context=context, continuation=continuation)])
    assert score.is_greedy is True
    assert score.n_tokens == 1


def test_empty_context_conditions_on_bos(llm: hf.HFLLM, reference: tuple[Any, Any]) -> None:
    tokenizer, model = reference
    requests = [
        LoglikelihoodRequest(context="", continuation="The cat"),
        LoglikelihoodRequest(context="  ", continuation="dog"),
    ]
    for request, got in zip(requests, llm.loglikelihood(requests), strict=True):
        assert got.ok, got.failure
        expected, greedy, n = manual_score(tokenizer, model, request.context, request.continuation)
        assert got.logprob == pytest.approx(expected, abs=1e-4)
        assert got.n_tokens == n
        assert got.is_greedy is greedy


def manual_greedy(tokenizer: Any, model: Any, prompt: str, steps: int) -> tuple[str, int]:
    ids = tokenizer.encode(prompt, add_special_tokens=True)
    new: list[int] = []
    with torch.no_grad():
        for _ in range(steps):
            token = int(model(torch.tensor([ids + new])).logits[0, -1].argmax())
            new.append(token)
            if token == tokenizer.eos_token_id:
                break
    return tokenizer.decode(new, skip_special_tokens=True), len(new)


def test_greedy_generation_matches_argmax_loop(llm: hf.HFLLM, reference: tuple[Any, Any]) -> None:
    tokenizer, model = reference
    prompt = "The dog runs in the"
    expected, n = manual_greedy(tokenizer, model, prompt, 12)
    [got] = llm.generate([GenerateRequest(prompt=prompt, temperature=0.0, max_tokens=12, json_mode=True)])
    assert got.ok, got.failure
    assert got.text == expected
    assert got.tokens_out == n
    assert got.tokens_in == len(tokenizer.encode(prompt, add_special_tokens=True))
    assert got.finish_reason == ("length" if n == 12 else "stop")


class _Verdict(BaseModel):
    kind: Literal["good", "bad"]
    sure: bool


def test_a_reply_shape_holds_the_decoding_with_llguidance(llm: hf.HFLLM) -> None:
    """On the random-weight model, whose free replies are noise: a schema's reply validates as the model and ends
    when the schema does; a set of choices gives one of them; both say so."""
    pytest.importorskip("llguidance")
    schema = ReplyShape.of_model(_Verdict)
    verdict = ReplyShape.one_of("verdict", ["yes", "no"])
    as_json, as_word, sampled = llm.generate(
        [
            GenerateRequest(prompt="The dog runs in the", max_tokens=40, reply_shape=schema),
            GenerateRequest(prompt="Is the cat on the mat?", max_tokens=8, reply_shape=verdict),
            GenerateRequest(prompt="Hi", max_tokens=40, reply_shape=schema, temperature=1.0, seed=3),
        ]
    )
    for reply in (as_json, sampled):
        assert reply.ok and reply.constrained is True and reply.finish_reason == "stop", reply
        _Verdict.model_validate_json(reply.text)
    assert as_word.ok and as_word.constrained is True and as_word.text.strip() in ("yes", "no")


def test_without_llguidance_a_shape_is_not_enforced_and_the_completion_says_so(
    llm: hf.HFLLM, reference: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the library the reply is the greedy one, unchanged, and marked unconstrained; a request without a
    shape says nothing."""
    monkeypatch.setitem(sys.modules, "llguidance", None)  # as if not installed
    tokenizer, model = reference
    prompt = "The dog runs in the"
    expected, _ = manual_greedy(tokenizer, model, prompt, 8)
    shape = ReplyShape.one_of("verdict", ["yes", "no"])
    shaped, plain = llm.generate(
        [GenerateRequest(prompt=prompt, max_tokens=8, reply_shape=shape), GenerateRequest(prompt=prompt, max_tokens=8)]
    )
    assert shaped.ok and shaped.text == expected and shaped.constrained is False
    assert plain.ok and plain.constrained is None


def test_stop_strings_cut_the_text(llm: hf.HFLLM, reference: tuple[Any, Any]) -> None:
    tokenizer, model = reference
    prompt = "She put the"
    full, n_full = manual_greedy(tokenizer, model, prompt, 16)
    candidates = [ch for ch in full[1:] if ch.isascii() and ch.isprintable()]
    assert candidates, f"no usable stop character in {full!r}"
    stop = candidates[len(candidates) // 2]
    [got] = llm.generate([GenerateRequest(prompt=prompt, max_tokens=16, stop=("\x00never", stop))])
    assert got.ok, got.failure
    assert got.text == full[: full.index(stop)]
    assert got.finish_reason == "stop"
    assert got.tokens_out is not None and 1 <= got.tokens_out <= n_full


def test_chat_turns_without_template_are_refused(llm: hf.HFLLM) -> None:
    """A base model's tokenizer has no chat template: chat turns are refused in one line, never wrapped in a
    made-up template; the prompt that fit() writes for it is answered."""
    from senseforge.llm.prompting import chat_template, fit

    assert chat_template(llm) is None
    request = GenerateRequest(
        messages=(Message(role="system", content="Be brief."), Message(role="user", content="The cat")), max_tokens=5
    )
    refused, plain = llm.generate([request, fit(request, chat_template(llm))])
    assert refused.failure is not None and refused.failure.kind == "unsupported"
    assert "no chat template" in refused.failure.message and "\n" not in refused.failure.message
    assert plain.ok and plain.tokens_in is not None


def test_sampling_is_reproducible_per_seed(llm: hf.HFLLM) -> None:
    def sample(seed: int) -> str:
        request = GenerateRequest(prompt="The cat", temperature=1.0, top_p=0.9, seed=seed, max_tokens=16)
        [got] = llm.generate([request])
        assert got.ok, got.failure
        return got.text

    torch.manual_seed(7)
    before = torch.rand(3)
    torch.manual_seed(7)
    first = sample(123)
    assert torch.equal(torch.rand(3), before)  # the caller's RNG state is untouched
    assert sample(123) == first
    assert sample(124) != first


def test_missing_folder_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not download"):
        hf.create(str(tmp_path / "nope"), hf.Options())
    with pytest.raises(ConfigError, match="does not download"):
        get_llm("hf/google/gemma-3-270m")
    with pytest.raises(ConfigError, match=r"config\.json"):
        hf.create(str(tmp_path), hf.Options())


def test_identity_hash_is_stable(folder: Path, tmp_path: Path) -> None:
    plain = hf.create(str(folder), hf.Options())
    stored = hf.create(str(folder), hf.Options(), Store(f"sqlite:///{tmp_path / 'store.db'}"))
    first = plain.identity()
    assert first["path"] == str(folder.resolve())
    assert len(first["weights_sha256"]) == 64
    assert plain.identity() == first
    assert stored.identity() == first
    assert stored.identity() == first  # second time from the digest table

    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    assert hf.create(str(copy), hf.Options()).identity()["weights_sha256"] == first["weights_sha256"]
    config = copy / "config.json"
    config.write_text(config.read_text().replace("{", '{\n  "senseforge_test": 1,', 1))
    assert hf.create(str(copy), hf.Options()).identity()["weights_sha256"] != first["weights_sha256"]


def test_registry_builds_a_working_backend(folder: Path, reference: tuple[Any, Any]) -> None:
    tokenizer, model = reference
    backend = get_llm(f"hf/{folder}", {"batch_size": 2, "max_length": 64})
    assert backend.name == f"hf/{folder}"
    context, continuation = PAIRS[0]
    [score] = backend.loglikelihood([LoglikelihoodRequest(context=context, continuation=continuation)])
    assert score.logprob == pytest.approx(manual_score(tokenizer, model, context, continuation)[0], abs=1e-4)
    [completion] = backend.generate([GenerateRequest(prompt="The cat", max_tokens=3)])
    assert completion.ok and completion.tokens_out is not None and completion.tokens_out <= 3
    backend.close()
    with pytest.raises(ConfigError, match="bad options"):
        get_llm(f"hf/{folder}", {"batch": 2})


def test_truncation_keeps_the_end_of_the_context(folder: Path) -> None:
    backend = hf.create(str(folder), hf.Options(max_length=8))
    request = LoglikelihoodRequest(context=" ".join(SENTENCES), continuation=" the rain.")
    [short] = backend.loglikelihood([request])
    assert short.ok, short.failure
    assert short.tokens_in == 8


def test_tokenizer_without_bos_scores_the_bare_context(folder: Path, tmp_path: Path) -> None:
    """GPT-2 style: BOS exists but is not added, so only an empty context gets it."""
    copy = tmp_path / "no-bos"
    shutil.copytree(folder, copy)
    tokenizer_file = copy / "tokenizer.json"
    data = json.loads(tokenizer_file.read_text())
    data["post_processor"] = None
    tokenizer_file.write_text(json.dumps(data))
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(copy), local_files_only=True)
    assert tokenizer.encode("the cat", add_special_tokens=True)[0] != tokenizer.bos_token_id
    model = transformers.AutoModelForCausalLM.from_pretrained(str(copy), local_files_only=True).eval()

    context, continuation = PAIRS[1]
    whole = tokenizer.encode(context + continuation, add_special_tokens=False)
    context_ids = tokenizer.encode(context, add_special_tokens=False)
    with torch.no_grad():
        logprobs = torch.log_softmax(model(torch.tensor([whole])).logits[0], dim=-1)
    expected = sum(float(logprobs[i - 1, whole[i]]) for i in range(len(context_ids), len(whole)))

    backend = hf.create(str(copy), hf.Options())
    scores = backend.loglikelihood(
        [
            LoglikelihoodRequest(context=context, continuation=continuation),
            LoglikelihoodRequest(context="", continuation="The cat"),
        ]
    )
    assert scores[0].logprob == pytest.approx(expected, abs=1e-4)
    assert scores[1].logprob == pytest.approx(manual_score(tokenizer, model, "", "The cat")[0], abs=1e-4)


# -- the fast log-likelihood paths ------------------------------------------------------------

CHOICES = [" mat", " dog in the park", " rain", " mat", " bread, rice cakes and sweet buns", " the old man"]


def shared_context_requests() -> list[tuple[str, str]]:
    """Questions with several choices each (one repeated), as an evaluation sends them."""
    contexts = ["The cat sat on the", "Children walk to school and greet", "In the market, the baker sells "]
    return [(context, choice) for context in contexts for choice in CHOICES]


def test_fast_paths_are_used(llm: hf.HFLLM) -> None:
    """GPT-2 under sdpa: the head runs on picked rows only and the choices of a question share a row."""
    llm.load()
    assert llm._base is not None
    assert llm._pack_limit is not None


@pytest.mark.parametrize("batch_size", [1, 2, 16])
def test_shared_contexts_match_manual_forward(folder: Path, reference: tuple[Any, Any], batch_size: int) -> None:
    tokenizer, model = reference
    pairs = shared_context_requests()
    backend = hf.create(str(folder), hf.Options(batch_size=batch_size))
    seen: list[int] = []
    scores = backend.loglikelihood([LoglikelihoodRequest(context=c, continuation=x) for c, x in pairs], seen.append)
    assert sum(seen) == len(pairs)
    for (context, continuation), got in zip(pairs, scores, strict=True):
        assert got.ok, got.failure
        expected, greedy, n = manual_score(tokenizer, model, context, continuation)
        assert got.logprob == pytest.approx(expected, abs=1e-4)
        assert got.is_greedy is greedy
        assert got.n_tokens == n
    assert scores[0].logprob == scores[3].logprob  # the repeated choice


def test_fallback_paths_match_manual_forward(
    folder: Path, reference: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the fast paths (a model they do not fit): the whole model, one request per row."""
    tokenizer, model = reference
    monkeypatch.setattr(hf.HFLLM, "_choose_paths", lambda self: None)
    pairs = shared_context_requests() + PAIRS
    for keep_logits in (True, False):
        backend = hf.create(str(folder), hf.Options(batch_size=4))
        backend.load()
        assert backend._base is None and backend._pack_limit is None
        backend._keep_logits = keep_logits
        scores = backend.loglikelihood([LoglikelihoodRequest(context=c, continuation=x) for c, x in pairs])
        for (context, continuation), got in zip(pairs, scores, strict=True):
            assert got.logprob == pytest.approx(manual_score(tokenizer, model, context, continuation)[0], abs=1e-4)


def test_bfloat16_runs_in_bfloat16(folder: Path, reference: tuple[Any, Any]) -> None:
    """dtype=bfloat16 loads and scores in bfloat16 (close to a bf16 forward pass), not silently in float32."""
    tokenizer, model = reference
    bf16 = transformers.AutoModelForCausalLM.from_pretrained(
        str(folder), local_files_only=True, dtype=torch.bfloat16
    ).eval()
    backend = hf.create(str(folder), hf.Options(dtype="bfloat16", batch_size=4))
    backend.load()
    assert all(p.dtype == torch.bfloat16 for p in backend._model.parameters())
    assert backend._base is not None and backend._pack_limit is not None
    pairs = shared_context_requests()
    scores = backend.loglikelihood([LoglikelihoodRequest(context=c, continuation=x) for c, x in pairs])
    off = []
    for (context, continuation), got in zip(pairs, scores, strict=True):
        assert got.ok, got.failure
        assert got.logprob == pytest.approx(manual_score(tokenizer, bf16, context, continuation)[0], abs=0.05)
        off.append(abs(got.logprob - manual_score(tokenizer, model, context, continuation)[0]))
    assert max(off) > 1e-5  # bf16 rounding shows: it did not run in float32


@pytest.fixture(scope="module")
def gemma_folder(folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Gemma 3: a 6-token sliding window on one layer, and final logit soft-capping."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    torch.manual_seed(1)
    config = transformers.Gemma3TextConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=128,
        sliding_window=6,
        layer_types=["sliding_attention", "full_attention"],
        final_logit_softcapping=2.0,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = transformers.Gemma3ForCausalLM(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.5)  # large enough that soft-capping and the window matter
    path = tmp_path_factory.mktemp("tiny-gemma3")
    tokenizer.save_pretrained(path)
    model.save_pretrained(path)
    return path


def test_sliding_window_and_softcapping(gemma_folder: Path) -> None:
    """Requests longer than the window are scored in rows of their own; the head applies soft-capping."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(gemma_folder), local_files_only=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(gemma_folder), local_files_only=True).eval()
    backend = hf.create(str(gemma_folder), hf.Options(batch_size=3))
    backend.load()
    assert backend._base is not None  # the soft-capped head reproduces the model's logits
    assert backend._pack_limit == 6
    pairs = [("Hi", "!"), ("Hi", " the cat"), ("The cat", " sat"), *shared_context_requests(), *PAIRS]
    scores = backend.loglikelihood([LoglikelihoodRequest(context=c, continuation=x) for c, x in pairs])
    for (context, continuation), got in zip(pairs, scores, strict=True):
        expected, greedy, _ = manual_score(tokenizer, model, context, continuation)
        assert got.logprob == pytest.approx(expected, abs=1e-4)
        assert got.is_greedy is greedy


# -- options and the cache ---------------------------------------------------------------------

OPTION_VALUES: dict[str, Any] = {
    "device": "cpu:0",
    "dtype": "bfloat16",
    "batch_size": 1,
    "max_length": 8,
}
"""A value other than the default for every option (a new option must get one here)."""

CACHE_SCORES = [LoglikelihoodRequest(context=PAIRS[1][0], continuation=x) for x in (" before breakfast.", " mat")]
CACHE_PROMPTS = [GenerateRequest(prompt="The cat sat", max_tokens=3)]


def answers(llm: LLM) -> list[dict[str, Any]]:
    """The answers to a few requests of each kind, without what describes the call (cached, latency …)."""
    call = {"cached", "latency_s", "attempts", "retry_errors"}
    results = [*llm.loglikelihood(CACHE_SCORES), *llm.generate(CACHE_PROMPTS)]
    assert all(result.ok for result in results), [result.failure for result in results]
    return [result.model_dump(exclude=call) for result in results]


def test_every_option_has_a_test_value() -> None:
    assert set(OPTION_VALUES) == set(hf.Options.model_fields)
    for name, value in OPTION_VALUES.items():
        assert value != hf.Options.model_fields[name].default, name


@pytest.mark.parametrize("name", sorted(hf.Options.model_fields))
def test_identity_holds_exactly_the_output_changing_options(folder: Path, name: str) -> None:
    if name not in OPTION_VALUES:
        pytest.fail(f"option {name!r} has no test value in OPTION_VALUES")
    default = hf.create(str(folder), hf.Options()).identity()
    changed = hf.create(str(folder), hf.Options(**{name: OPTION_VALUES[name]})).identity()
    assert (changed == default) is (name in hf.Options.OUTPUT_NEUTRAL)
    assert json.loads(default["options"]) == {"batch_size": 16, "device": "cpu", "dtype": "float32", "max_length": None}


@pytest.mark.parametrize("name", sorted(hf.Options.model_fields))
def test_a_shared_cache_answers_as_a_fresh_run(folder: Path, tmp_path: Path, name: str) -> None:
    """Changing an option misses the cache unless it is output-neutral, and either way the answers are a fresh run's."""
    if name not in OPTION_VALUES:
        pytest.fail(f"option {name!r} has no test value in OPTION_VALUES")
    shared = Store(f"sqlite:///{tmp_path / 'shared.db'}")
    answers(CachedLLM(hf.create(str(folder), hf.Options()), shared, prices=PriceTable({})))
    options = hf.Options(**{name: OPTION_VALUES[name]})
    on_shared = CachedLLM(hf.create(str(folder), options), shared, prices=PriceTable({}))
    from_shared = answers(on_shared)
    empty = Store(f"sqlite:///{tmp_path / 'empty.db'}")
    from_empty = answers(CachedLLM(hf.create(str(folder), options), empty, prices=PriceTable({})))
    n_requests = len(CACHE_SCORES) + len(CACHE_PROMPTS)
    neutral = name in hf.Options.OUTPUT_NEUTRAL
    assert (on_shared.stats.hits, on_shared.stats.misses) == ((n_requests, 0) if neutral else (0, n_requests))
    assert from_shared == from_empty
