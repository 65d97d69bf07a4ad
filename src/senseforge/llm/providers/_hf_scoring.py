"""Log-likelihood scoring of the ``hf`` provider (:mod:`senseforge.llm.providers.hf`).

Tokenized requests (:class:`Scored`) become rows (:class:`Row`, :func:`plan_rows`):
requests that share a context are packed into one row, the context once and then each
continuation, and identical requests are scored once. Rows go through the model a batch
at a time (:func:`batch_rows`, :meth:`Forward.score_rows`), and the output head and the
log-softmax run only at the positions that predict a continuation token.
:func:`choose_paths` decides once per load which of the fast paths reproduce the model's
own forward pass.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from senseforge.llm.base import Loglikelihood

if TYPE_CHECKING:
    import torch

_LOGIT_ELEMENTS = 1 << 26
"""Most logits the output head computes at once: big vocabularies go a few hundred rows at a time."""

_NORMALISE_ELEMENTS = 1 << 22
"""Most logits normalised at once (16 MiB in float32, so the copy stays in cache): a few rows at a time."""

PROBE_TEXT = "The cat sat on the mat, and the dog ran to the park to play with a red ball."
"""Text used once per load to check the fast scoring paths against plain forward passes."""

MaskKind = Literal["bool", "additive"]
"""How a packed row's 4D attention mask is written: booleans (``sdpa``) or additive floats (``eager``)."""


@dataclass(frozen=True)
class Scored:
    """One log-likelihood request, tokenized and cut to the context window."""

    index: int
    tokens: list[int]
    """Input tokens of the forward pass."""
    targets: list[int]
    """The continuation tokens, predicted by the last ``len(targets)`` input positions."""


@dataclass
class Member:
    """A distinct (context, continuation) pair to score, and the requests that asked for it."""

    targets: list[int]
    """The continuation tokens."""
    tokens_in: int
    """Input tokens of the pair scored on its own (context + all but the last target)."""
    indices: list[int]
    """Positions of the requests asking for this pair."""


@dataclass(frozen=True)
class Row:
    """One row of a forward pass: a context and the continuations of its members."""

    tokens: list[int]
    positions: list[int] | None
    """Position ids of a packed row; ``None`` for a plain causal row (one member, 2D mask)."""
    segments: list[int] | None
    """Packed rows: 0 for the context, ``i`` for the extra tokens of member ``i`` (from 1)."""
    members: list[Member]
    columns: list[int]
    """The column predicting each target, member by member."""


def _plain_row(context: list[int], member: Member) -> Row:
    """``context + targets[:-1]`` as a causal row; the last context token predicts the first target."""
    tokens = context + member.targets[:-1]
    n = len(member.targets)
    return Row(tokens, None, None, [member], list(range(len(tokens) - n, len(tokens))))


def _packed_row(context: list[int], members: Sequence[Member]) -> Row:
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
    return Row(tokens, positions, segments, list(members), columns)


def plan_rows(prepared: Sequence[Scored], window: int, pack_limit: int | None) -> list[Row]:
    """Rows to score: requests sharing a context packed together, identical requests once.

    Only requests of at most ``pack_limit`` input tokens are packed (none when it is
    ``None``), and a packed row holds at most ``window`` tokens.
    """
    members: dict[tuple[tuple[int, ...], tuple[int, ...]], Member] = {}
    for item in prepared:
        n_context = len(item.tokens) - len(item.targets) + 1
        key = (tuple(item.tokens[:n_context]), tuple(item.targets))
        if key in members:
            members[key].indices.append(item.index)
        else:
            members[key] = Member(targets=list(item.targets), tokens_in=len(item.tokens), indices=[item.index])
    rows: list[Row] = []
    groups: dict[tuple[int, ...], list[Member]] = {}
    for (context, _), member in members.items():
        if pack_limit is not None and member.tokens_in <= pack_limit:
            groups.setdefault(context, []).append(member)
        else:
            rows.append(_plain_row(list(context), member))
    for context, group in groups.items():
        chunk: list[Member] = []
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


def batch_rows(rows: Sequence[Row], size: int) -> list[list[Row]]:
    """Batches of at most ``size`` rows, longest first; packed and plain rows never share a batch."""
    # packed rows and plain rows run as separate batches (4D and 2D attention masks), longest first
    ordered = sorted(rows, key=lambda row: (row.positions is None, -len(row.tokens)))
    batches: list[list[Row]] = []
    for row in ordered:
        last = batches[-1] if batches else None
        if last is not None and len(last) < size and (last[0].positions is None) == (row.positions is None):
            last.append(row)
        else:
            batches.append([row])
    return batches


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


