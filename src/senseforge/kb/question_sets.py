"""mCSQA question sets (§3.1): an anchor concept, a relation and three target concepts.

The algorithm, per language (``lang``) and seed:

1. Take the edges whose two ends are concepts of ``lang`` and whose relation is in
   ``relations`` (default: :data:`DEFAULT_RELATIONS`). Concept texts drop the POS and
   sense parts of their URIs.
2. Form groups: forward ``(anchor=start, relation, ?)`` with the distinct end texts as
   candidate targets, and backward ``(?, relation, anchor=end)`` with the distinct start
   texts.
3. Per-concept rules: a concept passes when it has at most four words
   (:mod:`senseforge.kb.words`) and is more than one character long. A group whose anchor
   fails is dropped; targets that fail, or equal the anchor, are dropped.
4. Shuffle each group's targets with the seed — by the MD5 of
   ``seed␟lang␟anchor␟relation␟direction␟target`` (␟ = U+001F), so the order of one group
   never depends on any other — and cut them into consecutive disjoint triples; the
   remainder is dropped.
5. Drop a triple when two of its concepts are linked by ``Synonym`` in ``lang`` (either
   direction) or one is a substring of another.
6. Sample ``n`` of the surviving sets: the ``n`` smallest MD5s of ``seed␟id``.

Every step counts what it removed (the funnel). Steps 1–6 run in DuckDB over the store;
word counts come from Python, once per distinct concept.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from senseforge.data.lang import normalize_tag, primary_language
from senseforge.data.schema import QuestionSet
from senseforge.errors import ConfigError
from senseforge.kb.conceptnet import default_kb_dir, open_edges
from senseforge.kb.words import word_counter

DEFAULT_RELATIONS: tuple[str, ...] = (
    # where things are
    "AtLocation",
    "LocatedNear",
    # what things are made of and consist of
    "PartOf",
    "HasA",
    "MadeOf",
    # what things are for and can do
    "UsedFor",
    "CapableOf",
    "NotCapableOf",
    "ReceivesAction",
    "CreatedBy",
    # what things are like
    "HasProperty",
    "NotHasProperty",
    # events: causes, parts and prerequisites
    "Causes",
    "CausesDesire",
    "HasSubevent",
    "HasFirstSubevent",
    "HasLastSubevent",
    "HasPrerequisite",
    # people's goals and wants
    "MotivatedByGoal",
    "ObstructedBy",
    "Desires",
    "NotDesires",
)
"""The 22 relations that count by default.

