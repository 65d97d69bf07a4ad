"""The items and the free answers the open-ended evaluation tests share (``test_open`` and ``test_open_judge``)."""

from __future__ import annotations

import json
from pathlib import Path

from senseforge.llm.base import GenerateRequest

OPTIONS = ["granite", "river", "thunderstorm", "glacier", "volcano"]

# the evaluated model's free answers, by question
ANSWERS = {
    "Where does rain come from?": "from a storm cloud",
    "What carries water to the sea?": "a stream",
    "What is very cold and made of ice?": "an iceberg",
    "What erupts with lava?": "a mountain of fire",
    "What is a hard rock?": "I am not sure",
}
GOLD = {
    "Where does rain come from?": "C",
    "What carries water to the sea?": "B",
    "What is very cold and made of ice?": "D",
    "What erupts with lava?": "E",
    "What is a hard rock?": "A",
}


def items_file(tmp_path: Path) -> Path:
    rows = [
        {
            "id": f"q{index}",
            "question": question,
            "question_concept": "nature",
            "choices": {"label": list("ABCDE"), "text": OPTIONS},
            "answerKey": GOLD[question],
        }
        for index, question in enumerate(ANSWERS)
    ]
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def answer(request: GenerateRequest) -> str:
    prompt = request.as_messages()[-1].content
    return next(answer for question, answer in ANSWERS.items() if question in prompt)
