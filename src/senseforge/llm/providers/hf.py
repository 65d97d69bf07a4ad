"""Transformers causal LMs from a local folder: ``hf/<path>``.

The folder is what ``save_pretrained`` writes (``config.json``, weights, tokenizer
files). Nothing is fetched from the Hugging Face hub: a hub name such as
``org/model`` that is not also a local folder is a configuration error.

The model loads on the first call, not when the backend is created, so listing or
configuring a model costs nothing. :meth:`HFLLM.close` drops it again.

Log-likelihoods follow the conventions of lm-evaluation-harness (see
:meth:`HFLLM.loglikelihood`) and cost one forward pass per batch: the choices of a
question share one encoding of their context, and the output head (a 262k-row matrix for
Gemma) runs only at positions that predict a continuation token. Generation runs one
request at a time so that each request keeps its own sampling parameters and seed.
Transformers has no JSON mode: ``json_mode`` is accepted and ignored, and callers read
the answer with the tolerant extractor (:meth:`senseforge.llm.base.Completion.json`).

A request's reply shape (:attr:`~senseforge.llm.base.GenerateRequest.reply_shape`) is enforced with ``llguidance``
where it is installed (the ``hf`` extra brings it) and the tokenizer is a fast one; its completion says whether it
was (``constrained``). Why that library: :mod:`senseforge.llm.providers._hf_shapes`.
"""

from __future__ import annotations

import gc
import hashlib
import inspect
import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

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
from senseforge.llm.providers._hf_generate import NoChatTemplateError, earliest_stop, generate_one
from senseforge.llm.providers._hf_scoring import (
    PROBE_TEXT,
    Forward,
    MaskKind,
    Scored,
    batch_rows,
    choose_paths,
    plan_rows,
)
from senseforge.store.db import sha256_file

if TYPE_CHECKING:
    import torch

    from senseforge.store.db import Store

__all__ = [
    "DEFAULT_MAX_LENGTH",
    "HFLLM",
    "TOKENIZER_FILES",
    "WEIGHT_SUFFIXES",
    "NoChatTemplateError",
    "Options",
    "create",
    "earliest_stop",
    "folder_chat_template",
]

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf")
"""File endings that count as weights for :meth:`HFLLM.identity`."""

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "special_tokens_map.json",
    "added_tokens.json",
    "chat_template.jinja",
    "chat_template.json",
    "generation_config.json",
)
"""Files besides the weights that change what the backend returns (tokenization, chat template, end tokens)."""

DEFAULT_MAX_LENGTH = 2048
"""Context cap used when neither the options nor the model config give one."""