@dataclass(frozen=True)
class Forward:
    """A loaded model and the scoring paths chosen for it: what a forward pass over rows reads."""

    model: Any
    tokenizer: Any
    device: torch.device
    base: Any
    """The model without its output head, when :meth:`head` on its hidden states matches the model; else ``None``."""
    keep_logits: bool
    """Whether the model's forward takes ``logits_to_keep``."""
    mask_kind: MaskKind

    def score_rows(self, batch: Sequence[Row]) -> list[Loglikelihood]:
        """One forward pass over a batch of rows; one result per member, in row order."""
        import torch

        picks = [(row_index, column) for row_index, row in enumerate(batch) for column in row.columns]
        targets = [target for row in batch for member in row.members for target in member.targets]
        values: list[float] = []
        greedy: list[bool] = []
        with torch.inference_mode():
            done = 0
            for logits in self.logit_chunks(batch, picks):
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

    def inputs(self, batch: Sequence[Row]) -> dict[str, Any]:
        """Model inputs for a batch of rows: right-padded ids and a 2D mask, or a 4D mask and position ids."""
        import torch

        pad = self.tokenizer.pad_token_id
        if pad is None:
            pad = self.tokenizer.eos_token_id if self.tokenizer.eos_token_id is not None else 0
        width = max(len(row.tokens) for row in batch)
        input_ids = torch.full((len(batch), width), int(pad), dtype=torch.long)
        for index, row in enumerate(batch):
            input_ids[index, : len(row.tokens)] = torch.tensor(row.tokens, dtype=torch.long)
        inputs: dict[str, Any] = {"input_ids": input_ids.to(self.device)}
        if batch[0].positions is None:
            attention = torch.zeros((len(batch), width), dtype=torch.long)
            for index, row in enumerate(batch):
                attention[index, : len(row.tokens)] = 1
            inputs["attention_mask"] = attention.to(self.device)
            return inputs
        positions = torch.zeros((len(batch), width), dtype=torch.long)
        segments = torch.full((len(batch), width), -1, dtype=torch.long)
        for index, row in enumerate(batch):
            assert row.positions is not None and row.segments is not None
            positions[index, : len(row.tokens)] = torch.tensor(row.positions, dtype=torch.long)
            segments[index, : len(row.tokens)] = torch.tensor(row.segments, dtype=torch.long)
        inputs["position_ids"] = positions.to(self.device)
        inputs["attention_mask"] = self.packed_mask(segments).to(self.device)
        return inputs

    def packed_mask(self, segments: torch.Tensor) -> torch.Tensor:
        """The 4D mask of packed rows: a key is visible when it is not later and in the context or the same segment."""
        import torch

        width = segments.shape[1]
        query, key = segments[:, :, None], segments[:, None, :]
        causal = torch.ones((width, width), dtype=torch.bool).tril()
        visible = causal & (key >= 0) & ((key == 0) | (key == query))
        visible |= torch.eye(width, dtype=torch.bool)  # padding attends to itself: no empty softmax rows
        visible = visible[:, None, :, :]
        if self.mask_kind == "bool":
            return visible
        dtype = self.model.dtype
        return torch.zeros(visible.shape, dtype=dtype).masked_fill(~visible, torch.finfo(dtype).min)

    def logits_at(self, batch: Sequence[Row], picks: Sequence[tuple[int, int]]) -> torch.Tensor:
        """Logits (model dtype) at the ``(row, column)`` positions of a batch, one forward pass."""
        import torch

        return torch.cat(list(self.logit_chunks(batch, picks)))

    def logit_chunks(self, batch: Sequence[Row], picks: Sequence[tuple[int, int]]) -> Iterator[torch.Tensor]:
        """Logits (model dtype) at the ``(row, column)`` positions of a batch, in order, a few hundred rows at a time.

        With :attr:`base`, the base model returns hidden states and only the picked ones
        go through the output head; otherwise the whole model runs, computing logits at
        the picked columns of every row (``logits_to_keep``) or at all of them.
        """
        import torch

        inputs = self.inputs(batch)
        step = max(1, _LOGIT_ELEMENTS // self.vocab_size())
        if self.base is not None:
            hidden = self.base(**inputs, use_cache=False).last_hidden_state
            flat = torch.tensor([row * hidden.shape[1] + column for row, column in picks], device=hidden.device)
            states = hidden.reshape(-1, hidden.shape[-1]).index_select(0, flat)
            for start in range(0, len(picks), step):
                yield self.head(states[start : start + step])
            return
        kwargs: dict[str, Any] = {}
        columns = sorted({column for _, column in picks})
        where = {column: index for index, column in enumerate(columns)}
        if self.keep_logits:
            kwargs["logits_to_keep"] = torch.tensor(columns, dtype=torch.long, device=self.device)
        else:
            where = {column: column for column in columns}
        full = self.model(**inputs, use_cache=False, **kwargs).logits
        rows = torch.tensor([row for row, _ in picks], dtype=torch.long, device=full.device)
        cols = torch.tensor([where[column] for _, column in picks], dtype=torch.long, device=full.device)
        for start in range(0, len(picks), step):
            yield full[rows[start : start + step], cols[start : start + step]]

    def vocab_size(self) -> int:
        head = self.model.get_output_embeddings()
        size = getattr(head, "out_features", None) or getattr(self.model.config, "vocab_size", None)
        return int(size) if isinstance(size, int) and size > 0 else 1

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """The model's output head on hidden states, with the logit post-processing the model applies."""
        import torch

        logits: torch.Tensor = self.model.get_output_embeddings()(hidden)
        config = self.model.config
        text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
        cap = getattr(text_config, "final_logit_softcapping", None)
        if isinstance(cap, int | float) and cap:
            logits = torch.tanh(logits / cap) * cap
        scale = getattr(self.model, "logit_scale", None)  # Cohere multiplies
        if isinstance(scale, int | float) and scale != 1:
            logits = logits * scale
        scaling = getattr(text_config, "logits_scaling", None)  # Granite divides
        if isinstance(scaling, int | float) and scaling not in (0, 1):
            logits = logits / scaling
        return logits


def choose_paths(
    model: Any, tokenizer: Any, device: torch.device, *, keep_logits: bool, window: int, probe: list[int]
) -> tuple[Any, int | None, MaskKind]:
    """Decide once per load whether the fast paths reproduce the model's own forward pass.

    Two checks on a short probe text against plain forward passes: the base model's
    hidden states through :meth:`Forward.head` (else the whole model runs, with
    ``logits_to_keep`` where supported), and a packed row of two continuations after
    a shared context (else each request is scored in its own row). Packing also needs
    ``sdpa`` or ``eager`` attention, and is limited to requests that fit in the
    model's sliding or chunked attention window, where full attention is the same.

    Args:
        model: the loaded model.
        tokenizer: its tokenizer.
        device: the device the model is on.
        keep_logits: whether the model's forward takes ``logits_to_keep``.
        window: the context window (most tokens in one forward pass).
        probe: the probe tokens (start tokens + :data:`PROBE_TEXT`).

    Returns:
        The base model for :attr:`Forward.base` (or ``None``), the longest request that
        may be packed (``None``: never pack), and the mask kind of packed rows.
    """
    import torch

    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    limit = window
    for attr in ("sliding_window", "attention_chunk_size"):
        value = getattr(config, attr, None)
        if isinstance(value, int) and value > 0:
            limit = min(limit, value)
    tokens = probe or [0]  # a tokenizer that encodes the probe to nothing still gets a probe
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
        tensor = torch.tensor([ids], dtype=torch.long, device=device)
        logits: torch.Tensor = model(input_ids=tensor, use_cache=False).logits[0].float()
        return logits

    chosen: Any = None
    with torch.inference_mode():
        want_first, want_second = reference(context + first), reference(context + second)
        base = getattr(model, "base_model", None)
        if base is not None and base is not model and model.get_output_embeddings() is not None:
            forward = Forward(model, tokenizer, device, base, keep_logits, "bool")
            whole = Row(tokens=context + first, positions=None, segments=None, members=[], columns=[])
            try:
                ok = close(forward.logits_at([whole], [(0, c) for c in range(len(whole.tokens))]), want_first)
            except Exception:
                ok = False
            if ok:
                chosen = base
        implementation = getattr(model.config, "_attn_implementation", None)
        if implementation not in ("sdpa", "eager") or len(context) < 1 or len(first) < 2:
            return chosen, None, "bool"
        mask_kind: MaskKind = "bool" if implementation == "sdpa" else "additive"
        members = [Member(first, len(tokens) - 1, []), Member(second, len(tokens) - 1, [])]
        packed = _packed_row(context, members)
        try:
            forward = Forward(model, tokenizer, device, chosen, keep_logits, mask_kind)
            got = forward.logits_at([packed], [(0, column) for column in packed.columns])
        except Exception:
            return chosen, None, mask_kind
        n = len(context)
        if close(got, torch.cat([want_first[n - 1 : -1], want_second[n - 1 : -1]])):
            return chosen, limit, mask_kind
        return chosen, None, mask_kind
