"""``senseforge eval run`` and lm-evaluation-harness agree: acc, acc_norm and every per-item prediction.

lm-eval divides each choice's log-likelihood by the length of the choice *text* (its target
delimiter, a space, is scored but not counted); so must we. The items are built so that
dividing by the delimited length would pick another choice on some of them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest

from senseforge.data.export import export_lm_eval
from senseforge.data.loaders import load_dataset
from senseforge.data.schema import Choice, MCItem
from senseforge.evaluate.formulations import mc_prompt
from senseforge.evaluate.harness import run_eval
from senseforge.evaluate.records import MCSample, read_samples
from senseforge.evaluate.run import EvalConfig, score_mc
from senseforge.llm.mock import ScriptedLLM

CSQA = Path(__file__).parents[1] / "fixtures" / "csqa" / "dev_sample.jsonl"


def _lm_eval_norm(sample: MCSample, per: Callable[[str], int]) -> str:
    """lm-eval's normalised prediction from a sample's scores: divide by the choice text's length."""
    assert sample.scores is not None
    values = [score / per(text) for score, text in zip(sample.scores, sample.choices, strict=True)]
    return sample.labels[max(range(len(values)), key=lambda i: (values[i], -i))]


def test_prediction_norm_is_lm_evals_definition_on_commonsenseqa() -> None:
    # a scorer where the delimiter's share of the length matters: a flat cost per character
    # plus a bonus that grows with the text
    llm = ScriptedLLM(
        scorer=lambda r: -1.7 * len(r.continuation) + 1.5 * math.sqrt(len(r.continuation)) * (len(r.context) % 3),
        name="scripted/length",
    )
    items = list(load_dataset(CSQA).items)
    samples = score_mc(items, llm, EvalConfig())
    assert len(samples) == len(items) >= 10
    for sample in samples:
        assert sample.prediction_norm == _lm_eval_norm(sample, len)
        assert sample.prediction_bytes == _lm_eval_norm(sample, lambda t: len(t.encode("utf-8")))
    # the old definition (continuation with its leading space) disagrees on at least one item,
    # so this test can tell the two apart
    with_space = [_lm_eval_norm(s.model_copy(update={"choices": [" " + c for c in s.choices]}), len) for s in samples]
    assert with_space != [s.prediction_norm for s in samples]


def test_copa_connector_is_scored_but_not_counted() -> None:
    item = MCItem(
        id="copa-1",
        lang="en",
        question="The glass broke.",
        choices=[Choice(label="A", text="I dropped it."), Choice(label="B", text="I washed it carefully.")],
        answer="A",
        metadata={"copa_question": "cause"},
    )
    prompt = mc_prompt(item, "loglik")
    assert prompt.continuations == (" i dropped it.", " i washed it carefully.")
    assert prompt.normalised() == ("i dropped it.", "i washed it carefully.")
    ja = mc_prompt(item.model_copy(update={"lang": "ja"}), "loglik")
    assert ja.delimiter == "" and ja.normalised() == ja.continuations


def _items() -> list[MCItem]:
    words = ["river", "stone", "a warm winter coat", "bread", "the quiet library at night", "fire", "cloud", "salt"]
    items = []
    for i in range(24):
        picks = [words[(i * 3 + k * 5) % len(words)] for k in range(4)]
        if len(set(picks)) < 4:
            picks = [f"{p} {k}" for k, p in enumerate(picks)]
        items.append(
            MCItem(
                id=f"t{i}",
                lang="en",
                question=f"Which one goes with item number {i} of the list?",
                choices=[Choice(label=label, text=text) for label, text in zip("ABCD", picks, strict=True)],
                answer="ABCD"[i % 4],
            )
        )
    return items


@pytest.mark.slow
def test_exported_task_and_eval_run_agree(
    tmp_path: Path, tiny_gpt2: Callable[[Path, list[str]], None], lm_eval_runner: Callable[..., None]
) -> None:
    pytest.importorskip("lm_eval")
    pytest.importorskip("transformers")
    from senseforge.llm.registry import get_llm

    items = _items()
    task = export_lm_eval({"test": items}, tmp_path / "task", task_name="sf_parity", lang="en")
    model = tmp_path / "model"
    tiny_gpt2(model, [item.question + " " + c.text for item in items for c in item.choices])
    out = tmp_path / "lm-eval"
    lm_eval_runner(
        f"{model},dtype=float32", "sf_parity", task.yaml_path.parent, out, "--batch_size", "1", "--log_samples"
    )
    (result_file,) = (tmp_path / "lm-eval").rglob("results_*.json")
    (samples_file,) = (tmp_path / "lm-eval").rglob("samples_sf_parity_*.jsonl")
    theirs = json.loads(result_file.read_text(encoding="utf-8"))["results"]["sf_parity"]
    their_samples = sorted(
        (json.loads(line) for line in samples_file.read_text(encoding="utf-8").splitlines()),
        key=lambda s: s["doc_id"],
    )

    llm = get_llm(f"hf/{model}", options={"dtype": "float32", "batch_size": 1})
    try:
        ours = run_eval(task.yaml_path.parent / "test.jsonl", llm, EvalConfig(), tmp_path / "ours")
    finally:
        llm.close()
    our_samples = read_samples(tmp_path / "ours")
    metrics = next(iter(ours.results.values()))
    assert metrics.acc == theirs["acc,none"]
    assert metrics.acc_norm == theirs["acc_norm,none"]
    assert len(our_samples) == len(their_samples) == len(items)
    norm_differs = 0
    for mine, their in zip(our_samples, their_samples, strict=True):
        assert isinstance(mine, MCSample) and mine.scores is not None
        lls = [float(resp[0]) for resp in their["filtered_resps"]]
        assert mine.scores == pytest.approx(lls, abs=1e-4)
        assert bool(mine.correct) == bool(their["acc"])
        assert bool(mine.correct_norm) == bool(their["acc_norm"])
        # the predictions themselves, from lm-eval's scores by lm-eval's definitions
        assert mine.prediction == mine.labels[max(range(len(lls)), key=lambda i: (lls[i], -i))]
        normed = [ll / len(text) for ll, text in zip(lls, mine.choices, strict=True)]
        assert mine.prediction_norm == mine.labels[max(range(len(normed)), key=lambda i: (normed[i], -i))]
        delimited = [ll / (len(text) + 1) for ll, text in zip(lls, mine.choices, strict=True)]
        norm_differs += max(range(len(delimited)), key=lambda i: (delimited[i], -i)) != max(
            range(len(normed)), key=lambda i: (normed[i], -i)
        )
    print(f"items where counting the delimiter would change prediction_norm: {norm_differs}")