class Options(BaseModel):
    """Options of the ``hf`` provider.

    Every one of them can change an answer, so all are part of :meth:`HFLLM.identity`: the
    device and dtype pick different kernels and rounding, and ``batch_size`` and
    ``max_length`` change padding, packing and truncation, which move float results.
    """

    model_config = ConfigDict(extra="forbid")

    OUTPUT_NEUTRAL: ClassVar[frozenset[str]] = frozenset()
    """Options that cannot change an answer: none."""

    device: str = "cpu"
    """Torch device to run on: ``cpu``, ``cuda``, ``cuda:1``, ``mps`` …"""
    dtype: Literal["auto", "float32", "bfloat16"] = "float32"
    """Weight dtype. ``auto`` keeps the checkpoint's dtype; ``float32`` is the safe choice on CPU."""
    batch_size: int = Field(default=16, ge=1)
    """Rows per log-likelihood forward pass. Requests that share a context (the choices of a question) share a row."""
    max_length: int | None = Field(default=None, ge=2)
    """Most tokens in one forward pass; defaults to the model's context size. Longer contexts lose their start."""


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class HFLLM:
    """A transformers causal LM loaded from a local folder.

    Args:
        model: the model part of the ``hf/<path>`` string, as given.
        path: the model folder, resolved.
        options: provider options.
        store: used to remember weight-file digests, if given.
    """

    def __init__(self, model: str, path: Path, options: Options, store: Store | None = None) -> None:
        self._model_arg = model
        self._path = path
        self._options = options
        self._store = store
        self._lock = threading.Lock()
        self._model: Any = None
        self._tokenizer: Any = None
        self._device: torch.device | None = None
        self._prefix: list[int] = []
        self._empty_context: list[int] = []
        self._keep_logits = False
        self._base: Any = None
        """The model without its output head, when :meth:`Forward.head` on its hidden states matches the model."""
        self._pack_limit: int | None = None
        """Longest request (input tokens) that may be packed with others; ``None``: never pack."""
        self._mask_kind: MaskKind = "bool"
        self._stop_strings_ok = False
        self._identity: dict[str, str] | None = None

    @property
    def name(self) -> str:
        return f"hf/{self._model_arg}"

    def identity(self) -> dict[str, str]:
        """The folder, a hash of the weights and ``config.json``, a hash of the tokenizer files, and the options."""
        if self._identity is None:
            files = sorted(p for p in self._path.iterdir() if p.is_file())
            weights = [p for p in files if p.name.endswith(WEIGHT_SUFFIXES) or p.name == "config.json"]
            tokenizer = [p for p in files if p.name in TOKENIZER_FILES]
            self._identity = {
                "path": str(self._path),
                "weights_sha256": self._combined_digest(weights),
                "tokenizer_sha256": self._combined_digest(tokenizer),
                **options_identity(self._options),
            }
        return dict(self._identity)

    def chat_template(self) -> str | None:
        """The tokenizer's chat template (see :func:`folder_chat_template`); ``None`` for a base model, whose
        chat requests are refused."""
        if self._tokenizer is not None:
            return "tokenizer.chat_template" if getattr(self._tokenizer, "chat_template", None) else None
        return folder_chat_template(self._path)

    def _combined_digest(self, paths: Sequence[Path]) -> str:
        combined = hashlib.sha256()
        for path in paths:
            digest = self._store.file_digest(path) if self._store is not None else sha256_file(path)
            combined.update(f"{path.name}\0{digest}\n".encode())
        return combined.hexdigest()

    # -- loading ---------------------------------------------------------------------------

    def load(self) -> None:
        """Load the model now rather than on the first call (e.g. to time calls without the load).

        Raises:
            BackendError: the folder does not hold a loadable model or tokenizer.
        """
        self._load()

    def _load(self) -> None:
        """Load tokenizer and model once (thread-safe).

        Raises:
            BackendError: the folder does not hold a loadable model or tokenizer.
        """
        with self._lock:
            if self._model is not None:
                return
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            dtype: Any = {"auto": "auto", "float32": torch.float32, "bfloat16": torch.bfloat16}[self._options.dtype]
            try:
                device = torch.device(self._options.device)
                tokenizer = AutoTokenizer.from_pretrained(str(self._path), local_files_only=True)
                model: Any = AutoModelForCausalLM.from_pretrained(str(self._path), local_files_only=True, dtype=dtype)
                model.to(device)
            except (OSError, ValueError, RuntimeError, KeyError, ImportError) as exc:
                raise BackendError(f"cannot load the transformers model in {self._path}: {_one_line(exc)}") from exc
            model.eval()

            self._prefix = self._start_tokens(tokenizer)
            anchor = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
            self._empty_context = self._prefix or ([int(anchor)] if anchor is not None else [])
            self._keep_logits = "logits_to_keep" in inspect.signature(model.forward).parameters
            self._stop_strings_ok = self._stop_strings_supported(tokenizer)
            self._device = device
            self._tokenizer = tokenizer
            self._model = model
            try:
                self._choose_paths()
            except Exception:  # the probe itself failed: score with the whole model, one request per row
                self._base, self._pack_limit = None, None

    @staticmethod
    def _start_tokens(tokenizer: Any) -> list[int]:
        """``[bos]`` when the tokenizer puts BOS in front of a text by itself, else ``[]``."""
        bos = tokenizer.bos_token_id
        if bos is None:
            return []
        with_specials = tokenizer.encode("a", add_special_tokens=True)
        without = tokenizer.encode("a", add_special_tokens=False)
        return [int(bos)] if with_specials[:1] == [bos] and without[:1] != [bos] else []

    @staticmethod
    def _stop_strings_supported(tokenizer: Any) -> bool:
        """Whether transformers can stop generation on strings with this tokenizer."""
        try:
            from transformers import StopStringCriteria

            StopStringCriteria(tokenizer=tokenizer, stop_strings=["\n"])
        except Exception:  # any failure means: cut the text afterwards instead
            return False
        return True

    def _context_window(self) -> int:
        if self._options.max_length is not None:
            return self._options.max_length
        config = self._model.config
        for attr in ("max_position_embeddings", "n_positions", "n_ctx", "seq_length"):
            value = getattr(config, attr, None)
            if isinstance(value, int) and value > 1:
                return value
        return DEFAULT_MAX_LENGTH

    def close(self) -> None:
        """Drop the model and tokenizer; a later call loads them again."""
        with self._lock:
            if self._model is None:
                return
            cuda = self._device is not None and self._device.type == "cuda"
            self._model = None
            self._tokenizer = None
        gc.collect()
        if cuda:
            import torch

            torch.cuda.empty_cache()

    # -- log-likelihood ----------------------------------------------------------------------

    def _encode(self, text: str) -> list[int]:
        return [int(t) for t in self._tokenizer.encode(text, add_special_tokens=False)]

    def _split(self, request: LoglikelihoodRequest) -> tuple[list[int], list[int]]:
        """Context and continuation tokens, the lm-evaluation-harness way."""
        context, continuation = request.context, request.continuation
        n_space = len(context) - len(context.rstrip())
        if n_space:
            continuation = context[-n_space:] + continuation
            context = context[:-n_space]
        if not context:
            if not self._empty_context:
                raise BackendError("the tokenizer has neither a BOS nor an EOS token to condition an empty context on")
            return list(self._empty_context), self._encode(continuation)
        whole = self._encode(context + continuation)
        context_tokens = self._encode(context)
        continuation_tokens = whole[len(context_tokens) :] or self._encode(continuation)
        return self._prefix + context_tokens, continuation_tokens

    def _prepare(self, index: int, request: LoglikelihoodRequest, window: int) -> Scored:
        context_tokens, continuation_tokens = self._split(request)
        if not continuation_tokens:
            raise BackendError("the continuation encodes to no tokens")
        # keep the last window + 1 tokens: the inputs are all but the last, the targets the continuation
        full = (context_tokens + continuation_tokens)[-(window + 1) :]
        n_targets = min(len(continuation_tokens), len(full) - 1)
        return Scored(index=index, tokens=full[:-1], targets=full[len(full) - n_targets :])

    def loglikelihood(
        self, requests: Sequence[LoglikelihoodRequest], progress: Progress | None = None
    ) -> list[Loglikelihood]:
        """Score each continuation given its context.

        As in lm-evaluation-harness: trailing whitespace of the context moves to the front
        of the continuation; the continuation's tokens are those of ``context +
        continuation`` past the tokens of ``context`` alone (so a merge across the seam is
        credited to the continuation); an empty context is replaced by BOS (EOS when there
        is no BOS); and when the text is longer than the context window, the start of the
        context is dropped. Results come back in input order; a request that cannot be
        scored gets a ``backend`` failure.

        Requests whose tokens share a context (the choices of one question) are packed into
        one row: the context once, then each continuation, with an attention mask that lets
        each continuation see the context and itself only, and position ids that restart
        after the context for each continuation. So the context is encoded once, and the
        result is the same as scoring each request alone. Identical requests are scored
        once. Rows are sorted by length, right-padded into batches of ``batch_size`` and
        scored with one forward pass per batch; the output head and the log-softmax run
        only at the positions that predict a continuation token.

        Raises:
            BackendError: the model cannot be loaded.
        """
        self._load()
        results: list[Loglikelihood | None] = [None] * len(requests)
        window = self._context_window()
        prepared: list[Scored] = []
        for index, request in enumerate(requests):
            try:
                prepared.append(self._prepare(index, request, window))
            except Exception as exc:  # one bad request must not sink the batch
                results[index] = Loglikelihood(failure=Failure(kind="backend", message=_one_line(exc)))
                if progress:
                    progress(1)
        batches = batch_rows(plan_rows(prepared, window, self._pack_limit), self._options.batch_size)
        for batch in batches:
            members = [member for row in batch for member in row.members]
            n_requests = sum(len(member.indices) for member in members)
            began = time.perf_counter()
            try:
                scores = self._forward().score_rows(batch)
            except Exception as exc:
                failure = Failure(kind="backend", message=_one_line(exc))
                scores = [Loglikelihood(failure=failure) for _ in members]
            share = (time.perf_counter() - began) / max(1, n_requests)
            for member, score in zip(members, scores, strict=True):
                for index in member.indices:
                    results[index] = score.model_copy(update={"latency_s": share})
            if progress:
                progress(n_requests)
        return [result if result is not None else Loglikelihood() for result in results]

    def _forward(self) -> Forward:
        """The loaded model and the scoring paths chosen for it, for a forward pass."""
        assert self._device is not None
        return Forward(self._model, self._tokenizer, self._device, self._base, self._keep_logits, self._mask_kind)

    def _choose_paths(self) -> None:
        """Decide once per load which fast scoring paths match the model's own forward pass (:func:`choose_paths`)."""
        self._base, self._pack_limit, self._mask_kind = None, None, "bool"
        assert self._device is not None
        probe = (self._prefix or self._empty_context) + self._encode(PROBE_TEXT)
        self._base, self._pack_limit, self._mask_kind = choose_paths(
            self._model,
            self._tokenizer,
            self._device,
            keep_logits=self._keep_logits,
            window=self._context_window(),
            probe=probe,
        )

    # -- generation --------------------------------------------------------------------------

    def _generate_one(self, request: GenerateRequest) -> Completion:
        assert self._device is not None
        return generate_one(
            self._model,
            self._tokenizer,
            self._device,
            request,
            empty_context=self._empty_context,
            stop_strings_ok=self._stop_strings_ok,
        )

    def generate(self, requests: Sequence[GenerateRequest], progress: Progress | None = None) -> list[Completion]:
        """Generate one completion per request, one request at a time.

        Temperature 0 decodes greedily; otherwise tokens are sampled with ``top_p`` (no
        top-k) under ``torch.manual_seed(seed)``, inside a forked RNG so the caller's
        random state is left alone. Stop strings end generation early where transformers
        can match them on this tokenizer, and always cut the text. ``json_mode`` has no
        effect; a reply shape holds the decoding to it where ``llguidance`` can (see
        :mod:`senseforge.llm.providers._hf_shapes`). A request that raises gets a ``backend`` failure.

        Raises:
            BackendError: the model cannot be loaded.
        """
        self._load()
        out: list[Completion] = []
        for request in requests:
            began = time.perf_counter()
            try:
                completion = self._generate_one(request)
            except NoChatTemplateError as exc:
                completion = Completion(attempts=0, failure=Failure(kind="unsupported", message=f"{self.name}: {exc}"))
            except Exception as exc:  # one bad request must not sink the batch
                completion = Completion(
                    failure=Failure(kind="backend", message=_one_line(exc)), latency_s=time.perf_counter() - began
                )
            out.append(completion)
            if progress:
                progress(1)
        return out


