"""Log-likelihood scoring for the ``llamacpp`` provider: planning llama.cpp calls and decoding them exactly.

:func:`plan` packs questions (a context and its continuations) into calls; :func:`score_call`
scores one call in two decodes over separate KV-cache streams; :func:`decode_rows` and
:func:`continuation_score` score a question too long for the streams as one sequence. Why
these layouts give the numbers of a one-sequence pass is in the provider's module notes
(:mod:`senseforge.llm.providers.llamacpp`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from senseforge.errors import BackendError
from senseforge.llm.base import Failure

if TYPE_CHECKING:
    from llama_cpp import Llama

Tokens = tuple[int, ...]
Question = tuple[Tokens, list[Tokens]]
"""A context and the continuations scored after it."""


def normalizer(row: np.ndarray[Any, Any]) -> tuple[float, int]:
    """The log of the softmax's denominator over logits ``row`` (in float64), and the row's argmax.

    One float64 buffer, worked in place: the same operations, in the same order, as a plain
    ``log(exp(row - max).sum())`` (bit-identical), without its three temporaries of the
    vocabulary's size.
    """
    top = int(row.argmax())
    peak = float(row[top])
    work = row.astype(np.float64)
    np.subtract(work, peak, out=work)
    np.exp(work, out=work)
    return peak + float(np.log(work.sum())), top


def log_softmax_at(row: np.ndarray[Any, Any], token: int) -> tuple[float, bool]:
    """Log-probability of ``token`` under logits ``row``, and whether it is the argmax."""
    log_norm, top = normalizer(row)
    return float(row[token]) - log_norm, top == token


STREAMS = 32
"""Sequences the scoring instance holds at once, each in a KV-cache stream of its own: the
contexts of a call's questions, then one per continuation (its context copied in)."""

MAX_STREAM_CTX = 1024
"""Longest context + continuation scored through the streams; longer ones go one at a time."""


def plan(
    groups: dict[Tokens, list[Tokens]], *, budget: int, streams: int, stream_ctx: int
) -> tuple[list[list[Question]], list[Question]]:
    """Pack questions (a context and its continuations) into llama.cpp calls.

    A call holds at most ``streams`` sequences and ``budget`` tokens per decode, and every
    sequence fits ``stream_ctx``. Questions go in order of their context sequence's length (the
    context and its lead continuation, :func:`_lead`: less padding);
    which questions share a call never changes a score. A question whose continuations do
    not fit one call is split over several; one that does not fit at all is returned apart.
    """
    calls: list[list[tuple[tuple[int, ...], list[tuple[int, ...]]]]] = []
    alone: list[tuple[tuple[int, ...], list[tuple[int, ...]]]] = []
    current: list[tuple[tuple[int, ...], list[tuple[int, ...]]]] = []
    for prefix in sorted(groups, key=lambda p: (len(p) + len((_lead(groups[p]) or (0,))[:-1]), p)):
        conts = sorted(groups[prefix], key=lambda c: (len(c), c))
        if not _fits([(prefix, conts[:1])], budget, streams, stream_ctx):
            alone.append((prefix, conts))
            continue
        chunk: list[tuple[int, ...]] = []
        for cont in conts:
            if _fits([(prefix, [*chunk, cont])], budget, streams, stream_ctx):
                chunk.append(cont)
                continue
            if not _fits([(prefix, [cont])], budget, streams, stream_ctx):
                alone.append((prefix, [cont]))
                continue
            current = _add(calls, current, (prefix, chunk), budget, streams, stream_ctx)
            chunk = [cont]
        if chunk:
            current = _add(calls, current, (prefix, chunk), budget, streams, stream_ctx)
    if current:
        calls.append(current)
    return calls, alone


def _add(
    calls: list[list[Question]], current: list[Question], question: Question, budget: int, streams: int, stream_ctx: int
) -> list[Question]:
    if _fits([*current, question], budget, streams, stream_ctx):
        return [*current, question]
    if current:
        calls.append(current)
    return [question]


def _lead(conts: Sequence[Tokens]) -> Tokens | None:
    """The continuation decoded in its context's own sequence: the longest of two tokens or more."""
    decoded = [c for c in conts if len(c) > 1]
    return max(decoded, key=lambda c: (len(c), c)) if decoded else None


