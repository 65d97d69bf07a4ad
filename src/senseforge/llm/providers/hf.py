"""Transformers causal LMs from a local folder: ``hf/<path>``.

The folder is what ``save_pretrained`` writes (``config.json``, weights, tokenizer
files). Nothing is fetched from the Hugging Face hub: a hub name such as
``org/model`` that is not also a local folder is a configuration error.

The model loads on the first call, not when the backend is created, so listing or
configuring a model costs nothing. :meth:`HFLLM.close` drops it again.

Log-likelihoods follow the conventions of lm-evaluation-harness (see
:meth:`HFLLM.loglikelihood`). Generation runs one request at a time so that each
request keeps its own sampling parameters and seed. Transformers has no JSON mode:
``json_mode`` is accepted and ignored, and callers read the answer with the tolerant
extractor (:meth:`senseforge.llm.base.Completion.json`).
"""

from __future__ import annotations

import gc
import hashlib
import inspect
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from senseforge.errors import BackendError, ConfigError
from senseforge.llm.base import (
    Completion,
    Failure,
    GenerateRequest,
    Loglikelihood,
    LoglikelihoodRequest,
    Message,
    Progress,
)
from senseforge.store.db import sha256_file

if TYPE_CHECKING:
    import torch

    from senseforge.store.db import Store

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
    """Options of the ``hf`` provider."""

    model_config = ConfigDict(extra="forbid")

    device: str = "cpu"
    """Torch device to run on: ``cpu``, ``cuda``, ``cuda:1``, ``mps`` …"""
    dtype: Literal["auto", "float32", "bfloat16"] = "float32"
    """Weight dtype. ``auto`` keeps the checkpoint's dtype; ``float32`` is the safe choice on CPU."""
    batch_size: int = Field(default=8, ge=1)
    """Log-likelihood requests scored per forward pass."""
    max_length: int | None = Field(default=None, ge=2)
    """Most tokens in one forward pass; defaults to the model's context size. Longer contexts lose their start."""


@dataclass(frozen=True)
class _Scored:
    """One log-likelihood request, tokenized and cut to the context window."""

    index: int
    tokens: list[int]
    """Input tokens of the forward pass."""
    targets: list[int]
    """The continuation tokens, predicted by the last ``len(targets)`` input positions."""


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def plain_chat_prompt(messages: Sequence[Message]) -> str:
    """The prompt used for chat requests when the tokenizer has no chat template.

    Each turn becomes a ``role: content`` line, and a final ``assistant:`` line asks the
    model to answer.

    >>> plain_chat_prompt([Message(role="user", content="Hi")])
    'user: Hi\\nassistant:'
    """
    lines = [f"{message.role}: {message.content}" for message in messages]
    lines.append("assistant:")
    return "\n".join(lines)


