"""Question sets: each rule on a hand-written dump, and DuckDB against a brute-force oracle."""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from senseforge.data.io import write_jsonl
from senseforge.data.schema import QuestionSet
from senseforge.errors import ConfigError
from senseforge.kb.conceptnet import bundled_dump, import_dump
from senseforge.kb.question_sets import DEFAULT_RELATIONS, extract_many, extract_question_sets
from senseforge.kb.words import count_words

FIXTURE = Path(__file__).parents[1] / "fixtures" / "conceptnet" / "rules.csv"
SEP = "\x1f"


# --- the oracle: the rules of DESIGN.md in plain Python, straight from the dump lines ---------
def _concept(uri: str) -> tuple[str, str] | None:
    parts = uri.split("/")
    if len(parts) < 4 or parts[1] != "c":
        return None
    return parts[2], parts[3].replace("_", " ")


def _md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def oracle(
    lines: list[str], lang: str, seed: int, relations: set[str], n: int | None = None
) -> list[dict[str, object]]:
    edges = []
    for line in lines:
        cols = line.rstrip("\n").split("\t")
        if len(cols) != 5:
            continue
        try:
            json.loads(cols[4])
        except ValueError:
            continue
        start, end = _concept(cols[2]), _concept(cols[3])
        if start is None or end is None or start[0] != lang or end[0] != lang:
            continue
        edges.append((cols[0], cols[1].split("/")[2], start[1], end[1]))
    synonyms = {(s, t) for _, r, s, t in edges if r == "Synonym"} | {(t, s) for _, r, s, t in edges if r == "Synonym"}
    groups: dict[tuple[str, str, str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for uri, rel, s, t in edges:
        if rel in relations:
            groups[(s, rel, "forward")][t].add(uri)
            groups[(t, rel, "backward")][s].add(uri)

    def passes(text: str) -> bool:
        return count_words(text, lang) <= 4 and len(text) > 1

    out = []
    for (anchor, rel, direction), targets in groups.items():
        if not passes(anchor):
            continue
        valid = [t for t in targets if passes(t) and t != anchor]
        valid.sort(key=lambda t: _md5(SEP.join([str(seed), lang, anchor, rel, direction, t])))
        for i in range(0, len(valid) - len(valid) % 3, 3):
            triple = valid[i : i + 3]
            pairs = [(a, b) for a in triple for b in triple if a != b]
            if any(p in synonyms for p in pairs) or any(a in b for a, b in pairs):
                continue
            qs_id = f"qs-{lang}-" + _md5(SEP.join([lang, anchor, rel, direction, *triple]))[:16]
            uris = sorted({u for t in triple for u in targets[t]})
            out.append(
                {
                    "id": qs_id,
                    "anchor": anchor,
                    "relation": rel,
                    "direction": direction,
                    "targets": triple,
                    "uris": uris,
                }
            )
    out.sort(key=lambda q: _md5(f"{seed}{SEP}{q['id']}"))
    return out if n is None else out[:n]


def as_dicts(sets: list[QuestionSet]) -> list[dict[str, object]]:
    return [
        {
            "id": q.id,
            "anchor": q.anchor,
            "relation": q.relation,
            "direction": q.direction,
            "targets": q.targets,
            "uris": q.source_uris,
        }
        for q in sets
    ]


@pytest.fixture
def rules_store(tmp_path: Path) -> Path:
    store = tmp_path / "kb"
    import_dump(FIXTURE, store)
    return store


def _by_anchor(sets: list[QuestionSet]) -> dict[str, QuestionSet]:
    return {q.anchor: q for q in sets}


def test_each_rule_removes_its_named_question_set(rules_store: Path) -> None:
    sets, funnel = extract_question_sets(rules_store, "en", None, seed=0)
    kept = _by_anchor(sets)
    assert set(kept["kitchen"].targets) == {"knife", "fridge", "stove"}  # kept
    assert kept["kitchen"].direction == "backward" and kept["kitchen"].relation == "AtLocation"
    assert "dog" not in kept  # IsA is not a default relation
    assert "a very big old house" not in kept  # anchor has five words
    assert "office" not in kept  # a target had five words: two left
    assert "alphabet" not in kept  # a single-character target: two left
    assert "garden" not in kept  # flower / blossom are synonyms
    assert "car" not in kept  # "wheel" is in "steering wheel"
    assert len(kept["school bag"].targets) == 3  # four targets: one triple, one left over
    assert set(kept["toast"].targets) == {"bread", "butter", "jam"}  # toast is not its own target
    assert "couteau" not in {t for q in sets for t in q.targets}  # cross-language edge ignored
    assert funnel.edges_other_relation == 4  # three IsA, one Synonym
    # the five-word house, and the groups anchored on the five-word machine and on "x"
    assert funnel.groups_anchor_failed == 3
    assert funnel.concepts_too_many_words == 2
    assert funnel.concepts_single_character == 1
    assert funnel.triples_synonym == 1
    assert funnel.triples_substring == 1
    assert funnel.targets_remainder == 1
    assert funnel.targets_equal_anchor == 2  # the toast-toast edge, in its forward and backward group
    assert funnel.question_sets == len(sets) == 3
    assert all(q.source_uris and all(u.startswith("/a/[") for u in q.source_uris) for q in sets)


def test_japanese_and_chinese_rules(rules_store: Path) -> None:
    ja, ja_funnel = extract_question_sets(rules_store, "ja", None)
    assert [q.anchor for q in ja] == ["台所"]  # 食卓 lost 箸, a single character
    assert ja_funnel.concepts_single_character == 1
    zh, _ = extract_question_sets(rules_store, "zh", None)
    assert set(zh[0].targets) == {"筷子", "饭碗", "菜刀"}


def test_extraction_equals_oracle_on_the_fixture(rules_store: Path) -> None:
    lines = FIXTURE.read_text(encoding="utf-8").splitlines()
    for lang in ("en", "ja", "zh"):
        for seed in (0, 1, 7):
            sets, _ = extract_question_sets(rules_store, lang, None, seed)
            assert as_dicts(sets) == oracle(lines, lang, seed, set(DEFAULT_RELATIONS))


def test_extraction_equals_oracle_on_the_real_sample_with_all_relations(tmp_path: Path) -> None:
    store = tmp_path / "kb"
    import_dump("sample", store)
    lines = bundled_dump("sample").read_text(encoding="utf-8").splitlines()
    relations = {line.split("\t")[1].split("/")[2] for line in lines}
    total = 0
    for lang in ("en", "ja", "fr", "zh", "hu", "sv"):
        sets, _ = extract_question_sets(store, lang, None, 3, relations=sorted(relations))
        assert as_dicts(sets) == oracle(lines, lang, 3, relations)
        total += len(sets)
    assert total > 20


def test_same_seed_same_bytes_other_seed_other_sample(tmp_path: Path) -> None:
    store = tmp_path / "kb"
    import_dump("demo", store)
    files = []
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        sets, _ = extract_question_sets(store, "en", 20, seed)
        files.append(tmp_path / f"{name}.jsonl")
        write_jsonl(files[-1], sets)
    assert files[0].read_bytes() == files[1].read_bytes()
    assert files[0].read_bytes() != files[2].read_bytes()


def test_one_pass_over_several_languages_gives_each_what_its_own_pass_gives(tmp_path: Path) -> None:
    """Seeded, sampled and whole: every language's sets and funnel from one scan equal its single-language run's, in
    the order the languages were given (a repeat once), with another seed as well."""
    store = tmp_path / "kb"
    import_dump("sample", store)
    lines = bundled_dump("sample").read_text(encoding="utf-8").splitlines()
    relations = sorted({line.split("\t")[1].split("/")[2] for line in lines})
    langs = ["fr", "en", "ja", "zh", "en"]
    for seed, n in ((0, None), (5, 7)):
        together = extract_many(store, langs, n, seed, relations=relations)
        assert list(together) == ["fr", "en", "ja", "zh"]
        for lang, (sets, funnel) in together.items():
            alone, alone_funnel = extract_question_sets(store, lang, n, seed, relations=relations)
            assert as_dicts(sets) == as_dicts(alone) and funnel == alone_funnel, lang
        assert sum(len(sets) for sets, _ in together.values()) > 10


def test_one_pass_names_a_language_without_edges_and_reads_a_source_code(tmp_path: Path) -> None:
    store = _malay_store(tmp_path)
    with pytest.raises(ConfigError, match="--source-lang ms"):
        extract_many(store, ["ms", "id"], None)
    found = extract_many(store, ["ms", "id"], None, source_langs={"id": "ms"})
    assert [s.id[:6] for s in found["id"][0]] == ["qs-id-"] and found["id"][1].source_lang == "ms"
    assert as_dicts(found["ms"][0]) == as_dicts(extract_question_sets(store, "ms", None)[0])


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_demo_kb_gives_at_least_forty_sets(tmp_path: Path, lang: str) -> None:
    store = tmp_path / "kb"
    import_dump("demo", store)
    sets, _ = extract_question_sets(store, lang, None)
    assert len(sets) >= 40
    assert all(q.relation in DEFAULT_RELATIONS for q in sets)


def _malay_store(tmp_path: Path) -> Path:
    """A store of three Malay edges (how ConceptNet 5.7 files Indonesian)."""
    dump = tmp_path / "ms.csv"
    info = '{"weight": 1.0}'
    rows = [
        f"/a/[{i}]\t/r/AtLocation\t/c/ms/{t}\t/c/ms/dapur\t{info}" for i, t in enumerate(["pisau", "periuk", "kuali"])
    ]
    dump.write_text("\n".join(rows) + "\n", encoding="utf-8")
    store = tmp_path / "kb"
    import_dump(dump, store)
    return store


def test_indonesian_on_a_57_dump_needs_source_lang(tmp_path: Path) -> None:
    store = _malay_store(tmp_path)
    with pytest.raises(ConfigError, match="--source-lang ms"):
        extract_question_sets(store, "id", None)
    sets, funnel = extract_question_sets(store, "id", None, source_lang="ms")
    assert funnel.source_lang == "ms"
    assert sets[0].lang == "id" and sets[0].source_lang == "ms"
    assert sets[0].id.startswith("qs-id-")


WORDS = ["cup", "tea", "teacup", "pot", "kettle", "water", "hot water", "stove", "fire", "a", "big red tea pot set"]
RELATIONS = ["AtLocation", "UsedFor", "Synonym", "IsA"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    edges=st.lists(
        st.tuples(
            st.sampled_from(RELATIONS), st.sampled_from(WORDS), st.sampled_from(WORDS), st.sampled_from(["", "/n"])
        ),
        min_size=1,
        max_size=60,
    ),
    seed=st.integers(min_value=0, max_value=5),
)
def test_extraction_equals_oracle_on_random_graphs(
    tmp_path_factory: pytest.TempPathFactory, edges: list[tuple[str, str, str, str]], seed: int
) -> None:
    folder = tmp_path_factory.mktemp("graph")
    rng = random.Random(seed)
    lines = []
    for index, (rel, start, end, pos) in enumerate(edges):
        s = f"/c/en/{start.replace(' ', '_')}{pos}"
        t = f"/c/en/{end.replace(' ', '_')}"
        lines.append(f"/a/[{index}/{rel}]\t/r/{rel}\t{s}\t{t}\t{json.dumps({'weight': rng.random()})}")
    dump = folder / "graph.csv.gz"
    with gzip.open(dump, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    import_dump(dump, folder / "kb")
    sets, _ = extract_question_sets(folder / "kb", "en", None, seed, relations=[*RELATIONS[:2], "IsA"])
    assert as_dicts(sets) == oracle(lines, "en", seed, {"AtLocation", "UsedFor", "IsA"})


def test_extraction_binds_no_query_parameter_so_duckdb_imports_no_dataframe_library(rules_store: Path) -> None:
    """DuckDB's Python binding imports pandas and pyarrow (over half a second of every build) the first time a query
    binds a parameter; the extraction's queries hold their values as literals, quotes included."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from senseforge.kb.question_sets import extract_many, extract_question_sets\n"
        f"sets, _ = extract_question_sets(Path({str(rules_store)!r}), 'en', None)\n"
        f"extract_many(Path({str(rules_store)!r}), ['en', 'ja'], 3, relations=(\"it's\", 'IsA'))\n"
        "assert sets, 'no sets'\n"
        "print(sorted(name for name in ('pandas', 'pyarrow') if name in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"
