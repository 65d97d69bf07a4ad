"""A registry of judgement bodies: each task type's body registers into it, beside its definition.

A judgement is one body per task type (:class:`~senseforge.data.schema.VerifyJudgement`,
…), told apart by its ``task``. Instead of a closed union, each body class registers
itself (``@JUDGEMENTS.register``, :data:`senseforge.data.schema.JUDGEMENTS`; its ``task``
field a ``Literal`` with its task type as default), and everything that reads judgements —
:data:`senseforge.data.schema.JUDGEMENT`, :func:`senseforge.data.schema.judgement`, the run
store, ``annotate status``'s agreement — reads the registry. Adding a task type's body is
defining and registering it; a judgement of a task no body registered for fails
validation naming its task.

The registry lives in ``data/`` because ``pipelines/`` reads judgements too, below
``annotate/`` where the task types are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Generic, TypeVar, Union

from pydantic import BaseModel, Field, TypeAdapter

B = TypeVar("B", bound=BaseModel)
J = TypeVar("J", bound=BaseModel)


class JudgementRegistry(Generic[B]):
    """Judgement bodies (subclasses of ``B``) by task type, and the validator over all of them.

    A judgement of a task no body registered for raises :class:`pydantic.ValidationError`
    naming the task (``Input tag 'rate' found using 'task' does not match any of the
    expected tags: …``).
    """

    def __init__(self) -> None:
        self._bodies: dict[str, type[B]] = {}
        self._adapter: TypeAdapter[Any] | None = None

    def register(self, body: type[J]) -> type[J]:
        """Register a judgement body under its ``task`` (a class decorator).

        Raises:
            TypeError: the body's ``task`` has no default naming its task type.
            ValueError: another body already registered that task.
        """
        field = body.model_fields.get("task")
        task = field.default if field is not None else None
        if not isinstance(task, str) or not task:
            raise TypeError(f"{body.__name__}: a judgement body's task is a Literal with its task type as default")
        known = self._bodies.get(task)
        if known is not None and known is not body:
            raise ValueError(f"task {task!r}: {known.__name__} is already registered as its judgement body")
        self._bodies[task] = body  # type: ignore[assignment]  # J is a body of this registry (B)
        self._adapter = None
        return body

    def unregister(self, task: str) -> type[B]:
        """Remove the body of ``task`` (a test's own, once it is done) and give it back.

        Raises:
            KeyError: no body registered for ``task``.
        """
        body = self._bodies.pop(task)
        self._adapter = None
        return body

    def bodies(self) -> Mapping[str, type[B]]:
        """Every registered body by task type, in the order they registered."""
        return dict(self._bodies)

    def body(self, task: str) -> type[B]:
        """The body of a task type's judgements.

        Raises:
            KeyError: no body registered for ``task`` (the message names it and the known ones).
        """
        try:
            return self._bodies[task]
        except KeyError:
            known = ", ".join(self._bodies)
            raise KeyError(f"no judgement body registered for task {task!r} (known: {known})") from None

    def _validator(self) -> TypeAdapter[Any]:
        if self._adapter is None:
            bodies = tuple(self._bodies.values())
            if not bodies:
                raise LookupError("no judgement body is registered")
            union: Any = bodies[0] if len(bodies) == 1 else Annotated[Union[bodies], Field(discriminator="task")]  # noqa: UP007
            self._adapter = TypeAdapter(union)
        return self._adapter

    def validate_python(self, data: Any) -> B:
        """A judgement of the body its ``task`` names (pydantic's errors, located under the task)."""
        made: B = self._validator().validate_python(data)
        return made

    def validate_json(self, data: str | bytes) -> B:
        """A judgement from JSON text, of the body its ``task`` names."""
        made: B = self._validator().validate_json(data)
        return made