def _widths(call: Sequence[Question]) -> tuple[int, int]:
    """Tokens per context sequence and per continuation sequence in a call (pads included).

    A context's sequence also holds its lead continuation (:func:`_lead`); every other
    continuation of two tokens or more gets a sequence of its own, the context copied in (a
    continuation's first token is predicted by its context's last row, so one-token
    continuations need none). A continuation's last token predicts nothing, so it is never
    decoded. A context's sequence gets at least :data:`MIN_ROWS` tokens; a continuation's
    sequence its tokens but the last, at least :data:`MIN_QUERIES`, and more when the decode
    of all of them would hold fewer than :data:`MIN_ROWS` tokens (llama.cpp's kernels round
    differently for so short a batch).
    The continuation width is 0 when no continuation needs a sequence of its own.
    """
    leads = [_lead(conts) for _, conts in call]
    context = max(
        max(len(p) + len(lead[:-1] if lead else ()) for (p, _), lead in zip(call, leads, strict=True)), MIN_ROWS
    )
    others = [
        len(c) - 1 for (_, conts), lead in zip(call, leads, strict=True) for c in conts if len(c) > 1 and c != lead
    ]
    continuation = max(max(others), MIN_QUERIES, -(-MIN_ROWS // len(others))) if others else 0
    return context, continuation


def _fits(call: Sequence[Question], budget: int, streams: int, stream_ctx: int) -> bool:
    context, continuation = _widths(call)
    leads = [_lead(conts) for _, conts in call]
    n_others = sum(len(c) > 1 and c != lead for (_, conts), lead in zip(call, leads, strict=True) for c in conts)
    return (
        len(call) + n_others <= streams
        and len(call) * context <= budget
        and n_others * continuation <= budget
        and context <= stream_ctx
        and max(len(p) for p, _ in call) + continuation <= stream_ctx
    )


def score_call(llm: Llama, call: Sequence[Question]) -> dict[tuple[Tokens, Tokens], tuple[float, bool] | Failure]:
    """Score a planned call in two decodes: every context with its lead continuation, then the other continuations.

    Each question's context (and lead continuation) is one sequence, in a KV-cache stream of
    its own; each other continuation gets a stream holding a copy of its context. Every
    sequence of a decode gets the same number of tokens (pads after the real ones, kept out
    of the real tokens' numbers by causal attention), as llama.cpp requires of separate
    streams (see :func:`_widths` for how many).
    """
    import llama_cpp.llama_cpp as lib

    memory = lib.llama_get_memory(llm._ctx.ctx)
    lib.llama_memory_clear(memory, True)
    context_width, continuation_width = _widths(call)
    leads = [_lead(conts) for _, conts in call]
    entries: list[tuple[int, int, int, bool]] = []
    for seq, ((prefix, _), lead) in enumerate(zip(call, leads, strict=True)):
        tokens = [*prefix, *(lead[:-1] if lead else ())]  # a continuation's last token predicts nothing
        wanted_from, wanted_to = len(prefix) - 1, len(tokens) - 1
        entries += [(token, pos, seq, wanted_from <= pos <= wanted_to) for pos, token in enumerate(tokens)]
        entries += [(PAD_TOKEN, pos, seq, False) for pos in range(len(tokens), context_width)]
    rows = decode_entries(llm, entries)
    placed: list[tuple[int, Tokens, Tokens]] = []  # (sequence holding the continuation's rows, prefix, continuation)
    stream = len(call)
    for seq, ((prefix, conts), lead) in enumerate(zip(call, leads, strict=True)):
        # the lead's rows are in hand: drop it and the pad, so that every copy holds the bare context
        lib.llama_memory_seq_rm(memory, seq, len(prefix), -1)
        for cont in conts:
            if len(cont) > 1 and cont != lead:
                lib.llama_memory_seq_cp(memory, seq, stream, -1, -1)
                placed.append((stream, prefix, cont))
                stream += 1
            else:
                placed.append((seq, prefix, cont))
    if continuation_width:
        entries = []
        for where, prefix, cont in placed:
            if where < len(call):
                continue
            n = len(prefix)
            entries += [(token, n + k, where, True) for k, token in enumerate(cont[:-1])]
            entries += [(PAD_TOKEN, n + k, where, False) for k in range(len(cont) - 1, continuation_width)]
        rows.update(decode_entries(llm, entries))
    firsts = {prefix: seq for seq, (prefix, _) in enumerate(call)}
    norms: dict[tuple[int, int], tuple[float, int]] = {}  # a context's last row serves all its continuations

    def at(key: tuple[int, int], token: int) -> tuple[float, bool]:
        if key not in norms:
            norms[key] = normalizer(rows[key])
        log_norm, top = norms[key]
        return float(rows[key][token]) - log_norm, top == token

    out: dict[tuple[Tokens, Tokens], tuple[float, bool] | Failure] = {}
    for where, prefix, cont in placed:
        n = len(prefix)
        logprob, greedy = at((firsts[prefix], n - 1), cont[0])
        for k in range(1, len(cont)):
            value, top = at((where, n + k - 1), cont[k])
            logprob += value
            greedy = greedy and top
        out[(prefix, cont)] = (logprob, greedy)
    return out


def _output_rows(wanted: Sequence[bool]) -> set[int]:
    """The rows to ask logits for: the wanted ones, topped up to :data:`MIN_ROWS` from the last row back.

    The output head, too, rounds differently when it projects fewer rows than that, so a
    decode never asks for fewer (the extra rows are computed and ignored).
    """
    rows = {i for i, flag in enumerate(wanted) if flag}
    for i in range(len(wanted) - 1, -1, -1):
        if len(rows) >= min(MIN_ROWS, len(wanted)):
            break
        rows.add(i)
    return rows


def decode_entries(llm: Llama, entries: Sequence[tuple[int, int, int, bool]]) -> dict[tuple[int, int], Any]:
    """One llama.cpp decode of ``(token, position, sequence, wanted)`` entries; the logits of the wanted ones."""
    import llama_cpp.llama_cpp as lib

    if len(entries) > llm.n_batch:
        raise BackendError(f"internal: a decode of {len(entries)} tokens exceeds the batch of {llm.n_batch}")
    batch = llm._batch.batch
    outputs = _output_rows([wanted for *_, wanted in entries])
    for i, (token, pos, seq, _) in enumerate(entries):
        batch.token[i] = token
        batch.pos[i] = pos
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = seq
        batch.logits[i] = i in outputs
    batch.n_tokens = len(entries)
    code = lib.llama_decode(llm._ctx.ctx, batch)
    if code != 0:
        raise BackendError(f"llama.cpp decode failed (code {code})")
    n_vocab = llm.n_vocab()
    rows: dict[tuple[int, int], Any] = {}
    for i, (_, pos, seq, wanted) in enumerate(entries):
        if wanted:
            pointer = lib.llama_get_logits_ith(llm._ctx.ctx, i)
            rows[(seq, pos)] = np.ctypeslib.as_array(pointer, shape=(n_vocab,)).copy()
    return rows


def continuation_score(
    llm: Llama, prefix: Sequence[int], continuation: Sequence[int], first_row: Any
) -> tuple[float, bool]:
    """Summed log-probability of ``continuation`` after the decoded ``prefix`` (sequence 0); whether greedy."""
    n = len(prefix)
    rows = {n - 1: first_row}
    if len(continuation) > 1:
        # rows whose logits predict a later continuation token: only these are projected
        rows.update(decode_rows(llm, continuation, n, range(n, n + len(continuation) - 1)))
        clear(llm, keep=n)
    logprob, greedy = 0.0, True
    for offset, token in enumerate(continuation):
        value, top = log_softmax_at(rows[n - 1 + offset], token)
        logprob += value
        greedy = greedy and top
    return logprob, greedy


MIN_ROWS = 8
"""Fewest tokens in one decode call: shorter ones are padded after their last token."""

MIN_QUERIES = 2
"""Fewest tokens in a continuation's own stream: one query alone takes another attention kernel, which rounds
differently (measured: 9 of 250 CommonsenseQA scores moved, by up to 0.2 nats); two and more are exact."""

PAD_TOKEN = 0
"""What pads a short decode (never seen by the tokens before it, and removed after)."""


def clear(llm: Llama, keep: int = 0) -> None:
    """Drop the KV cache from position ``keep`` on."""
    llm._ctx.kv_cache_seq_rm(0, keep, -1)
    llm.n_tokens = keep


def decode_rows(llm: Llama, tokens: Sequence[int], n_past: int, wanted: Iterable[int]) -> dict[int, Any]:
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
        outputs = _output_rows([i in flagged for i in range(len(chunk))])
        for i in range(len(chunk)):
            llm._batch.batch.logits[i] = i in outputs
        llm._ctx.decode(llm._batch)
        for i in flagged:
            pointer = lib.llama_get_logits_ith(llm._ctx.ctx, i)
            rows[first + i] = np.ctypeslib.as_array(pointer, shape=(n_vocab,)).copy()
        if real < len(chunk):
            clear(llm, keep=first + real)
    llm.n_tokens = n_past + len(tokens)
    return rows
