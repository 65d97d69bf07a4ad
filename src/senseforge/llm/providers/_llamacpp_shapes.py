"""llama.cpp grammars from reply shapes, for the in-process ``llamacpp`` provider.

A request's :class:`~senseforge.llm.base.ReplyShape` becomes a GBNF grammar that llama.cpp's sampler applies to
every generated token, on completion prompts (base models: the prompt still ends on its cue, the grammar constrains
what follows) and chat prompts alike:

* a JSON schema goes through llama-cpp-python's own converter (``LlamaGrammar.from_json_schema``, the one its
  server uses for ``{"type": "json_object", "schema": …}``);
* a set of choices becomes an alternation of their literals (:func:`senseforge.llm.schemas.choices_gbnf`), after
  one optional space on a completion prompt, as a base model writes after ``Answer:``.

Grammars are built once per shape and kept (:func:`shape_grammar`). A schema the converter cannot take gives no
grammar: the request is decoded as without a shape (a ``json_mode`` request still under the bare JSON-object
grammar), once said in the log, and its completion records ``constrained=False``.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import math
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from senseforge.llm.base import ReplyShape
from senseforge.llm.schemas import choices_gbnf

if TYPE_CHECKING:
    from llama_cpp import Llama
    from llama_cpp.llama_grammar import LlamaGrammar

__all__ = ["JSON_OBJECT_SCHEMA", "MIN_P", "GrammarMask", "grammar_mask", "json_object_grammar", "shape_grammar"]

log = logging.getLogger(__name__)

JSON_OBJECT_SCHEMA = '{"type": "object"}'
"""What a ``json_mode`` request without a shape is held to: some JSON object."""

MIN_P = 0.05
"""The ``min_p`` every generation samples with (llama-cpp-python's default, passed explicitly: the grammar mask's
band is read from it)."""


def shape_grammar(shape: ReplyShape, *, completion: bool) -> LlamaGrammar | None:
    """The grammar that holds a reply to ``shape`` (``completion``: the prompt is a plain text a base model
    continues), or ``None`` where llama-cpp-python cannot convert its schema."""
    return _grammar(shape, completion and shape.choices is not None)


@functools.lru_cache(maxsize=128)
def _grammar(shape: ReplyShape, leading_space: bool) -> LlamaGrammar | None:
    from llama_cpp.llama_grammar import LlamaGrammar, json_schema_to_gbnf

    if shape.choices is not None:
        return LlamaGrammar.from_string(choices_gbnf(shape.choices, leading_space=leading_space), verbose=False)
    assert shape.json_schema is not None
    try:
        text = json_schema_to_gbnf(shape.json_schema)
    except Exception as exc:  # the converter raises plain exceptions on schemas it does not support
        log.warning("llamacpp: no grammar for reply shape %s (%s); its replies are not constrained", shape.name, exc)
        return None
    return LlamaGrammar.from_string(text, verbose=False)


@functools.cache
def json_object_grammar() -> LlamaGrammar:
    """The grammar of a ``json_mode`` request without a shape: some JSON object (as before shapes existed)."""
    from llama_cpp.llama_grammar import LlamaGrammar

    return LlamaGrammar.from_json_schema(JSON_OBJECT_SCHEMA, verbose=False)


@functools.cache
def _token_data_dtype() -> Any:
    import numpy as np

    return np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True)


class GrammarMask:
    """A logits processor that holds decoding to a grammar exactly as llama.cpp's grammar sampler does, checking
    only the tokens the rest of the sampler chain can still pick.

    llama.cpp's grammar sampler checks every token of the vocabulary at every step (Gemma 3's 262,144 tokens: tens
    of milliseconds a token, several times the model's own step). The samplers after it keep far fewer: greedy
    decoding keeps the highest allowed logit, and ``min_p`` (without ``top_p``) keeps the allowed logits within
    ``ln(min_p)`` of the highest. So this processor runs llama.cpp's own grammar check (the same sampler, on a
    smaller candidate array; its verdict on a token does not depend on the other candidates) on the best tokens
    first until it has found the highest allowed one, then on every token within the band the chain keeps, and
    sets every other logit to minus infinity. What the chain then sees of the kept tokens is what it saw behind
    the grammar sampler, so it picks the same token with the same random draw. With ``top_p`` below 1 the
    chain's softmax sums over every allowed token, so there every token is checked, as llama.cpp does.

    The processor follows the sequence through the ids llama-cpp-python hands it (prompt first), accepting into
    its grammar each token sampled since its last call. One instance serves one completion.

    Args:
        vocab: the model's ``llama_vocab`` pointer.
        grammar: the GBNF text and its root rule.
        band: how far below the highest allowed logit a token may still be picked; ``None`` to check every token.
    """

    FIRST_CHUNK = 256
    """How many of the best tokens are checked first."""

    def __init__(self, vocab: Any, grammar: LlamaGrammar, band: float | None) -> None:
        import llama_cpp

        self._llama_cpp = llama_cpp
        self._sampler = llama_cpp.llama_sampler_init_grammar(
            vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8")
        )
        if not self._sampler:
            raise ValueError("llama.cpp could not parse the grammar")
        self._band = band
        self._seen: int | None = None

    def close(self) -> None:
        """Free the grammar (llama.cpp's memory)."""
        if self._sampler:
            self._llama_cpp.llama_sampler_free(self._sampler)
            self._sampler = None

    def __del__(self) -> None:
        self.close()

    def _follow(self, input_ids: Any) -> None:
        if self._seen is None:
            self._seen = len(input_ids)  # the prompt: what the grammar constrains starts after it
            return
        for token in input_ids[self._seen :]:
            self._llama_cpp.llama_sampler_accept(self._sampler, int(token))
        self._seen = len(input_ids)

    def _allowed(self, ids: Any, logits: Any) -> Any:
        """Which of ``ids`` the grammar allows now (llama.cpp's own check on just these candidates)."""
        import numpy as np

        data = np.empty(len(ids), dtype=_token_data_dtype())
        data["id"] = ids
        data["logit"] = logits
        data["p"] = 0.0
        array = self._llama_cpp.llama_token_data_array(
            data=data.ctypes.data_as(self._llama_cpp.llama_token_data_p), size=len(ids), selected=-1, sorted=False
        )
        self._llama_cpp.llama_sampler_apply(self._sampler, ctypes.byref(array))
        return np.isfinite(data["logit"])

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import numpy as np

        self._follow(input_ids)
        logits = np.ascontiguousarray(scores, dtype=np.float32)
        n = len(logits)
        if self._band is None:
            keep = self._allowed(np.arange(n, dtype=np.intc), logits)
            return np.where(keep & np.isfinite(logits), logits, np.float32(-np.inf))
        best = -np.inf
        checked = np.zeros(n, dtype=bool)
        allowed = np.zeros(n, dtype=bool)
        chunk = self.FIRST_CHUNK
        while not np.isfinite(best):  # the highest allowed logit: check the best tokens until one passes
            if chunk >= n:
                ids = np.nonzero(~checked)[0]
            else:
                ids = np.argpartition(-logits, chunk - 1)[:chunk]
                ids = ids[~checked[ids]]
            if len(ids):
                ok = self._allowed(ids.astype(np.intc), logits[ids])
                checked[ids] = True
                allowed[ids[ok]] = True
                passed = logits[ids[ok]]
                if len(passed):
                    best = max(best, float(passed.max()))
            if chunk >= n:
                break
            chunk *= 8
        if not np.isfinite(best):
            return np.full(n, -np.inf, dtype=np.float32)
        # every token the chain could keep: within the band below the best allowed (ties at the top for greedy)
        near = np.nonzero((logits >= np.float32(best - self._band)) & ~checked)[0]
        if len(near):
            ok = self._allowed(near.astype(np.intc), logits[near])
            allowed[near[ok]] = True
        band_floor = np.float32(best - self._band)
        keep = allowed & (logits >= band_floor)
        return np.where(keep, logits, np.float32(-np.inf))


@contextlib.contextmanager
def grammar_mask(llm: Llama, grammar: LlamaGrammar | None, params: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The keyword arguments that hold one completion of ``llm`` to ``grammar`` under sampling ``params``: a
    :class:`GrammarMask` where the chain keeps a band of logits (greedy, or ``min_p`` without ``top_p``), else
    llama.cpp's own grammar sampler; nothing without a grammar."""
    if grammar is None:
        yield {}
        return
    if params["temperature"] == 0:
        band: float | None = 0.0
    elif params.get("top_p", 1.0) >= 1.0 and params.get("min_p", 0.0) > 0.0:
        band = -math.log(params["min_p"]) + 0.5  # a margin over the chain's float32 threshold
    else:
        yield {"grammar": grammar}
        return
    from llama_cpp import LogitsProcessorList

    mask = GrammarMask(llm._model.vocab, grammar, band)
    try:
        yield {"logits_processor": LogitsProcessorList([mask])}
    finally:
        mask.close()
