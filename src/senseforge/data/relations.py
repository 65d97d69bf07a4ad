"""The CRoW relation table: 36 relations for (head, relation, tail) triples, in six dimensions.

CRoW (Ismayilzada et al., 2023) labels the commonsense knowledge behind each example with a
triple whose relation is one of 36, grouped by dimension: attributional (8), physical/spatial
(5), temporal (5), causal (3), social (9) and comparative (6). The table is data,
``data/lexicon/relations.toml``: per relation its name, dimension, a one-line description (A is the
head, B the tail), aliases used by other resources, and the sentence templates of
:func:`verbalize` (``says``, ``says_not``). The descriptions and templates are senseforge's
own wording. :func:`check_table` validates the file when it is first read.

Labels stored in a triple are :attr:`ParsedRelation.label`: a relation name (``CapableOf``),
a negated one (``Not CapableOf``), or ``Other: <free text>`` for knowledge no relation fits.
:func:`parse_relation` reads the spellings models and other resources use: any case, spaces,
underscores or hyphens (``is_a``, ``has subevent``), a ConceptNet ``/r/`` prefix, ``Not``
written apart or together (``not_capable_of``, ``NotCapableOf``), and aliases (ATOMIC 2020's
``xAttr`` is ``HasProperty``). What maps nowhere falls in a seventh dimension,
:data:`OTHER_DIMENSION`.

>>> parse_relation("not_capable_of").label
'Not CapableOf'
>>> relation_dimension("/r/IsA"), relation_dimension("Desires")
('attributional', 'other')
>>> verbalize("a penguin", "Not CapableOf", "fly")
'a penguin cannot fly'
"""

from __future__ import annotations

import difflib
import re
import string
import tomllib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources

from senseforge.errors import ConfigError

MAX_PHRASE_WORDS = 12
"""The longest head or tail a triple may have, in words (CRoW's are short spans)."""
DIMENSIONS: tuple[str, ...] = ("attributional", "physical/spatial", "temporal", "causal", "social", "comparative")
"""CRoW's six dimensions, in the paper's order."""
OTHER_DIMENSION = "other"
"""The seventh dimension: ``Other`` relations and names that map to no CRoW relation."""
DIMENSION_SIZES: Mapping[str, int] = {
    "attributional": 8,
    "physical/spatial": 5,
    "temporal": 5,
    "causal": 3,
    "social": 9,
    "comparative": 6,
}
"""How many relations each dimension holds (36 in all)."""

_FIELDS = {"name", "dimension", "description", "aliases", "says", "says_not"}
_PLACEHOLDERS = {"head", "tail"}
_SEPARATORS = re.compile(r"[\s_\-]+")
_NOT_APART = re.compile(r"not[\s_\-]+(?P<rest>\S.*)", re.IGNORECASE | re.DOTALL)
_NOT_TOGETHER = re.compile(r"(?:Not|NOT)(?P<rest>[A-Z].*)", re.DOTALL)
_OTHER = re.compile(
    r"other\s*(?::(?P<colon>.*)|[-–—](?P<dash>.*)|\((?P<paren>.*)\))?",
    re.IGNORECASE | re.DOTALL,
)


@dataclass(frozen=True)
class Relation:
    """One CRoW relation: its name, dimension, description and the names other resources give it."""

    name: str
    dimension: str
    description: str
    aliases: tuple[str, ...]
    says: str
    """Sentence template of the triple, with ``{head}`` and ``{tail}``."""
    says_not: str
    """Sentence template of the negated triple."""


@dataclass(frozen=True)
class ParsedRelation:
    """A relation label read by :func:`parse_relation`.

    ``name`` is canonical (``Not CapableOf``, ``Other``, ``Not Other``) for known relations
    and ``Other``; for a name that maps nowhere it is the text as given. ``base`` is the CRoW
    relation (``None`` for ``Other`` and unknown names), ``dimension`` the base's dimension or
    :data:`OTHER_DIMENSION`, ``other_text`` the free text of ``Other: <text>``.
    """

    name: str
    base: str | None
    negated: bool
    dimension: str
    other_text: str | None = None

    @property
    def is_other(self) -> bool:
        """Whether this is ``Other`` (with or without text), not a CRoW relation or an unknown name."""
        return self.base is None and self.name in ("Other", "Not Other")

    @property
    def label(self) -> str:
        """The string stored in a triple: ``CapableOf``, ``Not CapableOf``, ``Other: <text>``, ``Other``."""
        if self.is_other and self.other_text:
            return f"{self.name}: {self.other_text}"
        return self.name


def _fold(text: str) -> str:
    """The matching key of a name: case-folded, without spaces, underscores and hyphens."""
    return _SEPARATORS.sub("", text).casefold()


