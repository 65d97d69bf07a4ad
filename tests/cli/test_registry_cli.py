"""``senseforge registry`` and ``senseforge analyze contamination`` in real processes."""

from __future__ import annotations

import json
from pathlib import Path

from .test_llm_cli import assert_one_line_error, run_cli

FIXTURES = Path(__file__).parents[1] / "fixtures"
CSQA = FIXTURES / "csqa" / "dev_sample.jsonl"


def test_register_list_check_and_remove(tmp_path: Path, senseforge_home: Path) -> None:
    added = run_cli(
        "registry", "add", str(CSQA), "--name", "csqa-dev", "--licence", "MIT", "--no-embeddings", home=senseforge_home
    )
    assert added.returncode == 0, added.stderr
    assert "registered csqa-dev: 10 items (en; csqa)" in added.stderr
    listed = run_cli("registry", "list", "--json", home=senseforge_home)
    payload = json.loads(listed.stdout)
    assert [(e["name"], e["items"], e["licence"]) for e in payload["entries"]] == [("csqa-dev", 10, "MIT")]
    assert payload["folder"] == str(senseforge_home / "registry") and len(payload["hash"]) == 64

    rows = [json.loads(line) for line in CSQA.read_text(encoding="utf-8").splitlines()]
    copied = dict(rows[0], id="ours-1", question=rows[0]["question"].upper())  # a re-cased copy
    changed = dict(rows[2], id="ours-2", question=rows[2]["question"].replace("magazines", "newspapers"))
    fresh = dict(rows[3], id="ours-3", question="Where do you keep the milk cold at home?")
    data = tmp_path / "ours"
    data.mkdir()
    (data / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (copied, changed, fresh)))
    (data / "test.jsonl").write_text(json.dumps(dict(fresh, id="ours-4")) + "\n")  # the train item again: a leak
    out = tmp_path / "analysis"
    checked = run_cli("analyze", "contamination", str(data), "--out", str(out), home=senseforge_home)
    assert checked.returncode == 0, checked.stderr
    assert "copies (a gate rejects): 2 (50.00%)" in checked.stdout
    assert "repeated within the dataset: 1, of which across splits: 1" in checked.stdout
    report = json.loads((out / "contamination.json").read_text())
    assert report["by_entry"]["csqa-dev"] == {"exact": 0, "normal": 1, "near": 1, "cross_lingual": 0}
    by_id = {item["id"]: item for item in report["matched_items"]}
    assert by_id["ours-1"]["matches"][0]["source_id"] == rows[0]["id"]
    assert by_id["ours-2"]["matches"][0]["kind"] == "near"
    assert by_id["ours-3"]["repeats"] == "ours-4" and by_id["ours-3"]["leak"] is True  # files in path order
    assert not report["cross_lingual_checked"]  # the entry has no embeddings
    assert (out / "contamination.csv").is_file()

    removed = run_cli("registry", "remove", "csqa-dev", home=senseforge_home)
    assert removed.returncode == 0 and "removed csqa-dev (10 items)" in removed.stderr
    empty = run_cli("analyze", "contamination", str(data), "--out", str(out), home=senseforge_home)
    assert_one_line_error(empty, "no benchmark registered")
    missing = run_cli("registry", "remove", "csqa-dev", home=senseforge_home)
    assert_one_line_error(missing, "no registry entry 'csqa-dev'")
    bad = run_cli("registry", "add", str(tmp_path / "nope.jsonl"), "--name", "x", home=senseforge_home)
    assert_one_line_error(bad, "no such file or folder")
