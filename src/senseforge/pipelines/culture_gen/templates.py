"""The prompts of culture-gen, in our own words.

* **chat** (instruction-tuned models): an English instruction asking for the questions
  directly in the target language, and the batch's category and concepts in the last
  turn — no worked example (as Putri et al. prompted GPT-4 Turbo);
* **completion** (base models): a few-shot page — one worked example in the target
  language, then the batch — that the model continues with a one-line JSON list;
* ``prompt_language="target"``: the chat instruction written in the target language
  (Indonesian and Sundanese so far).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

from senseforge.data.lang import language_name
from senseforge.errors import ConfigError
from senseforge.llm.base import GenerateRequest, Message, PromptStyle, ReplyShape
from senseforge.pipelines.choices import FiveOptions, Label
from senseforge.pipelines.culture_gen.concepts import Batch

INSTRUCTION = """You write multiple-choice questions that test the everyday common sense of people \
who live in a {language}-speaking culture.

For every concept the user lists, write one question, directly in {language} (think and write in \
{language}; do not write in English and translate). The question must name the concept itself, be \
answerable by an ordinary member of that culture without looking anything up, and have five options \
labelled A to E of which exactly one is right. The four wrong options should be plausible, not silly.

Reply with a JSON list and nothing else: one object per concept, in the order given, each \
{{"question_concept": "<the concept as listed>", "question": "...", \
"choices": {{"A": "...", "B": "...", "C": "...", "D": "...", "E": "..."}}, "answer": "<A-E>"}}."""

TARGET_INSTRUCTIONS: dict[str, str] = {
    "id": """Anda menulis soal pilihan ganda yang menguji akal sehat sehari-hari orang yang hidup \
dalam budaya Indonesia.

Untuk setiap konsep yang diberikan pengguna, tulislah satu pertanyaan langsung dalam bahasa \
Indonesia. Pertanyaan harus menyebut konsep itu sendiri, dapat dijawab oleh orang Indonesia biasa \
tanpa mencari informasi, dan memiliki lima pilihan berlabel A sampai E dengan tepat satu jawaban \
benar. Empat pilihan yang salah harus masuk akal.

Balas hanya dengan daftar JSON: satu objek per konsep, sesuai urutan, masing-masing \
{{"question_concept": "<konsep>", "question": "...", \
"choices": {{"A": "...", "B": "...", "C": "...", "D": "...", "E": "..."}}, "answer": "<A-E>"}}.""",
    "su": """Anjeun nyerat patarosan pilihan ganda anu nguji akal séhat sapopoé urang anu hirup \
dina budaya Sunda.

Pikeun unggal konsép anu dipasihkeun ku pangguna, serat hiji patarosan langsung dina basa Sunda. \
Patarosan kedah nyebat konsép éta, tiasa dijawab ku urang Sunda biasa tanpa milarian katerangan, \
sareng gaduh lima pilihan anu dilabélan A dugi ka E kalayan ngan hiji jawaban anu leres. Opat \
pilihan anu lepat kedah asup akal.

Waler ku daptar JSON wungkul: hiji objék pikeun unggal konsép, numutkeun urutanana, masing-masing \
{{"question_concept": "<konsép>", "question": "...", \
"choices": {{"A": "...", "B": "...", "C": "...", "D": "...", "E": "..."}}, "answer": "<A-E>"}}.""",
}

_EXAMPLES: dict[str, tuple[str, str, dict[str, object]]] = {
    "id": (
        "Soal pilihan ganda tentang budaya Indonesia (JSON, satu baris per kelompok).",
        "culinary",
        {
            "question_concept": "nasi uduk",
            "question": "Nasi uduk biasanya dimasak dengan apa supaya rasanya gurih?",
            "choices": {"A": "santan", "B": "air garam", "C": "susu sapi", "D": "kecap", "E": "cuka"},
            "answer": "A",
        },
    ),
    "su": (
        "Patarosan pilihan ganda ngeunaan budaya Sunda (JSON, hiji baris pikeun unggal kelompok).",
        "culinary",
        {
            "question_concept": "colénak",
            "question": "Colénak biasana didahar sareng naon?",
            "choices": {
                "A": "kinca gula beureum",
                "B": "sambel terasi",
                "C": "kuah soto",
                "D": "kécap asin",
                "E": "saos tomat",
            },
            "answer": "A",
        },
    ),
    "en": (
        "Multiple-choice commonsense questions about a culture (JSON, one line per group).",
        "culinary",
        {
            "question_concept": "porridge",
            "question": "What is porridge usually cooked with?",
            "choices": {"A": "milk or water", "B": "vinegar", "C": "ink", "D": "sand", "E": "petrol"},
            "answer": "A",
        },
    ),
}

COMPLETION_PREFIX = "["
"""The completion page ends with the list's opening bracket; the parser puts it back."""