def _template(where: str, value: object) -> str:
    """A sentence template, checked to use ``{head}`` and ``{tail}`` and no other field."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"CRoW relation table: {where}: must be a non-empty string")
    try:
        fields = {field for _, field, _, _ in string.Formatter().parse(value) if field is not None}
    except ValueError as exc:
        raise ConfigError(f"CRoW relation table: {where}: bad template {value!r}: {exc}") from exc
    if fields != _PLACEHOLDERS:
        raise ConfigError(f"CRoW relation table: {where}: template {value!r} must use exactly {{head}} and {{tail}}")
    return value


def _relation(index: int, entry: object) -> Relation:
    """One ``[[relation]]`` table, checked field by field."""
    if not isinstance(entry, Mapping):
        raise ConfigError(f"CRoW relation table: relation #{index + 1} is not a table")
    name = entry.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z]+", name):
        raise ConfigError(f"CRoW relation table: relation #{index + 1}: name {name!r} must be letters only")
    unknown = sorted(set(entry) - _FIELDS)
    if unknown:
        raise ConfigError(f"CRoW relation table: {name}: unknown field(s) {', '.join(unknown)}")
    dimension = entry.get("dimension")
    if dimension not in DIMENSIONS:
        raise ConfigError(f"CRoW relation table: {name}: dimension {dimension!r} is not one of {', '.join(DIMENSIONS)}")
    description = entry.get("description")
    if not isinstance(description, str) or not description.strip() or "\n" in description:
        raise ConfigError(f"CRoW relation table: {name}: description must be one non-empty line")
    aliases = entry.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a.strip() for a in aliases):
        raise ConfigError(f"CRoW relation table: {name}: aliases must be a list of non-empty strings")
    says = _template(f"{name}.says", entry.get("says"))
    says_not = _template(f"{name}.says_not", entry.get("says_not"))
    return Relation(str(name), str(dimension), description.strip(), tuple(str(a) for a in aliases), says, says_not)


def check_table(doc: Mapping[str, object]) -> tuple[Relation, ...]:
    """The relations of a parsed ``relations.toml``, validated.

    Checks the ``dimensions`` list (exactly :data:`DIMENSIONS`, in order), every relation's
    fields, 36 relations with 8/5/5/3/9/6 per dimension, and that no two names or aliases are
    equal once case, spaces, underscores and hyphens are ignored (nor equal to ``Other``).

    Raises:
        ConfigError: naming the first problem found.
    """
    dimensions = doc.get("dimensions")
    if not isinstance(dimensions, list) or tuple(dimensions) != DIMENSIONS:
        raise ConfigError(f"CRoW relation table: dimensions must be {list(DIMENSIONS)}, not {dimensions!r}")
    entries = doc.get("relation")
    if not isinstance(entries, list):
        raise ConfigError("CRoW relation table: no [[relation]] tables")
    table = tuple(_relation(i, entry) for i, entry in enumerate(entries))
    total = sum(DIMENSION_SIZES.values())
    if len(table) != total:
        raise ConfigError(f"CRoW relation table: {len(table)} relations, expected {total}")
    counts = Counter(relation.dimension for relation in table)
    for dimension in DIMENSIONS:
        if counts[dimension] != DIMENSION_SIZES[dimension]:
            raise ConfigError(
                f"CRoW relation table: dimension {dimension!r} has {counts[dimension]} relations,"
                f" expected {DIMENSION_SIZES[dimension]}"
            )
    seen: dict[str, str] = {_fold("Other"): "the reserved Other"}
    for relation in table:
        for key in (relation.name, *relation.aliases):
            folded = _fold(key)
            if folded in seen:
                raise ConfigError(f"CRoW relation table: {relation.name}: {key!r} clashes with {seen[folded]}")
            seen[folded] = f"{key!r} of {relation.name}"
    return table


@cache
def relations() -> tuple[Relation, ...]:
    """The 36 CRoW relations, read from ``data/lexicon/relations.toml`` once.

    Raises:
        ConfigError: when the file is missing, not TOML, or fails :func:`check_table`.
    """
    resource = resources.files("senseforge.data") / "lexicon" / "relations.toml"
    try:
        doc = tomllib.loads(resource.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:  # a packaging or editing bug
        raise ConfigError(f"cannot read the CRoW relation table: {exc}") from exc
    return check_table(doc)


relation_table = relations


@cache
def _index() -> dict[str, Relation]:
    """Every name and alias, folded, to its relation."""
    return {_fold(key): relation for relation in relations() for key in (relation.name, *relation.aliases)}


def _lookup(text: str) -> Relation | None:
    return _index().get(_fold(text))


def parse_relation(text: str, *, strict: bool = True) -> ParsedRelation:
    """Read a relation label as a model or another resource writes it.

    Whitespace and a ConceptNet ``/r/`` prefix are dropped; a leading ``Not`` (followed by a
    space, underscore or hyphen, or written together in camel case) negates; the rest is
    matched against names and aliases ignoring case, spaces, underscores and hyphens.
    ``Other``, ``Other: text``, ``Other - text`` and ``Other(text)`` give ``Other``.

    >>> parse_relation("has subevent")
    ParsedRelation(name='HasSubEvent', base='HasSubEvent', negated=False, dimension='attributional', other_text=None)
    >>> parse_relation("Other - grows next to").label
    'Other: grows next to'

    Args:
        text: the label.
        strict: whether a name that maps nowhere is an error; when false (importing existing
            knowledge) it comes back as given (without ``/r/``), in :data:`OTHER_DIMENSION`.

    Raises:
        ValueError: for an empty label, or with ``strict`` for an unknown one; the message names the closest
            known relations.
    """
    given = text.strip()
    if given.startswith("/r/"):
        given = given[3:].strip("/").strip()
    if not given:
        raise ValueError(f"empty relation {text!r}")
    negated, rest = False, given
    match = _NOT_APART.fullmatch(given) or _NOT_TOGETHER.fullmatch(given)
    if match:
        negated, rest = True, match["rest"].strip()
    other = _OTHER.fullmatch(rest)
    if other:
        words = " ".join(next((g for g in other.groups() if g is not None), "").split())
        name = "Not Other" if negated else "Other"
        return ParsedRelation(name, None, negated, OTHER_DIMENSION, words or None)
    relation = _lookup(rest)
    if relation is None and not negated and _fold(given).startswith("not"):
        relation = _lookup(_fold(given)[3:])  # "notcapableof"
        negated = relation is not None
    if relation is not None:
        name = f"Not {relation.name}" if negated else relation.name
        return ParsedRelation(name, relation.name, negated, relation.dimension)
    if strict:
        raise ValueError(f"unknown relation {text!r}; {_suggest(rest)}")
    return ParsedRelation(given, None, negated, OTHER_DIMENSION)


def _suggest(text: str) -> str:
    """The closest known names, as the end of an error message."""
    index = _index()
    close = difflib.get_close_matches(_fold(text), list(index), n=6, cutoff=0.6)
    names = list(dict.fromkeys(index[key].name for key in close))[:3]
    hint = "or write 'Other: <words>' when no CRoW relation fits"
    return f"did you mean {', '.join(names)}? ({hint})" if names else f"not a CRoW relation ({hint})"


def relation_dimension(text: str) -> str:
    """The dimension of a relation label; :data:`OTHER_DIMENSION` for ``Other`` and unknown names.

    Raises:
        ValueError: for an empty label.
    """
    return parse_relation(text, strict=False).dimension


def verbalize(head: str, relation: str, tail: str) -> str:
    """The triple as a plain English sentence (no final full stop), from the relation's template.

    ``Other: <text>`` reads ``<head> <text> <tail>``; ``Other`` alone ``<head> is linked to
    <tail>``; an unknown relation ``<head> <relation> <tail>``.

    >>> verbalize("dog", "is_a", "animal")
    'dog is a kind of animal'
    >>> verbalize("PersonX goes jogging", "xIntent", "stay fit")
    'PersonX goes jogging: the person does this in order to stay fit'

    Raises:
        ValueError: for an empty relation.
    """
    parsed = parse_relation(relation, strict=False)
    if parsed.base is not None:
        known = _index()[_fold(parsed.base)]
        return (known.says_not if parsed.negated else known.says).format(head=head, tail=tail)
    if parsed.is_other:
        if parsed.other_text:
            said = f"{head} {parsed.other_text} {tail}"
            return f"it is not the case that {said}" if parsed.negated else said
        return f"{head} is not linked to {tail}" if parsed.negated else f"{head} is linked to {tail}"
    return f"{head} {parsed.name} {tail}"


def relations_prompt_block() -> str:
    """The relation list for prompts: one line per relation, under a header per dimension."""
    lines = ["Relations (A is the head of the triple, B its tail):"]
    for dimension in DIMENSIONS:
        lines += ["", f"{dimension[0].upper()}{dimension[1:]}:"]
        lines += [f"- {r.name}: {r.description}" for r in relations() if r.dimension == dimension]
    lines += [
        "",
        "Any relation may be prefixed with `Not ` to say it does not hold (e.g. `Not CapableOf`);"
        " if none fits, write `Other: <your words>`.",
    ]
    return "\n".join(lines)


RELATIONS: tuple[Relation, ...] = relations()
"""The 36 CRoW relations, in the table's order (dimension by dimension)."""
