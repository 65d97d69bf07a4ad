"""A task type's form as data: what the annotator is shown, each field it asks, and how a field is read.

Every task type declares one :class:`Form` (its ``form`` attribute). The same description
serves three readers:

* :meth:`Form.read` turns the fields of a posted form (every value a list of strings) or
  of a JSON body into validated values, collecting every problem (the app answers 422
  with them); the task type's ``parse`` then builds its judgement body from the values,
  adding the cross-field rules only it knows (create's concept check, wsg's edit rule);
* :mod:`senseforge.annotate.interop` derives the Label Studio and Argilla forms from it,
  so every task type travels to both tools without a form of its own there;
* the page's keyboard keys and option wordings (:attr:`FormField.keys`,
  :attr:`FormField.option_texts`).

Field kinds:

``choice``
    One value of the options (``yes``/``no`` ones also take JSON booleans and
    ``true``/``1``/``y``; their value is a ``bool``).
``multi-choice``
    Any number of the options (a JSON object of option → boolean is read too, each
    option then required): a list, in the order given, each once.
``flags``
    A multi-choice of problems noticed, every one optional.
``rating``
    A whole number within the options (``1``…``5``).
``text``
    Free text, stripped (``squash``: runs of white space become one space); ``max_length``.
``texts``
    A list of texts, one per row (create's options): exactly :attr:`FormField.rows` of
    them, none empty, none longer than ``max_length``, no two the same (folded).
``triples``
    Rows of (head, relation, tail) where head and tail are spans of the shown text (or a
    short phrase) and the relation one of :attr:`FormField.options` (cka). The reader
    gives the non-empty rows; the task type checks the relations.

Options are static, or taken from the task's view by :attr:`FormField.options_from` (an
item's choice labels, its flags). ``required_when`` makes a field required when another
field has one of some values, ``only_when`` forbids it otherwise; each carries the
problem it reports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from senseforge.annotate.i18n import N_, Said
from senseforge.data.text import fold

FieldKind = Literal["choice", "multi-choice", "flags", "rating", "text", "texts", "triples"]
YES_NO: tuple[str, ...] = ("yes", "no")
YES_NO_KEYS: tuple[tuple[str, ...], ...] = (("1", "y"), ("2", "n"))
"""The keys of a yes/no question on every page: 1 or y, 2 or n."""
DIGITS: tuple[tuple[str, ...], ...] = tuple((str(n),) for n in range(1, 10))
"""Option keys by position: 1 … 9."""
MAX_COMMENT = 2000
ROW_LABELS = "ABCDEFGHIJ"
"""Row labels by position (create's options: A, B, …)."""

_TRUE = ("yes", "true", "1", "y")
_FALSE = ("no", "false", "0", "n")


def values_of(fields: Mapping[str, Any], name: str) -> list[str]:
    """A field's values as strings (a form repeats a name; JSON may send a list or one value)."""
    value = fields.get(name)
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    return [str(value)]


def one(fields: Mapping[str, Any], name: str) -> str | None:
    """A field's first value, stripped, or ``None``."""
    values = values_of(fields, name)
    return values[0].strip() if values else None


@dataclass(frozen=True)
class When:
    """A rule on another field: it holds when ``field`` has one of ``values``; ``problem`` is reported otherwise."""

    field: str
    values: tuple[Any, ...]
    problem: str


@dataclass(frozen=True)
class Shown:
    """A piece of the task the annotator reads: a Label Studio ``Text``, an Argilla text field.

    ``text`` renders it from the task's view (``None``: the view's value at ``key``).
    """

    key: str
    title: str
    text: Callable[[Mapping[str, Any]], Any] | None = None

    def render(self, view: Mapping[str, Any]) -> Any:
        return self.text(view) if self.text is not None else view.get(self.key)


@dataclass(frozen=True)
class FormField:
    """One field of a task type's form, declared once."""

    name: str
    kind: FieldKind
    title: str
    options: tuple[str, ...] = ()
    """Static options (a ``choice``, ``multi-choice``, ``flags`` or ``rating``; a triple's relations)."""
    options_from: Callable[[Mapping[str, Any]], Sequence[str]] | None = None
    """Options taken from the task's view (they replace ``options`` when there is a view)."""
    option_texts: tuple[str, ...] = ()
    """What the page says for each static option, by position (default: the option itself)."""
    keys: tuple[tuple[str, ...], ...] = ()
    """The keyboard keys that pick each option, by position."""
    required: bool = False
    required_when: When | None = None
    only_when: When | None = None
    max_length: int | None = None
    squash: bool = False
    """Runs of white space in a text become one space."""
    rows: Callable[[Mapping[str, Any]], int] | None = None
    """How many rows a ``texts`` field has (exactly) or a ``triples`` one may have (at most), from the view."""

    def options_for(self, view: Mapping[str, Any] | None) -> tuple[str, ...]:
        """The options over one task's view (the static ones without a view)."""
        if view is not None and self.options_from is not None:
            return tuple(str(o) for o in self.options_from(view))
        return self.options

    def text_of(self, option: str) -> str:
        """What the page says for an option."""
        if option in self.options and len(self.option_texts) == len(self.options):
            return self.option_texts[self.options.index(option)]
        return option

    def keys_of(self, position: int) -> tuple[str, ...]:
        """The keys that pick the option at ``position`` (none past the declared ones)."""
        return self.keys[position] if position < len(self.keys) else ()

    @property
    def yes_no(self) -> bool:
        return self.kind == "choice" and self.options == YES_NO


@dataclass(frozen=True)
class Form:
    """What a task type shows and asks: instructions, shown texts, and fields."""

    instructions: str
    shown: tuple[Shown, ...]
    fields: tuple[FormField, ...]

    def field(self, name: str) -> FormField | None:
        return next((f for f in self.fields if f.name == name), None)

    def read(self, view: Mapping[str, Any], fields: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """The values of the posted ``fields`` by this form, over a task's ``view``, and every problem.

        A value is ``None`` when not given; a ``yes``/``no`` choice is a ``bool``, a
        ``rating`` an ``int``, a multi-choice or ``flags`` a list, ``texts`` a list of
        strings, ``triples`` a list of ``{"head", "relation", "tail"}`` rows.
        """
        values: dict[str, Any] = {}
        problems: list[str] = []
        for item in self.fields:
            values[item.name] = _READERS[item.kind](item, view, fields, problems)
        for item in self.fields:
            given = values[item.name] not in (None, "", [])
            sent = given or any(v.strip() for v in values_of(fields, item.name))  # an invalid value is reported once
            rule = item.required_when
            if rule is not None and not sent and values.get(rule.field) in rule.values:
                problems.append(Said(N_("%(field)s: %(problem)s"), field=item.name, problem=Said(rule.problem)))
            if item.only_when is not None and given:
                other = values.get(item.only_when.field)
                if other is not None and other not in item.only_when.values:
                    problems.append(
                        Said(N_("%(field)s: %(problem)s"), field=item.name, problem=Said(item.only_when.problem))
                    )
        return values, problems


def _choice(item: FormField, view: Mapping[str, Any], fields: Mapping[str, Any], problems: list[str]) -> Any:
    raw = fields.get(item.name)
    if item.yes_no:
        if isinstance(raw, bool):
            return raw
        value = one(fields, item.name)
        if value in (None, ""):
            if item.required:
                problems.append(Said(N_("%(field)s: required (yes or no)"), field=item.name))
            return None
        assert value is not None
        if value.lower() in _TRUE:
            return True
        if value.lower() in _FALSE:
            return False
        problems.append(
            Said(N_("%(field)s: expected yes or no, got %(value)s"), field=item.name, value=repr(value[:40]))
        )
        return None
    allowed = item.options_for(view)
    value = one(fields, item.name)
    if not value:
        if item.required:
            problems.append(
                Said(N_("%(field)s: required (one of %(options)s)"), field=item.name, options=", ".join(allowed))
            )
        return None
    if value not in allowed:
        problems.append(
            Said(
                N_("%(field)s: %(value)s is not one of %(options)s"),
                field=item.name,
                value=repr(value[:30]),
                options=", ".join(allowed),
            )
        )
        return None
    return value


def _unknown(name: str, unknown: list[str], allowed: Sequence[str]) -> Said:
    return Said(
        N_("%(field)s: unknown %(unknown)s (known: %(options)s)"),
        field=name,
        unknown=str(unknown),
        options=", ".join(allowed),
    )


def _rating(item: FormField, view: Mapping[str, Any], fields: Mapping[str, Any], problems: list[str]) -> Any:
    raw = fields.get(item.name)
    text = str(raw) if isinstance(raw, int) and not isinstance(raw, bool) else None
    picked = _choice(item, view, {item.name: text} if text is not None else fields, problems)
    return None if picked is None else int(picked)


def _many(item: FormField, view: Mapping[str, Any], fields: Mapping[str, Any], problems: list[str]) -> Any:
    allowed = item.options_for(view)
    raw = fields.get(item.name)
    if isinstance(raw, Mapping):  # JSON: {"option": true, …}, every option said
        unknown = sorted(set(map(str, raw)) - set(allowed))
        if unknown:
            problems.append(_unknown(item.name, unknown[:4], allowed))
        ticked = []
        for option in allowed:
            value = raw.get(option)
            if not isinstance(value, bool):
                problems.append(Said(N_("%(field)s: required (true or false)"), field=f"{item.name}.{option}"))
            elif value:
                ticked.append(option)
        return ticked
    given = list(dict.fromkeys(values_of(fields, item.name)))
    unknown = [v for v in given if v not in allowed]
    if unknown:
        problems.append(_unknown(item.name, unknown[:3], allowed))
    elif item.required and not given:
        problems.append(
            Said(N_("%(field)s: required (any of %(options)s)"), field=item.name, options=", ".join(allowed))
        )
    return [v for v in given if v in allowed]


def _text(item: FormField, view: Mapping[str, Any], fields: Mapping[str, Any], problems: list[str]) -> Any:
    text = one(fields, item.name) or ""
    if item.squash:
        text = " ".join(text.split())
    if not text:
        if item.required:
            problems.append(Said(N_("%(field)s: required"), field=item.name))
        return None
    if item.max_length is not None and len(text) > item.max_length:
        problems.append(Said(N_("%(field)s: at most %(n)s characters"), field=item.name, n=item.max_length))
    return text


def _texts(item: FormField, view: Mapping[str, Any], fields: Mapping[str, Any], problems: list[str]) -> Any:
    """A list of texts: the field repeated, its singular (a form's ``option``), or JSON ``choices`` objects."""
    raw = fields.get(item.name, fields.get(item.name.removesuffix("s")))
    if raw is None and isinstance(fields.get("choices"), list):
        raw = [c.get("text") if isinstance(c, Mapping) else c for c in fields["choices"]]
    given = [] if raw is None else raw if isinstance(raw, list) else [raw]
    texts = [" ".join(str(t).split()) if t is not None else "" for t in given]
    wanted = item.rows(view) if item.rows is not None else len(texts)
    if len(texts) != wanted:
        problems.append(
            Said(
                N_("%(field)s: write exactly %(n)s %(field)s (got %(got)s)"), field=item.name, n=wanted, got=len(texts)
            )
        )
    singular = item.name.removesuffix("s")
    for index, text in enumerate(texts):
        label = ROW_LABELS[index] if index < len(ROW_LABELS) else str(index + 1)
        if not text:
            problems.append(
                Said(N_("%(field)s: %(row)s %(label)s is empty"), field=item.name, row=singular, label=label)
            )
        elif item.max_length is not None and len(text) > item.max_length:
            problems.append(
                Said(
                    N_("%(field)s: %(row)s %(label)s has more than %(n)s characters"),
                    field=item.name,
                    row=singular,
                    label=label,
                    n=item.max_length,
                )
            )
    folded = [fold(t) for t in texts if t]
    if len(set(folded)) != len(folded):
        problems.append(Said(N_("%(field)s: two %(field)s say the same thing"), field=item.name))
    return texts


TRIPLE_PARTS: tuple[str, ...] = ("head", "relation", "tail")
"""A ``triples`` field's row parts (a form repeats each name per row, with ``other`` and ``negated``)."""


def _triples(item: FormField, view: Mapping[str, Any], fields: Mapping[str, Any], problems: list[str]) -> Any:
    """The rows of a triples field: JSON ``triples`` objects, or the form's repeated fields row by row.

    A form's row sends ``head``, ``relation`` (``Other`` with the words in ``other``) and
    ``tail``, and ``negated`` repeats the (0-based) numbers of the rows whose relation is
    negated. An empty row of the form is left out.
    """
    raw = fields.get(item.name)
    if isinstance(raw, list):
        return [dict(t) if isinstance(t, Mapping) else {"bad": t} for t in raw]
    heads, relations_, tails = (values_of(fields, part) for part in TRIPLE_PARTS)
    others, negated = values_of(fields, "other"), set(values_of(fields, "negated"))
    rows = []
    for index in range(max(len(heads), len(relations_), len(tails))):
        head = heads[index].strip() if index < len(heads) else ""
        relation = relations_[index].strip() if index < len(relations_) else ""
        tail = tails[index].strip() if index < len(tails) else ""
        if not (head or tail):
            continue
        if relation == "Other":
            words = others[index].strip() if index < len(others) else ""
            relation = f"Other: {words}" if words else "Other"
        if str(index) in negated and relation:
            relation = f"Not {relation}"
        rows.append({"head": head, "relation": relation, "tail": tail})
    return rows


_READERS: dict[str, Callable[[FormField, Mapping[str, Any], Mapping[str, Any], list[str]], Any]] = {
    "choice": _choice,
    "rating": _rating,
    "multi-choice": _many,
    "flags": _many,
    "text": _text,
    "texts": _texts,
    "triples": _triples,
}


# --- the fields most forms share --------------------------------------------------------------


def yes_no_field(name: str, title: str, *, required: bool = True, texts: tuple[str, str] = ("Yes", "No")) -> FormField:
    """A yes/no question, picked with 1 or y and 2 or n."""
    return FormField(name, "choice", title, YES_NO, option_texts=texts, keys=YES_NO_KEYS, required=required)


def comment_field(name: str = "comment", title: str = "Comment (optional)") -> FormField:
    """An optional comment of at most :data:`MAX_COMMENT` characters."""
    return FormField(name, "text", title, max_length=MAX_COMMENT)


def view_list(key: str, attribute: str | None = None) -> Callable[[Mapping[str, Any]], list[str]]:
    """Options from a view's list at ``key`` (of strings, or of objects whose ``attribute`` is the option)."""

    def options(view: Mapping[str, Any]) -> list[str]:
        found = view.get(key) or []
        return [str(entry[attribute]) if attribute is not None else str(entry) for entry in found]

    return options


def rating_options(low: int, high: int) -> tuple[str, ...]:
    """The options of a rating from ``low`` to ``high``."""
    return tuple(str(n) for n in range(low, high + 1))


# --- how shown texts render from a view ---------------------------------------------------------


def choices_text(key: str = "choices") -> Callable[[Mapping[str, Any]], str]:
    """A view's choices at ``key`` as ``A. text`` lines."""

    def text(view: Mapping[str, Any]) -> str:
        return "\n".join(f"{c['label']}. {c['text']}" for c in view.get(key) or [])

    return text


def label_text(key: str, choices: str = "choices") -> Callable[[Mapping[str, Any]], str | None]:
    """The choice a view's ``key`` names (an answer, a distractor) as ``A. text``."""

    def text(view: Mapping[str, Any]) -> str | None:
        label = view.get(key)
        if label in (None, ""):
            return None
        found = next((c["text"] for c in view.get(choices) or [] if c["label"] == label), None)
        return f"{label}. {found}" if found is not None else str(label)

    return text


def triples_text(key: str, *, numbered: bool = False) -> Callable[[Mapping[str, Any]], str]:
    """A view's knowledge triples at ``key``, one per line (numbered from 0 when a field cites them by number)."""

    def text(view: Mapping[str, Any]) -> str:
        found = view.get(key) or []
        rows = [found] if isinstance(found, Mapping) else found
        lines = [f"({t['head']}, {t['relation']}, {t['tail']})" for t in rows]
        return "\n".join(f"{n}. {line}" if numbered else line for n, line in enumerate(lines))

    return text


ITEM_SHOWN: tuple[Shown, ...] = (
    Shown("item_question", "Question", lambda view: view.get("question")),
    Shown("item_choices", "Options", choices_text()),
)
"""What a task over an item shows of it: its question and its options."""