CommonsenseQA kept the ConceptNet relations that state everyday knowledge about how
things are located, built, used, caused and wanted, and left out the rest; mCSQA keeps
22 such relations without listing them. These are the 22 relations of ConceptNet 5
that do that. Left out: the generic ``RelatedTo`` and ``IsA`` (CommonsenseQA found
them too loose or too well studied), the lexical and etymological relations
(``Synonym``, ``Antonym``, ``DistinctFrom``, ``FormOf``, ``DerivedFrom``,
``EtymologicallyRelatedTo``, ``EtymologicallyDerivedFrom``, ``SimilarTo``,
``DefinedAs``, ``SymbolOf``, ``HasContext``, ``MannerOf``, ``Entails``) and the links to
other resources (``ExternalURL``, ``InstanceOf``, ``dbpedia/…``).
"""

MAX_WORDS = 4
SEP = "\x1f"


@dataclass
class Funnel:
    """What each rule removed, for one language."""

    lang: str
    source_lang: str
    edges_in_language: int = 0
    edges_other_relation: int = 0
    edges_kept: int = 0
    concepts_checked: int = 0
    concepts_too_many_words: int = 0
    concepts_single_character: int = 0
    groups: int = 0
    groups_anchor_failed: int = 0
    targets_failed_rules: int = 0
    targets_equal_anchor: int = 0
    groups_under_three_targets: int = 0
    targets_remainder: int = 0
    triples: int = 0
    triples_synonym: int = 0
    triples_substring: int = 0
    question_sets: int = 0
    sampled: int = 0
    removed: dict[str, int] = field(default_factory=dict)

    def rows(self) -> list[tuple[str, int]]:
        """The funnel as (step, count) rows, in order."""
        return [(name, value) for name, value in vars(self).items() if isinstance(value, int)]


def _md5(text: str) -> str:
    return hashlib.md5(text.encode("utf-8")).hexdigest()


def question_set_id(lang: str, anchor: str, relation: str, direction: str, targets: Sequence[str]) -> str:
    """Stable id of a question set (its language, anchor, relation, direction and targets)."""
    return f"qs-{lang}-" + _md5(SEP.join([lang, anchor, relation, direction, *targets]))[:16]


def concept_passes(text: str, count: int) -> tuple[bool, str | None]:
    """Whether a concept passes the per-concept rules, and which rule it broke."""
    if count > MAX_WORDS:
        return False, "too_many_words"
    if len(text) <= 1:
        return False, "single_character"
    return True, None


def extract_question_sets(
    store: Path | None,
    lang: str,
    n: int | None,
    seed: int = 0,
    *,
    relations: Sequence[str] = DEFAULT_RELATIONS,
    source_lang: str | None = None,
) -> tuple[list[QuestionSet], Funnel]:
    """Question sets of one language from a knowledge store.

    Args:
        store: the knowledge store folder (default store when None).
        lang: BCP-47 tag of the question sets.
        n: how many to sample (None: all, in sample order).
        seed: the seed for shuffling targets and sampling.
        relations: relations that count.
        source_lang: the store's language code to read, when it is not ``lang``'s primary
            subtag (e.g. ``ms`` for Indonesian in ConceptNet 5.7); recorded on every set.

    Raises:
        ConfigError: no edges for the language (with a hint for ``id``/``ms``).
    """
    tag = normalize_tag(lang)
    code = source_lang or primary_language(tag)
    with open_edges(store) as con:
        con.execute(
            "CREATE TEMP TABLE e AS SELECT uri, relation, start_text AS s, end_text AS t FROM edges "
            f"WHERE start_lang = {_text(code)} AND end_lang = {_text(code)}"
        )
        return _from_edges(con, tag, code, n, seed, relations, store=store)


def _text(value: str) -> str:
    """``value`` as an SQL text literal. The queries here hold their values as literals: DuckDB's Python binding
    imports pandas and pyarrow (over half a second) the first time a query binds a parameter."""
    return "'" + value.replace("'", "''") + "'"


def _texts(values: Sequence[str]) -> str:
    """``values`` as an SQL list of text (see :func:`_text`)."""
    return "[" + ", ".join(map(_text, values)) + "]::VARCHAR[]"


def extract_many(
    store: Path | None,
    langs: Sequence[str],
    n: int | None,
    seed: int = 0,
    *,
    relations: Sequence[str] = DEFAULT_RELATIONS,
    source_langs: Mapping[str, str] | None = None,
) -> dict[str, tuple[list[QuestionSet], Funnel]]:
    """Question sets of several languages in one scan of the knowledge store, each language's exactly what
    :func:`extract_question_sets` gives it with the same seed.

    The one scan keeps the edges within one of the languages that the extraction reads (the relations that
    count, and ``Synonym``), and counts all of them per language (for the funnel); each language's sets are
    then drawn from its share, in turn. Args as :func:`extract_question_sets`, with ``source_langs``: a language's store
    code when it is not its primary subtag, by tag.

    Returns:
        Per language tag, in the order given (a repeated one once): its sets and funnel.

    Raises:
        ConfigError: no edges for one of the languages.
    """
    codes = {normalize_tag(lang): "" for lang in langs}
    given = {normalize_tag(tag): code for tag, code in (source_langs or {}).items()}
    for tag in codes:
        codes[tag] = given.get(tag) or primary_language(tag)
    out: dict[str, tuple[list[QuestionSet], Funnel]] = {}
    wanted = sorted(set(codes.values()))
    with open_edges(store) as con:
        counted = con.execute(
            "SELECT start_lang, count(*) FROM edges WHERE start_lang = end_lang "
            f"AND list_contains({_texts(wanted)}, start_lang) GROUP BY 1"
        ).fetchall()
        in_language = {str(code): int(count) for code, count in counted}
        con.execute(
            "CREATE TEMP TABLE scanned AS SELECT start_lang AS code, uri, relation, start_text AS s, end_text AS t "
            f"FROM edges WHERE start_lang = end_lang AND list_contains({_texts(wanted)}, start_lang) "
            f"AND list_contains({_texts(sorted({*relations, 'Synonym'}))}, relation)"
        )
        for tag, code in codes.items():
            con.execute(f"CREATE TEMP TABLE e AS SELECT uri, relation, s, t FROM scanned WHERE code = {_text(code)}")
            out[tag] = _from_edges(con, tag, code, n, seed, relations, in_language.get(code, 0), store=store)
            for table in _PER_LANGUAGE:
                con.execute(f"DROP TABLE IF EXISTS {table}")
    return out


def _no_edges(con: Any, code: str, store: Path | None) -> str:
    """Why a language has no question sets, and how to get its edges: the store's folder, the languages it has,
    and the import that adds the missing one (``ms`` for ``id``: ConceptNet 5.7 files Indonesian under it)."""
    folder = (store or default_kb_dir()).expanduser()
    rows = con.execute("SELECT DISTINCT start_lang FROM edges WHERE start_lang = end_lang ORDER BY 1").fetchall()
    langs = [str(row[0]) for row in rows]
    missing = f"no ConceptNet edges for '{code}' in the knowledge store {folder} (it has: {', '.join(langs) or 'none'})"
    indonesian = "ConceptNet 5.7 files Indonesian under 'ms'"
    if code == "id" and "ms" in langs:
        return f"{missing}; {indonesian}: pass --source-lang ms to use those edges"
    wanted = "ms" if code == "id" else code
    keep = ",".join(sorted({*langs, wanted}))
    where = "" if folder == default_kb_dir().expanduser() else f" --store {folder}"
    then = f"; {indonesian}: import it and pass --source-lang ms" if code == "id" else ""
    return (
        f"{missing}: import them with 'senseforge kb import conceptnet-assertions-5.7.0.csv.gz --lang {keep}{where}' "
        "(the dump is on ConceptNet's Downloads page; an import replaces the store, so name every language to keep)"
        f"{then}, or choose a language the store has"
    )


_PER_LANGUAGE = ("e", "r", "bad", "g", "v", "ranked", "syn", "tri", "synflag", "checked", "survivors", "picked")
"""The temporary tables one language's extraction makes (dropped before the next language's)."""


def _from_edges(
    con: Any,
    tag: str,
    code: str,
    n: int | None,
    seed: int,
    relations: Sequence[str],
    in_language: int | None = None,
    *,
    store: Path | None = None,
) -> tuple[list[QuestionSet], Funnel]:
    """The question sets of ``tag`` from the edges in table ``e`` (its language's, store code ``code``: all of them,
    or at least those of ``relations`` and ``Synonym`` when ``in_language`` gives the count of all), read from the
    knowledge store ``store`` (named in the error when it has no edges in the language)."""
    funnel = Funnel(lang=tag, source_lang=code)
    count_words = word_counter(code)
    funnel.edges_in_language = _int(con, "SELECT count(*) FROM e") if in_language is None else in_language
    if funnel.edges_in_language == 0:
        raise ConfigError(_no_edges(con, code, store))
    con.execute(f"CREATE TEMP TABLE r AS SELECT * FROM e WHERE list_contains({_texts(list(relations))}, relation)")
    funnel.edges_kept = _int(con, "SELECT count(*) FROM r")
    funnel.edges_other_relation = funnel.edges_in_language - funnel.edges_kept

    # per-concept rules, computed in Python once per distinct concept
    concepts = [row[0] for row in con.execute("SELECT s FROM r UNION SELECT t FROM r ORDER BY 1").fetchall()]
    failing: list[str] = []
    for text in concepts:
        ok, rule = concept_passes(text, count_words(text))
        if ok:
            continue
        failing.append(text)
        if rule == "too_many_words":
            funnel.concepts_too_many_words += 1
        else:
            funnel.concepts_single_character += 1
    funnel.concepts_checked = len(concepts)
    _load_strings(con, "bad", failing)

    con.execute(
        "CREATE TEMP TABLE g AS "
        "SELECT DISTINCT s AS anchor, relation, 'forward' AS direction, t AS target FROM r "
        "UNION ALL "
        "SELECT DISTINCT t AS anchor, relation, 'backward' AS direction, s AS target FROM r"
    )
    funnel.groups, funnel.groups_anchor_failed = _ints(
        con,
        "SELECT count(*), count(*) FILTER (WHERE anchor IN (SELECT c FROM bad)) FROM "
        "(SELECT DISTINCT anchor, relation, direction FROM g)",
    )
    funnel.targets_failed_rules, funnel.targets_equal_anchor = _ints(
        con,
        "SELECT count(*) FILTER (WHERE target IN (SELECT c FROM bad)), "
        "count(*) FILTER (WHERE target = anchor AND target NOT IN (SELECT c FROM bad)) "
        "FROM g WHERE anchor NOT IN (SELECT c FROM bad)",
    )
    con.execute(
        "CREATE TEMP TABLE v AS "
        f"SELECT *, md5(concat_ws(chr(31), {_text(str(seed))}, {_text(code)}, anchor, relation, direction, target)) "
        "AS k FROM g WHERE anchor NOT IN (SELECT c FROM bad) AND target NOT IN (SELECT c FROM bad) AND target <> anchor"
    )
    con.execute(
        "CREATE TEMP TABLE ranked AS SELECT *, "
        "row_number() OVER (PARTITION BY anchor, relation, direction ORDER BY k) AS rn, "
        "count(*) OVER (PARTITION BY anchor, relation, direction) AS size FROM v"
    )
    funnel.groups_under_three_targets, funnel.targets_remainder = _ints(
        con,
        "SELECT count(DISTINCT (anchor, relation, direction)) FILTER (WHERE size < 3), "
        "count(*) FILTER (WHERE size >= 3 AND rn > size - size % 3) FROM ranked",
    )
    con.execute(
        "CREATE TEMP TABLE syn AS SELECT s AS a, t AS b FROM e WHERE relation = 'Synonym' "
        "UNION SELECT t AS a, s AS b FROM e WHERE relation = 'Synonym'"
    )
    con.execute(
        "CREATE TEMP TABLE tri AS SELECT anchor, relation, direction, (rn - 1) // 3 AS slot, "
        "list(target ORDER BY rn) AS targets "
        "FROM ranked WHERE rn <= size - size % 3 GROUP BY anchor, relation, direction, slot"
    )
    # Synonym pairs inside a triple, by a plain equi-join on the three pairs (syn is symmetric)
    con.execute(
        "CREATE TEMP TABLE synflag AS SELECT DISTINCT anchor, relation, direction, slot FROM ("
        "SELECT anchor, relation, direction, slot, targets[1] AS a, targets[2] AS b FROM tri UNION ALL "
        "SELECT anchor, relation, direction, slot, targets[1] AS a, targets[3] AS b FROM tri UNION ALL "
        "SELECT anchor, relation, direction, slot, targets[2] AS a, targets[3] AS b FROM tri"
        ") AS p SEMI JOIN syn USING (a, b)"
    )
    con.execute(
        "CREATE TEMP TABLE checked AS SELECT tri.*, synflag.slot IS NOT NULL AS synonym, "
        "contains(targets[1], targets[2]) OR contains(targets[2], targets[1]) "
        "OR contains(targets[1], targets[3]) OR contains(targets[3], targets[1]) "
        "OR contains(targets[2], targets[3]) OR contains(targets[3], targets[2]) AS substring "
        "FROM tri LEFT JOIN synflag USING (anchor, relation, direction, slot)"
    )
    funnel.triples, funnel.triples_synonym, funnel.triples_substring = _ints(
        con,
        "SELECT count(*), count(*) FILTER (WHERE synonym), count(*) FILTER (WHERE substring AND NOT synonym) "
        "FROM checked",
    )
    # ids and the seeded sample in SQL (the same MD5s as question_set_id), then sources for the sample only
    con.execute(
        f"CREATE TEMP TABLE survivors AS SELECT *, md5(concat({_text(str(seed))}, chr(31), id)) AS sample_key FROM ("
        f"SELECT anchor, relation, direction, targets, 'qs-' || {_text(tag)} || '-' || "
        f"md5(concat_ws(chr(31), {_text(tag)}, anchor, relation, direction, targets[1], targets[2], targets[3]))[1:16] "
        "AS id FROM checked WHERE NOT synonym AND NOT substring)"
    )
    funnel.question_sets = _int(con, "SELECT count(*) FROM survivors")
    limit = "" if n is None else f" LIMIT {int(n)}"
    con.execute(f"CREATE TEMP TABLE picked AS SELECT * FROM survivors ORDER BY sample_key{limit}")
    rows = con.execute(
        "WITH pairs AS (SELECT id, anchor, relation, direction, unnest(targets) AS target FROM picked), "
        "sources AS ("
        "SELECT p.id, r.uri FROM pairs p JOIN r ON r.s = p.anchor AND r.t = p.target AND r.relation = p.relation "
        "WHERE p.direction = 'forward' UNION ALL "
        "SELECT p.id, r.uri FROM pairs p JOIN r ON r.t = p.anchor AND r.s = p.target AND r.relation = p.relation "
        "WHERE p.direction = 'backward'), "
        "grouped AS (SELECT id, list(DISTINCT uri ORDER BY uri) AS uris FROM sources GROUP BY id) "
        "SELECT p.id, p.anchor, p.relation, p.direction, p.targets, g.uris, p.sample_key "
        "FROM picked p JOIN grouped g USING (id) ORDER BY p.sample_key"
    ).fetchall()

    sampled = [
        QuestionSet(
            id=qs_id,
            lang=tag,
            anchor=anchor,
            relation=relation,
            direction=direction,
            targets=list(targets),
            source_uris=list(uris),
            source_lang=code if code != tag else None,
        )
        for qs_id, anchor, relation, direction, targets, uris, _ in rows
    ]
    funnel.sampled = len(sampled)
    return sampled, funnel


def _load_strings(con: Any, table: str, values: list[str]) -> None:
    """A one-column temp table of strings (through a file: far faster than a list parameter)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "values.jsonl"
        path.write_text("".join(json.dumps({"c": v}, ensure_ascii=False) + "\n" for v in values), encoding="utf-8")
        con.execute(
            f"CREATE TEMP TABLE {table} AS SELECT c FROM read_json({_text(str(path))}, format='newline_delimited', "
            "columns={'c': 'VARCHAR'})"
        )


def _ints(con: Any, sql: str) -> tuple[int, ...]:
    row = con.execute(sql).fetchone()
    return tuple(int(v or 0) for v in row)


def _int(con: Any, sql: str) -> int:
    return _ints(con, sql)[0]
