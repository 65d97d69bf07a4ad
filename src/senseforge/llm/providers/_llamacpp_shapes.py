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

import functools
import logging
from typing import TYPE_CHECKING

from senseforge.llm.base import ReplyShape
from senseforge.llm.schemas import choices_gbnf

if TYPE_CHECKING:
    from llama_cpp.llama_grammar import LlamaGrammar

__all__ = ["JSON_OBJECT_SCHEMA", "json_object_grammar", "shape_grammar"]

log = logging.getLogger(__name__)

JSON_OBJECT_SCHEMA = '{"type": "object"}'
"""What a ``json_mode`` request without a shape is held to: some JSON object."""


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