class WrittenItem(BaseModel):
    """One item of a generate reply, as the prompts ask for it (keys in this order)."""

    model_config = ConfigDict(extra="forbid")

    question_concept: str
    question: str
    choices: FiveOptions
    answer: Label


class WrittenItems(RootModel[Annotated[list[WrittenItem], Field(min_length=1)]]):
    """A generate reply as the prompts ask for it: a JSON list, one item per concept of the batch (at least one, so a
    backend holding the reply to this shape does not let a model close the list it was asked to fill)."""


GENERATE_SHAPE = ReplyShape.of_model(WrittenItems, name="culture_gen_items")
"""The shape of a generate reply (:class:`WrittenItems`), sent with every generate request. The parser reads this
shape and the other shapes models write (:mod:`~senseforge.pipelines.culture_gen.parse`)."""


def user_turn(batch: Batch) -> str:
    """The last turn: the batch's category and concepts."""
    listed = "\n".join(f"{index}. {concept}" for index, concept in enumerate(batch.concepts, start=1))
    return f"Category: {batch.category}\nConcepts:\n{listed}"


def _chat(batch: Batch, prompt_language: Literal["english", "target"]) -> list[Message]:
    if prompt_language == "target":
        if batch.lang not in TARGET_INSTRUCTIONS:
            known = ", ".join(sorted(TARGET_INSTRUCTIONS))
            raise ConfigError(f"no culture-gen instruction written in {batch.lang!r} yet (we have: {known})")
        system = TARGET_INSTRUCTIONS[batch.lang]
    else:
        system = INSTRUCTION.format(language=language_name(batch.lang))
    return [Message(role="system", content=system), Message(role="user", content=user_turn(batch))]


def worked_example(lang: str) -> dict[str, Any]:
    """The worked example the completion page shows for ``lang`` (the English one when it has none)."""
    return _EXAMPLES.get(lang, _EXAMPLES["en"])[2]


def completion_page(batch: Batch) -> str:
    """The few-shot page for base models: a worked example in the target language, then the batch."""
    heading, category, example = _EXAMPLES.get(batch.lang, _EXAMPLES["en"])
    example_line = json.dumps([example], ensure_ascii=False)
    concepts = json.dumps(list(batch.concepts), ensure_ascii=False)
    shown = json.dumps([example["question_concept"]], ensure_ascii=False)
    return (
        f"{heading}\n\ncategory: {category}\nconcepts: {shown}\n{example_line}\n\n"
        f"category: {batch.category}\nconcepts: {concepts}\n{COMPLETION_PREFIX}"
    )


def build_request(
    batch: Batch,
    style: PromptStyle,
    *,
    prompt_language: Literal["english", "target"] = "english",
    temperature: float = 0.1,
    max_tokens: int = 2048,
    seed: int = 0,
) -> GenerateRequest:
    """The one request of a batch; a recurring batch's occurrence number is added to the seed."""
    run_seed = seed + batch.occurrence
    if style == "chat":
        return GenerateRequest(
            messages=tuple(_chat(batch, prompt_language)),
            temperature=temperature,
            max_tokens=max_tokens,
            seed=run_seed,
            reply_shape=GENERATE_SHAPE,
        )
    return GenerateRequest(
        prompt=completion_page(batch),
        temperature=temperature,
        max_tokens=max_tokens,
        seed=run_seed,
        stop=("\n",),
        reply_shape=GENERATE_SHAPE,
    )


def template_hashes(langs: Sequence[str], style: str, prompt_language: str) -> dict[str, str]:
    """``{generate/<lang>/<style>: sha256}`` of what the prompts hold besides the batch."""
    out: dict[str, str] = {}
    for lang in langs:
        probe = Batch(lang, "<category>", ("<concept>",))
        if style == "chat":
            text = _chat(probe, "target" if prompt_language == "target" else "english")[0].content
        else:
            text = completion_page(probe)
        out[f"generate/{lang}/{style}"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return out
