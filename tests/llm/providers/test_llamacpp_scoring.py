"""The llama.cpp scorer's batch layout and its log-softmax, without a model (the numbers are in test_llamacpp.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from senseforge.llm.providers._llamacpp_scoring import MIN_QUERIES, MIN_ROWS, _widths, log_softmax_at, normalizer, plan


def _plain_log_softmax(row: np.ndarray[Any, Any], token: int) -> float:
    row64 = row.astype(np.float64)
    peak = row64.max()
    return float(row64[token] - (peak + np.log(np.exp(row64 - peak).sum())))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_in_place_log_softmax_is_bit_identical_to_the_plain_formula(seed: int) -> None:
    row = (np.random.default_rng(seed).standard_normal(262_144) * 6).astype(np.float32)
    for token in (0, 7, int(row.argmax()), 262_143):
        value, greedy = log_softmax_at(row, token)
        assert value == _plain_log_softmax(row, token)
        assert greedy == (token == int(row.argmax()))
    log_norm, top = normalizer(row)
    assert top == int(row.argmax()) and float(row[top]) - log_norm == _plain_log_softmax(row, top)


def test_a_contexts_sequence_holds_its_lead_but_the_last_token_and_never_fewer_than_min_rows() -> None:
    context = tuple(range(10, 30))  # 20 tokens
    # the lead (longest multi-token continuation, 4 tokens) rides with its context: 20 + 3 tokens
    assert _widths([(context, [(1,), (2, 3), (4, 5, 6, 7)])])[0] == 23
    # no multi-token continuation: the context alone, every token of it
    assert _widths([(context, [(1,), (2,)])]) == (20, 0)
    assert _widths([((1, 2, 3), [(4,)])]) == (MIN_ROWS, 0)


def test_other_continuations_get_their_tokens_but_the_last_and_a_decode_at_least_min_rows() -> None:
    context = tuple(range(10, 30))
    many = [(context, [(1, 2, 3, 4), *[(k, k + 1) for k in range(100, 120, 2)]])]  # ten two-token others
    assert _widths(many)[1] == MIN_QUERIES  # a two-token choice: its first token and one pad (one query is inexact)
    one_other = [(context, [(1, 2, 3, 4), (5, 6)])]
    assert _widths(one_other)[1] == MIN_ROWS  # raised so that the decode holds MIN_ROWS tokens
    two_others = [(context, [(1, 2, 3, 4), (5, 6), (7, 8, 9)])]
    assert _widths(two_others)[1] == -(-MIN_ROWS // 2)
    long_other = [(context, [(1, 2, 3, 4, 5, 6), *[(k, k + 1, k + 2, k + 3) for k in range(100, 140, 4)]])]
    assert _widths(long_other)[1] == 3  # its tokens but the last


def test_plan_orders_questions_by_their_context_sequences_length_and_keeps_every_continuation() -> None:
    short_context_long_lead = (tuple(range(100, 110)), [(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)])  # 10 + 11
    long_context = (tuple(range(200, 215)), [(1,), (2, 3)])  # 15 + 1
    groups = dict([short_context_long_lead, long_context])
    calls, alone = plan(groups, budget=512, streams=32, stream_ctx=256)
    assert not alone and len(calls) == 1
    assert [prefix for prefix, _ in calls[0]] == [long_context[0], short_context_long_lead[0]]
    assert sorted(c for _, conts in calls[0] for c in conts) == sorted(c for conts in groups.values() for c in conts)