def folder_chat_template(path: Path) -> str | None:
    """Where a model folder keeps its chat template, or ``None`` when it has none (read from its files,
    nothing loaded): ``chat_template.jinja`` / ``chat_template.json``, else ``tokenizer_config.json``'s key."""
    for name in ("chat_template.jinja", "chat_template.json"):
        if (path / name).is_file():
            return name
    config = path / "tokenizer_config.json"
    try:
        data = json.loads(config.read_text(encoding="utf-8")) if config.is_file() else {}
    except (OSError, ValueError):
        return None
    return "tokenizer_config.json:chat_template" if isinstance(data, dict) and data.get("chat_template") else None


def chat_template_of(model: str, options: Options) -> str | None:
    """The chat template of ``hf/<model>`` before the model is loaded (for config-time decisions)."""
    del options
    path = Path(model).expanduser()
    return folder_chat_template(path) if path.is_dir() else None


def create(model: str, options: Options, store: Store | None = None) -> HFLLM:
    """Registry factory for ``hf/<path>``.

    Raises:
        ConfigError: the path is not a local model folder.
    """
    path = Path(model).expanduser()
    if not path.exists():
        raise ConfigError(
            f"hf model folder {model!r} does not exist: the hf provider loads local folders only and does not "
            "download hub names; download the model (e.g. `huggingface-cli download`) and pass its folder"
        )
    if not path.is_dir() or not (path / "config.json").is_file():
        raise ConfigError(f"hf model {model!r} is not a transformers model folder (a folder with config.json)")
    return HFLLM(model, path.resolve(), options, store)