def earliest_stop(text: str, stops: Sequence[str]) -> int | None:
    """Index of the first place where any stop string starts, or None.

    >>> earliest_stop("a.b,c", [",", "."])
    1
    >>> earliest_stop("abc", ["x"]) is None
    True
    """
    found = [text.find(stop) for stop in stops if stop]
    hits = [index for index in found if index >= 0]
    return min(hits) if hits else None


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
        self._stop_strings_ok = False
        self._identity: dict[str, str] | None = None

    @property
    def name(self) -> str:
        return f"hf/{self._model_arg}"

    def identity(self) -> dict[str, str]:
        """The folder, a hash of the weights and ``config.json``, a hash of the tokenizer files, and the dtype."""
        if self._identity is None:
            files = sorted(p for p in self._path.iterdir() if p.is_file())
            weights = [p for p in files if p.name.endswith(WEIGHT_SUFFIXES) or p.name == "config.json"]
            tokenizer = [p for p in files if p.name in TOKENIZER_FILES]
            self._identity = {
                "path": str(self._path),
                "weights_sha256": self._combined_digest(weights),
                "tokenizer_sha256": self._combined_digest(tokenizer),
                "dtype": self._options.dtype,
            }
        return dict(self._identity)

    def _combined_digest(self, paths: Sequence[Path]) -> str:
        combined = hashlib.sha256()
        for path in paths:
            digest = self._store.file_digest(path) if self._store is not None else sha256_file(path)
            combined.update(f"{path.name}\0{digest}\n".encode())
        return combined.hexdigest()

    # -- loading ---------------------------------------------------------------------------

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

    def _prepare(self, index: int, request: LoglikelihoodRequest, window: int) -> _Scored:
        context_tokens, continuation_tokens = self._split(request)
        if not continuation_tokens:
            raise BackendError("the continuation encodes to no tokens")
        # keep the last window + 1 tokens: the inputs are all but the last, the targets the continuation
        full = (context_tokens + continuation_tokens)[-(window + 1) :]
        n_targets = min(len(continuation_tokens), len(full) - 1)
        return _Scored(index=index, tokens=full[:-1], targets=full[len(full) - n_targets :])

    def loglikelihood(
        self, requests: Sequence[LoglikelihoodRequest], progress: Progress | None = None
    ) -> list[Loglikelihood]:
        """Score each continuation given its context.

        As in lm-evaluation-harness: trailing whitespace of the context moves to the front
        of the continuation; the continuation's tokens are those of ``context +
        continuation`` past the tokens of ``context`` alone (so a merge across the seam is
        credited to the continuation); an empty context is replaced by BOS (EOS when there
        is no BOS); and when the text is longer than the context window, the start of the
        context is dropped. Requests are sorted by length, right-padded into batches of
        ``batch_size`` and scored with one forward pass per batch; results come back in
        input order. A request that cannot be scored gets a ``backend`` failure.

        Raises:
            BackendError: the model cannot be loaded.
        """
        self._load()
        results: list[Loglikelihood | None] = [None] * len(requests)
        window = self._context_window()
        prepared: list[_Scored] = []
        for index, request in enumerate(requests):
            try:
                prepared.append(self._prepare(index, request, window))
            except Exception as exc:  # one bad request must not sink the batch
                results[index] = Loglikelihood(failure=Failure(kind="backend", message=_one_line(exc)))
                if progress:
                    progress(1)
        prepared.sort(key=lambda item: (-len(item.tokens), item.index))
        size = self._options.batch_size
        for start in range(0, len(prepared), size):
            batch = prepared[start : start + size]
            began = time.perf_counter()
            try:
                scores = self._score_batch(batch)
            except Exception as exc:
                failure = Failure(kind="backend", message=_one_line(exc))
                scores = [Loglikelihood(failure=failure) for _ in batch]
            share = (time.perf_counter() - began) / len(batch)
            for item, score in zip(batch, scores, strict=True):
                score.latency_s = share
                results[item.index] = score
                if progress:
                    progress(1)
        return [result if result is not None else Loglikelihood() for result in results]

    def _score_batch(self, batch: Sequence[_Scored]) -> list[Loglikelihood]:
        """One forward pass over a right-padded batch; log-softmax only where continuation tokens are predicted."""
        import torch

        assert self._device is not None
        pad = self._tokenizer.pad_token_id
        if pad is None:
            pad = self._tokenizer.eos_token_id if self._tokenizer.eos_token_id is not None else 0
        width = max(len(item.tokens) for item in batch)
        input_ids = torch.full((len(batch), width), int(pad), dtype=torch.long)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        positions: list[list[int]] = []
        for row, item in enumerate(batch):
            length = len(item.tokens)
            input_ids[row, :length] = torch.tensor(item.tokens, dtype=torch.long)
            attention[row, :length] = 1
            positions.append(list(range(length - len(item.targets), length)))

        kwargs: dict[str, Any] = {}
        if self._keep_logits:
            # ask the model for logits at the needed positions only (their union over the batch)
            kept = sorted({p for row_positions in positions for p in row_positions})
            column = {p: i for i, p in enumerate(kept)}
            kwargs["logits_to_keep"] = torch.tensor(kept, dtype=torch.long, device=self._device)
        else:
            column = {p: p for p in range(width)}

        with torch.inference_mode():
            logits = self._model(
                input_ids=input_ids.to(self._device), attention_mask=attention.to(self._device), **kwargs
            ).logits
            out: list[Loglikelihood] = []
            for row, item in enumerate(batch):
                columns = torch.tensor([column[p] for p in positions[row]], dtype=torch.long, device=logits.device)
                row_logits = logits[row].index_select(0, columns).float()
                targets = torch.tensor(item.targets, dtype=torch.long, device=logits.device)
                logprobs = torch.log_softmax(row_logits, dim=-1).gather(1, targets.unsqueeze(1)).squeeze(1)
                greedy = bool((row_logits.argmax(dim=-1) == targets).all().item())
                out.append(
                    Loglikelihood(
                        logprob=float(logprobs.sum().item()),
                        is_greedy=greedy,
                        n_tokens=len(item.targets),
                        tokens_in=len(item.tokens),
                    )
                )
        return out

    # -- generation --------------------------------------------------------------------------

    def _prompt_tokens(self, request: GenerateRequest) -> list[int]:
        """Prompt tokens: a chat goes through the chat template (or :func:`plain_chat_prompt`)."""
        tokenizer = self._tokenizer
        if request.messages is not None and getattr(tokenizer, "chat_template", None):
            turns = [{"role": m.role, "content": m.content} for m in request.messages]
            text = tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)
            tokens = self._encode(str(text))  # the template writes its own BOS
        else:
            text = request.prompt if request.messages is None else plain_chat_prompt(request.messages)
            assert text is not None
            tokens = [int(t) for t in tokenizer.encode(text, add_special_tokens=True)]
        return tokens or list(self._empty_context)

    def _eos_ids(self) -> set[int]:
        eos = self._model.generation_config.eos_token_id
        if eos is None:
            eos = self._tokenizer.eos_token_id
        if eos is None:
            return set()
        return {int(e) for e in eos} if isinstance(eos, list | tuple) else {int(eos)}

    def _generate_one(self, request: GenerateRequest) -> Completion:
        import torch
        from transformers import GenerationConfig

        assert self._device is not None
        began = time.perf_counter()
        prompt = self._prompt_tokens(request)
        stops = [stop for stop in request.stop if stop]
        pad = self._model.generation_config.pad_token_id
        if pad is None:
            pad = self._tokenizer.pad_token_id
        if pad is None:
            pad = min(self._eos_ids() or {0})
        # the request's knobs, and those that would bend greedy decoding, override the checkpoint's defaults
        settings: dict[str, Any] = {
            "max_new_tokens": request.max_tokens,
            "min_new_tokens": 0,
            "num_beams": 1,
            "repetition_penalty": 1.0,
            "pad_token_id": int(pad),
        }
        if request.temperature == 0:
            settings["do_sample"] = False  # greedy: sampling knobs are not read
        else:
            settings.update(do_sample=True, temperature=request.temperature, top_p=request.top_p, top_k=0)
        use_stop_strings = bool(stops) and self._stop_strings_ok
        if use_stop_strings:
            settings["stop_strings"] = stops
        make_config: Any = GenerationConfig  # untyped in transformers
        config = make_config(**settings)

        input_ids = torch.tensor([prompt], dtype=torch.long, device=self._device)
        rng_devices = [] if self._device.type == "cpu" else [self._device.index or 0]
        device_type = None if self._device.type == "cpu" else self._device.type
        with torch.inference_mode(), torch.random.fork_rng(devices=rng_devices, device_type=device_type):
            if request.seed is not None:
                torch.manual_seed(request.seed)
            output = self._model.generate(
                input_ids=input_ids,
                attention_mask=torch.ones_like(input_ids),
                generation_config=config,
                tokenizer=self._tokenizer if use_stop_strings else None,
            )
        new_tokens = [int(t) for t in output[0, len(prompt) :].tolist()]
        text = str(self._tokenizer.decode(new_tokens, skip_special_tokens=True))
        cut = earliest_stop(text, stops)
        if cut is not None:
            text, finish = text[:cut], "stop"
        elif new_tokens and new_tokens[-1] in self._eos_ids():
            finish = "stop"
        elif len(new_tokens) >= request.max_tokens:
            finish = "length"
        else:
            finish = "stop"
        return Completion(
            text=text,
            finish_reason=finish,
            tokens_in=len(prompt),
            tokens_out=len(new_tokens),
            latency_s=time.perf_counter() - began,
        )

    def generate(self, requests: Sequence[GenerateRequest], progress: Progress | None = None) -> list[Completion]:
        """Generate one completion per request, one request at a time.

        Temperature 0 decodes greedily; otherwise tokens are sampled with ``top_p`` (no
        top-k) under ``torch.manual_seed(seed)``, inside a forked RNG so the caller's
        random state is left alone. Stop strings end generation early where transformers
        can match them on this tokenizer, and always cut the text. ``json_mode`` has no
        effect. A request that raises gets a ``backend`` failure.

        Raises:
            BackendError: the model cannot be loaded.
        """
        self._load()
        out: list[Completion] = []
        for request in requests:
            began = time.perf_counter()
            try:
                completion = self._generate_one(request)
            except Exception as exc:  # one bad request must not sink the batch
                completion = Completion(
                    failure=Failure(kind="backend", message=_one_line(exc)), latency_s=time.perf_counter() - began
                )
            out.append(completion)
            if progress:
                progress(1)
        return out


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
