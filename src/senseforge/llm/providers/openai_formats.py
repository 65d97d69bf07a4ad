"""How the ``openai`` provider asks an endpoint for a reply of a given shape, and learns which way it takes.

A request with a JSON-schema :class:`~senseforge.llm.base.ReplyShape` on a chat endpoint is sent, in the first of
these forms the endpoint takes (:data:`FORMS`):

1. ``json_schema``: ``{"type": "json_schema", "json_schema": {"name", "schema", "strict": true}}``, the schema
   made strict (:func:`senseforge.llm.schemas.strict_schema`): OpenAI, vLLM, llama.cpp's C++ ``llama-server``;
2. ``json_object_schema``: ``{"type": "json_object", "schema": …}``: llama-cpp-python's server, which builds a
   grammar from the schema;
3. ``json_object``: plain JSON mode, a JSON object of any shape (the reply is then not held to the schema);
4. ``none``: no ``response_format`` at all.

The endpoint's first refusal of a form (HTTP 400 or 422 naming ``response_format``, ``json_schema`` or
``json_object``, or a 500 reporting a validation error of it, as llama-cpp-python's server answers) moves it to the
next one: one line in the log, remembered for the endpoint (base URL and served model) for the life of the process,
and the request is sent again at once in the next form within the same attempt, so it leaves no failed record.
A refusal of one schema as invalid (``Invalid schema …``) moves only that request on. A schema that cannot be made
strict (a free-form map) skips form 1 for its requests. The form learned is not stored: a new process learns it
again from one refusal.

Shapes of choices are sent nothing: no response format holds a reply to a bare word (a ``json_schema`` must be an
object), and vLLM's ``guided_choice`` is an extra field other servers ignore without a word, so a reply could not
honestly be said to be constrained. Legacy completions (``api='completions'``) are sent nothing either: OpenAI's
endpoint takes no response format, and llama-cpp-python's ignores one. Such completions record
``constrained=False``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

from senseforge.llm.base import ReplyShape
from senseforge.llm.schemas import strict_schema

if TYPE_CHECKING:  # imported where a request is sent (see openai_answers)
    import openai

__all__ = ["FORMS", "Form", "FormMemory", "format_refusal", "memory_for", "probe", "response_format"]

log = logging.getLogger("senseforge.llm.providers.openai")

Form = Literal["json_schema", "json_object_schema", "json_object", "none"]
"""A way to ask for a reply of a JSON schema's shape (see the module notes)."""

FORMS: Final[tuple[Form, ...]] = ("json_schema", "json_object_schema", "json_object", "none")
"""The forms in the order tried."""

CONSTRAINING: Final = frozenset({"json_schema", "json_object_schema"})
"""Forms that hold the reply to the schema (the others at most to some JSON object)."""

_REFUSAL_WORDS = ("response_format", "json_schema", "json_object")


def response_format(shape: ReplyShape, form: Form) -> dict[str, Any] | None:
    """The ``response_format`` of a chat request for ``shape`` in ``form`` (``None``: send none).

    Raises:
        ValueError: ``form`` is ``json_schema`` and the shape's schema cannot be made strict, or the shape has
            no schema (see :func:`first_form`).
    """
    schema = shape.as_schema()
    if schema is None:
        raise ValueError(f"reply shape {shape.name} has no JSON schema")
    if form == "json_schema":
        strict = strict_schema(schema)
        if strict is None:
            raise ValueError(f"reply shape {shape.name}: its schema cannot be made strict")
        return {"type": "json_schema", "json_schema": {"name": shape.name, "schema": strict, "strict": True}}
    if form == "json_object_schema":
        return {"type": "json_object", "schema": schema}
    if form == "json_object":
        return {"type": "json_object"}
    return None


def first_form(shape: ReplyShape, learned: Form) -> Form:
    """The form to send ``shape`` in, given the endpoint's ``learned`` one (form 1 is skipped for a schema that
    cannot be made strict)."""
    schema = shape.as_schema()
    if learned == "json_schema" and (schema is None or strict_schema(schema) is None):
        return "json_object_schema"
    return learned


def format_refusal(exc: BaseException) -> str | None:
    """The endpoint's message when ``exc`` refuses a request's response format, else ``None``: a 400 or 422 that
    names it, or a 500 that reports a validation error of it (llama-cpp-python's server 0.3.36 answers an unknown
    ``response_format`` type so)."""
    import openai

    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in (400, 422, 500):
        return None
    message = " ".join(str(exc.message).split())
    lowered = message.lower()
    if exc.status_code == 500 and "validation error" not in lowered:
        return None
    return message if any(word in lowered for word in _REFUSAL_WORDS) else None


@dataclass
class FormMemory:
    """The form an endpoint takes, as learned from its refusals (one per endpoint and process: :func:`memory_for`)."""

    endpoint: str
    form: Form = "json_schema"
    confirmed: bool = False
    """Whether a request in :attr:`form` has been answered (so a batch need not probe)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def refused(self, form: Form, message: str) -> Form:
        """The form to try after ``form`` was refused with ``message``; remembered for the endpoint unless the
        refusal is of one schema (``Invalid schema …``). Logged once per form left."""
        following = FORMS[min(FORMS.index(form) + 1, len(FORMS) - 1)]
        if "invalid schema" in message.lower():
            return following
        with self._lock:
            if FORMS.index(self.form) <= FORMS.index(form):
                self.form, self.confirmed = following, False
                log.warning(
                    "%s refuses response_format %s (%s); sending %s from now on",
                    self.endpoint,
                    form,
                    message[:200],
                    following,
                )
            return self.form if FORMS.index(self.form) > FORMS.index(form) else following

    def answered(self, form: Form) -> None:
        """Note that a request sent in ``form`` was answered."""
        with self._lock:
            if form == self.form:
                self.confirmed = True


_MEMORIES: dict[tuple[str, str], FormMemory] = {}
_MEMORIES_LOCK = threading.Lock()


def memory_for(base_url: str, model: str) -> FormMemory:
    """The process's memory of the form the endpoint ``base_url`` takes for ``model``."""
    with _MEMORIES_LOCK:
        key = (base_url.rstrip("/"), model)
        if key not in _MEMORIES:
            _MEMORIES[key] = FormMemory(f"{key[0]} ({model})")
        return _MEMORIES[key]


def forget_all() -> None:
    """Forget every endpoint's learned form (tests)."""
    with _MEMORIES_LOCK:
        _MEMORIES.clear()


def probe(memory: FormMemory, shape: ReplyShape, client: Callable[[], openai.OpenAI], model: str) -> None:
    """Find the form the endpoint takes for ``shape`` before a batch is built, with one small online request (one
    token asked, not ledgered) per form tried; nothing is sent when a request in the endpoint's current form has
    been answered, or for a shape without a schema. A failure that is not about the format ends the probe: the
    batch then goes in the form known."""
    if shape.json_schema is None or memory.confirmed:
        return
    import openai

    form = first_form(shape, memory.form)
    with client() as endpoint:
        while form != "none":
            body: dict[str, Any] = {
                "model": model,
                "messages": [{"role": "user", "content": "Reply with a JSON object."}],
                "max_tokens": 1,
                "response_format": response_format(shape, form),
            }
            try:
                endpoint.chat.completions.create(**body)
            except openai.APIStatusError as exc:
                refusal = format_refusal(exc)
                if refusal is None:
                    return
                form = memory.refused(form, refusal)
                continue
            except openai.APIError:
                return
            memory.answered(form)
            return
