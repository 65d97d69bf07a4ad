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
"""

from __future__ import annotations

import gc
import hashlib
import inspect
import math
import threading
import time
from collections.abc import Iterator, Sequence
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

_LOGIT_ELEMENTS = 1 << 26
"""Most logits the output head computes at once: big vocabularies go a few hundred rows at a time."""

_NORMALISE_ELEMENTS = 1 << 22
"""Most logits normalised at once (16 MiB in float32, so the copy stays in cache): a few rows at a time."""

_PROBE_TEXT = "The cat sat on the mat, and the dog ran to the park to play with a red ball."
"""Text used once per load to check the fast scoring paths against plain forward passes."""


class Options(BaseModel):
    """Options of the ``hf`` provider."""

    model_config = ConfigDict(extra="forbid")

    device: str = "cpu"
    """Torch device to run on: ``cpu``, ``cuda``, ``cuda:1``, ``mps`` …"""
    dtype: Literal["auto", "float32", "bfloat16"] = "float32"
    """Weight dtype. ``auto`` keeps the checkpoint's dtype; ``float32`` is the safe choice on CPU."""
    batch_size: int = Field(default=16, ge=1)
    """Rows per log-likelihood forward pass. Requests that share a context (the choices of a question) share a row."""
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


@dataclass
class _Member:
    """A distinct (context, continuation) pair to score, and the requests that asked for it."""

    targets: list[int]
    """The continuation tokens."""
    tokens_in: int
    """Input tokens of the pair scored on its own (context + all but the last target)."""
    indices: list[int]
    """Positions of the requests asking for this pair."""


@dataclass(frozen=True)
class _Row:
    """One row of a forward pass: a context and the continuations of its members."""

    tokens: list[int]
    positions: list[int] | None
    """Position ids of a packed row; ``None`` for a plain causal row (one member, 2D mask)."""
    segments: list[int] | None
    """Packed rows: 0 for the context, ``i`` for the extra tokens of member ``i`` (from 1)."""
    members: list[_Member]
    columns: list[int]
    """The column predicting each target, member by member."""


def _plain_row(context: list[int], member: _Member) -> _Row:
    """``context + targets[:-1]`` as a causal row; the last context token predicts the first target."""
    tokens = context + member.targets[:-1]
    n = len(member.targets)
    return _Row(tokens, None, None, [member], list(range(len(tokens) - n, len(tokens))))


def _packed_row(context: list[int], members: Sequence[_Member]) -> _Row:
    """The context once, then each member's ``targets[:-1]``, each positioned right after the context."""
    tokens, positions, segments = list(context), list(range(len(context))), [0] * len(context)
    columns: list[int] = []
    for number, member in enumerate(members, start=1):
        extra = member.targets[:-1]
        columns.append(len(context) - 1)
        columns.extend(range(len(tokens), len(tokens) + len(extra)))
        tokens.extend(extra)
        positions.extend(range(len(context), len(context) + len(extra)))
        segments.extend([number] * len(extra))
    return _Row(tokens, positions, segments, list(members), columns)


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


