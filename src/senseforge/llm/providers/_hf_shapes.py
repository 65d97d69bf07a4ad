"""Reply shapes for the ``hf`` provider: decoding held to a shape with ``llguidance`` where it is installed.

A request's :class:`~senseforge.llm.base.ReplyShape` becomes an ``llguidance`` grammar (a JSON schema as such, a set
of choices as a Lark alternation of their literals, after one optional space on a completion prompt; JSON written
compact), matched token by token by a transformers logits processor that masks every token the grammar does not
allow before the temperature and top-p warpers run; once the grammar is complete only the end of text is allowed.

Why ``llguidance`` (compared under this project's pins, ``constraints.txt``, transformers 5, CPU torch):
``xgrammar`` pulls ``triton`` and ``apache-tvm-ffi`` (hundreds of megabytes, for GPUs); ``outlines`` brings
``outlines-core`` and its own model wrappers; ``lm-format-enforcer`` (with ``interegular``) is pure Python, its
token-prefix trees slow on large vocabularies. ``llguidance`` is one wheel with no dependency, reads a fast
tokenizer as transformers saves it, and takes JSON schemas and Lark grammars as they are.

Without ``llguidance`` (it comes with the ``hf`` extra), with a slow (Python) tokenizer, or with a schema it
refuses, the reply is decoded as without a shape and its completion says ``constrained=False``.
"""

from __future__ import annotations

import json
import logging
import threading
import weakref
from typing import Any

from senseforge.llm.base import ReplyShape

__all__ = ["shape_processor"]

log = logging.getLogger(__name__)

_TOKENIZERS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
"""``llguidance`` tokenizers by transformers tokenizer (about a second to build, so built once each)."""
_LOCK = threading.Lock()


def _ll_tokenizer(tokenizer: Any) -> Any:
    import llguidance.hf

    with _LOCK:
        if tokenizer not in _TOKENIZERS:
            _TOKENIZERS[tokenizer] = llguidance.hf.from_tokenizer(tokenizer)
        return _TOKENIZERS[tokenizer]


def _grammar(shape: ReplyShape, completion: bool) -> str:
    import llguidance

    if shape.json_schema is not None:
        # compact JSON: with whitespace allowed between tokens, a weak model can pad a reply with it until cut off
        schema_grammar = llguidance.LLMatcher.grammar_from_json_schema(
            shape.json_schema, defaults={"whitespace_flexible": False}
        )
        return str(schema_grammar)
    assert shape.choices is not None
    alternatives = " | ".join(json.dumps(choice, ensure_ascii=False) for choice in dict.fromkeys(shape.choices))
    space = '" "? ' if completion else ""
    return str(llguidance.LLMatcher.grammar_from_lark(f"start: {space}({alternatives})"))


def shape_processor(tokenizer: Any, shape: ReplyShape, prompt_length: int, *, completion: bool) -> Any | None:
    """A transformers logits processor that holds a generation after ``prompt_length`` tokens to ``shape``, or
    ``None`` where it cannot (see the module notes)."""
    try:
        import llguidance
        import llguidance.torch
        from transformers import LogitsProcessor
    except ImportError:
        return None
    try:
        ll_tokenizer = _ll_tokenizer(tokenizer)
        matcher = llguidance.LLMatcher(ll_tokenizer, _grammar(shape, completion))
    except (ValueError, TypeError, RuntimeError) as exc:
        log.warning("hf: reply shape %s cannot be enforced (%s); its replies are not constrained", shape.name, exc)
        return None
    if matcher.is_error():
        log.warning("hf: reply shape %s: %s; its replies are not constrained", shape.name, matcher.get_error())
        return None
    mask = llguidance.torch.allocate_token_bitmask(1, ll_tokenizer.vocab_size)

    class HoldToShape(LogitsProcessor):
        def __call__(self, input_ids: Any, scores: Any) -> Any:
            if input_ids.shape[1] > prompt_length and not matcher.consume_token(int(input_ids[0, -1])):
                raise RuntimeError(f"reply shape {shape.name}: {matcher.get_error()}")
            llguidance.torch.fill_next_token_bitmask(matcher, mask, 0)
            width = min(scores.shape[-1], ll_tokenizer.vocab_size)
            llguidance.torch.apply_token_bitmask_inplace(scores[..., :width], mask.to(scores.device))
            if scores.shape[-1] > width:  # rows of the head beyond the tokenizer's vocabulary: never a token
                scores[..., width:] = float("-inf")
            return scores

    return HoldToShape()
