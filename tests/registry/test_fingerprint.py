"""Fingerprints: the normal form, the keys, and MinHash signatures that estimate shingle Jaccard."""

from __future__ import annotations

import numpy as np

from senseforge.registry.fingerprint import SETTINGS, exact_key, jaccard, normal, normal_key, shingles, signatures

QUESTION = (
    "A revolving door is convenient for two direction travel, but it also serves as a security measure at a what?"
)


def test_the_normal_form_ignores_case_width_and_punctuation_but_not_words() -> None:
    assert normal("ＷＨＥＲＥ would you   find it?!") == "where would you find it"
    assert normal_key(QUESTION.upper()) == normal_key(QUESTION) != normal_key(QUESTION.replace("door", "gate"))
    assert exact_key(QUESTION) != exact_key(QUESTION.upper())


def test_a_signature_estimates_the_jaccard_of_the_shingles() -> None:
    changed = QUESTION.replace("security", "safety")
    unrelated = "Where do you keep the milk cold at home?"
    sigs = signatures([QUESTION, changed, unrelated, ""])
    assert sigs.shape == (4, SETTINGS.num_perm) and sigs.dtype == np.uint64
    a, b, c = shingles(QUESTION), shingles(changed), shingles(unrelated)
    true_changed = len(a & b) / len(a | b)
    estimated = jaccard(sigs[0], sigs[:3])
    assert estimated[0] == 1.0
    assert abs(estimated[1] - true_changed) < 0.1 and estimated[1] > 0.7
    assert estimated[2] < 0.2 and len(a & c) / len(a | c) < 0.2
    assert jaccard(sigs[3], sigs[:1])[0] == 0.0  # an empty text matches nothing


def test_scripts_without_spaces_are_shingled_by_character() -> None:
    one = "白蚁入侵了这所房子。"
    sigs = signatures([one, "白蚁入侵了那所房子。", "我掏空了口袋。"])
    scores = jaccard(sigs[0], sigs)
    assert scores[1] > 0.2 and scores[2] == 0.0