def _target_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> tuple[list[float], list[bool]]:
    """Log-softmax of each row at its target, and whether the target is the row's argmax.

    The normaliser is computed in float32 from the row maximum, ``max + log(sum(exp(row -
    max)))``: no full log-softmax output is written, and the maximum's index doubles as the
    argmax (the first maximal index, as :func:`torch.argmax`). Rows go a few at a time
    (:data:`_NORMALISE_ELEMENTS`), so the float32 copy stays in cache.
    """
    import torch

    step = max(1, _NORMALISE_ELEMENTS // max(1, logits.shape[-1]))
    values: list[float] = []
    greedy: list[bool] = []
    for start in range(0, logits.shape[0], step):
        part, wanted = logits[start : start + step], targets[start : start + step]
        peak, best = part.max(dim=-1)
        peak32 = peak.to(torch.float32)
        shifted = part.to(torch.float32, copy=True)
        shifted.sub_(peak32.unsqueeze(1)).exp_()
        normaliser = peak32 + shifted.sum(dim=-1).log()
        picked = part.gather(1, wanted.unsqueeze(1)).squeeze(1).to(torch.float32)
        values.extend((picked - normaliser).tolist())
        greedy.extend((best == wanted).tolist())
    return values, greedy


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
        """The model without its output head, when :meth:`_head` on its hidden states matches the model."""
        self._pack_limit: int | None = None
        """Longest request (input tokens) that may be packed with others; ``None``: never pack."""
        self._mask_kind: Literal["bool", "additive"] = "bool"
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
        prepared: list[_Scored] = []
        for index, request in enumerate(requests):
            try:
                prepared.append(self._prepare(index, request, window))
            except Exception as exc:  # one bad request must not sink the batch
                results[index] = Loglikelihood(failure=Failure(kind="backend", message=_one_line(exc)))
                if progress:
                    progress(1)
        rows = self._plan(prepared, window)
        # packed rows and plain rows run as separate batches (4D and 2D attention masks), longest first
        rows.sort(key=lambda row: (row.positions is None, -len(row.tokens)))
        size = self._options.batch_size
        batches: list[list[_Row]] = []
        for row in rows:
            last = batches[-1] if batches else None
            if last is not None and len(last) < size and (last[0].positions is None) == (row.positions is None):
                last.append(row)
            else:
                batches.append([row])
        for batch in batches:
            members = [member for row in batch for member in row.members]
            n_requests = sum(len(member.indices) for member in members)
            began = time.perf_counter()
            try:
                scores = self._score_rows(batch)
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

    def _plan(self, prepared: Sequence[_Scored], window: int) -> list[_Row]:
        """Rows to score: requests sharing a context packed together, identical requests once."""
        members: dict[tuple[tuple[int, ...], tuple[int, ...]], _Member] = {}
        for item in prepared:
            n_context = len(item.tokens) - len(item.targets) + 1
            key = (tuple(item.tokens[:n_context]), tuple(item.targets))
            if key in members:
                members[key].indices.append(item.index)
            else:
                members[key] = _Member(targets=list(item.targets), tokens_in=len(item.tokens), indices=[item.index])
        rows: list[_Row] = []
        groups: dict[tuple[int, ...], list[_Member]] = {}
        for (context, _), member in members.items():
            if self._pack_limit is not None and member.tokens_in <= self._pack_limit:
                groups.setdefault(context, []).append(member)
            else:
                rows.append(_plain_row(list(context), member))
        for context, group in groups.items():
            chunk: list[_Member] = []
            length = len(context)
            for member in group:
                extra = len(member.targets) - 1
                if chunk and length + extra > window:
                    rows.append(_packed_row(list(context), chunk))
                    chunk, length = [], len(context)
                chunk.append(member)
                length += extra
            rows.append(_packed_row(list(context), chunk))
        return rows

    def _score_rows(self, batch: Sequence[_Row]) -> list[Loglikelihood]:
        """One forward pass over a batch of rows; one result per member, in row order."""
        import torch

        picks = [(row_index, column) for row_index, row in enumerate(batch) for column in row.columns]
        targets = [target for row in batch for member in row.members for target in member.targets]
        values: list[float] = []
        greedy: list[bool] = []
        with torch.inference_mode():
            done = 0
            for logits in self._logit_chunks(batch, picks):
                wanted = torch.tensor(targets[done : done + len(logits)], dtype=torch.long, device=logits.device)
                done += len(logits)
                logprobs, best = _target_logprobs(logits, wanted)
                values.extend(logprobs)
                greedy.extend(best)
        out: list[Loglikelihood] = []
        cursor = 0
        for row in batch:
            for member in row.members:
                n = len(member.targets)
                out.append(
                    Loglikelihood(
                        logprob=math.fsum(values[cursor : cursor + n]),
                        is_greedy=all(greedy[cursor : cursor + n]),
                        n_tokens=n,
                        tokens_in=member.tokens_in,
                    )
                )
                cursor += n
        return out

    def _inputs(self, batch: Sequence[_Row]) -> dict[str, Any]:
        """Model inputs for a batch of rows: right-padded ids and a 2D mask, or a 4D mask and position ids."""
        import torch

        assert self._device is not None
        pad = self._tokenizer.pad_token_id
        if pad is None:
            pad = self._tokenizer.eos_token_id if self._tokenizer.eos_token_id is not None else 0
        width = max(len(row.tokens) for row in batch)
        input_ids = torch.full((len(batch), width), int(pad), dtype=torch.long)
        for index, row in enumerate(batch):
            input_ids[index, : len(row.tokens)] = torch.tensor(row.tokens, dtype=torch.long)
        inputs: dict[str, Any] = {"input_ids": input_ids.to(self._device)}
        if batch[0].positions is None:
            attention = torch.zeros((len(batch), width), dtype=torch.long)
            for index, row in enumerate(batch):
                attention[index, : len(row.tokens)] = 1
            inputs["attention_mask"] = attention.to(self._device)
            return inputs
        positions = torch.zeros((len(batch), width), dtype=torch.long)
        segments = torch.full((len(batch), width), -1, dtype=torch.long)
        for index, row in enumerate(batch):
            assert row.positions is not None and row.segments is not None
            positions[index, : len(row.tokens)] = torch.tensor(row.positions, dtype=torch.long)
            segments[index, : len(row.tokens)] = torch.tensor(row.segments, dtype=torch.long)
        inputs["position_ids"] = positions.to(self._device)
        inputs["attention_mask"] = self._packed_mask(segments).to(self._device)
        return inputs

    def _packed_mask(self, segments: torch.Tensor) -> torch.Tensor:
        """The 4D mask of packed rows: a key is visible when it is not later and in the context or the same segment."""
        import torch

        width = segments.shape[1]
        query, key = segments[:, :, None], segments[:, None, :]
        causal = torch.ones((width, width), dtype=torch.bool).tril()
        visible = causal & (key >= 0) & ((key == 0) | (key == query))
        visible |= torch.eye(width, dtype=torch.bool)  # padding attends to itself: no empty softmax rows
        visible = visible[:, None, :, :]
        if self._mask_kind == "bool":
            return visible
        dtype = self._model.dtype
        return torch.zeros(visible.shape, dtype=dtype).masked_fill(~visible, torch.finfo(dtype).min)

    def _logits_at(self, batch: Sequence[_Row], picks: Sequence[tuple[int, int]]) -> torch.Tensor:
        """Logits (model dtype) at the ``(row, column)`` positions of a batch, one forward pass."""
        import torch

        return torch.cat(list(self._logit_chunks(batch, picks)))

    def _logit_chunks(self, batch: Sequence[_Row], picks: Sequence[tuple[int, int]]) -> Iterator[torch.Tensor]:
        """Logits (model dtype) at the ``(row, column)`` positions of a batch, in order, a few hundred rows at a time.

        With :attr:`_base`, the base model returns hidden states and only the picked ones
        go through the output head; otherwise the whole model runs, computing logits at
        the picked columns of every row (``logits_to_keep``) or at all of them.
        """
        import torch

        assert self._device is not None
        inputs = self._inputs(batch)
        step = max(1, _LOGIT_ELEMENTS // self._vocab_size())
        if self._base is not None:
            hidden = self._base(**inputs, use_cache=False).last_hidden_state
            flat = torch.tensor([row * hidden.shape[1] + column for row, column in picks], device=hidden.device)
            states = hidden.reshape(-1, hidden.shape[-1]).index_select(0, flat)
            for start in range(0, len(picks), step):
                yield self._head(states[start : start + step])
            return
        kwargs: dict[str, Any] = {}
        columns = sorted({column for _, column in picks})
        where = {column: index for index, column in enumerate(columns)}
        if self._keep_logits:
            kwargs["logits_to_keep"] = torch.tensor(columns, dtype=torch.long, device=self._device)
        else:
            where = {column: column for column in columns}
        full = self._model(**inputs, use_cache=False, **kwargs).logits
        rows = torch.tensor([row for row, _ in picks], dtype=torch.long, device=full.device)
        cols = torch.tensor([where[column] for _, column in picks], dtype=torch.long, device=full.device)
        for start in range(0, len(picks), step):
            yield full[rows[start : start + step], cols[start : start + step]]

    def _vocab_size(self) -> int:
        head = self._model.get_output_embeddings()
        size = getattr(head, "out_features", None) or getattr(self._model.config, "vocab_size", None)
        return int(size) if isinstance(size, int) and size > 0 else 1

    def _head(self, hidden: torch.Tensor) -> torch.Tensor:
        """The model's output head on hidden states, with the logit post-processing the model applies."""
        import torch

        logits: torch.Tensor = self._model.get_output_embeddings()(hidden)
        config = self._model.config
        text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
        cap = getattr(text_config, "final_logit_softcapping", None)
        if isinstance(cap, int | float) and cap:
            logits = torch.tanh(logits / cap) * cap
        scale = getattr(self._model, "logit_scale", None)  # Cohere multiplies
        if isinstance(scale, int | float) and scale != 1:
            logits = logits * scale
        scaling = getattr(text_config, "logits_scaling", None)  # Granite divides
        if isinstance(scaling, int | float) and scaling not in (0, 1):
            logits = logits / scaling
        return logits

    def _choose_paths(self) -> None:
        """Decide once per load whether the fast paths reproduce the model's own forward pass.

        Two checks on a short probe text against plain forward passes: the base model's
        hidden states through :meth:`_head` (else the whole model runs, with
        ``logits_to_keep`` where supported), and a packed row of two continuations after
        a shared context (else each request is scored in its own row). Packing also needs
        ``sdpa`` or ``eager`` attention, and is limited to requests that fit in the
        model's sliding or chunked attention window, where full attention is the same.
        """
        import torch

        model = self._model
        self._base, self._pack_limit, self._mask_kind = None, None, "bool"
        config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        limit = self._context_window()
        for attr in ("sliding_window", "attention_chunk_size"):
            value = getattr(config, attr, None)
            if isinstance(value, int) and value > 0:
                limit = min(limit, value)
        tokens = (self._prefix or self._empty_context) + self._encode(_PROBE_TEXT)
        while len(tokens) < 12:
            tokens = tokens + tokens
        tokens = tokens[: min(12, limit)]  # within the window, where the plain forward pass attends to all
        half = len(tokens) // 2
        context, first = tokens[:half], tokens[half:]
        second = list(reversed(first))
        tolerance = 1e-4 if model.dtype in (torch.float32, torch.float64) else 5e-2

        def close(got: torch.Tensor, want: torch.Tensor) -> bool:
            scale = 1.0 + float(want.abs().max())
            return bool(torch.isfinite(got).all()) and float((got.float() - want).abs().max()) <= tolerance * scale

        def reference(ids: list[int]) -> torch.Tensor:
            tensor = torch.tensor([ids], dtype=torch.long, device=self._device)
            logits: torch.Tensor = model(input_ids=tensor, use_cache=False).logits[0].float()
            return logits

        with torch.inference_mode():
            want_first, want_second = reference(context + first), reference(context + second)
            base = getattr(model, "base_model", None)
            if base is not None and base is not model and model.get_output_embeddings() is not None:
                self._base = base
                whole = _Row(tokens=context + first, positions=None, segments=None, members=[], columns=[])
                try:
                    ok = close(self._logits_at([whole], [(0, c) for c in range(len(whole.tokens))]), want_first)
                except Exception:
                    ok = False
                if not ok:
                    self._base = None
            implementation = getattr(model.config, "_attn_implementation", None)
            if implementation not in ("sdpa", "eager") or len(context) < 1 or len(first) < 2:
                return
            self._mask_kind = "bool" if implementation == "sdpa" else "additive"
            members = [_Member(first, len(tokens) - 1, []), _Member(second, len(tokens) - 1, [])]
            packed = _packed_row(context, members)
            try:
                got = self._logits_at([packed], [(0, column) for column in packed.columns])
            except Exception:
                return
            n = len(context)
            if close(got, torch.cat([want_first[n - 1 : -1], want_second[n - 1 : -1]])):
                self._pack_limit = limit

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
