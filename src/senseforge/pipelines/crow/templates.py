"""The prompts of the CRoW recipe, in our own words.

* **CKA** (knowledge annotation): the example, the relation list, and a request for one
  to five (head, relation, tail) triples that link the context with the target — a JSON
  list from a chat model; from a base model, a few-shot page it continues with
  ``head | relation | tail`` lines.
* **WSG** (schema generation): the example, its label, one kept triple, and a request for
  a minimally changed target that breaks the triple and flips the label — JSON
  ``{"rewrite": …}`` from a chat model, one ``Rewrite (…):`` line from a base model.
* **CKV / WSV** (validation): a yes/no question that ends where the judge's answer goes
  (a chat judge replies; a base model's " yes" and " no" are compared). Each validator of
  a panel reads its own phrasing (:data:`CKV_QUESTIONS`, :data:`WSV_QUESTIONS`, by the
  validator's index), so three validators from one deterministic model are still three
  readings of the item.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, RootModel

from senseforge.data.relations import relations, relations_prompt_block
from senseforge.llm.base import GenerateRequest, PromptStyle, ReplyShape
from senseforge.pipelines.crow.records import CrowRecord, CrowTriple, required
from senseforge.pipelines.crow.tasks import TaskSpec

CKA_MARK = "Commonsense knowledge annotation"
"""The first words of every CKA prompt (the dry-run author recognises its requests by them)."""
WSG_MARK = "Minimal rewrite"
"""The first words of every WSG prompt."""


class KnowledgeTriple(BaseModel):
    """One triple of a CKA reply, as the chat prompt asks for it (the relation one of the table's)."""

    model_config = ConfigDict(extra="forbid")

    head: str
    relation: str
    tail: str


class Knowledge(RootModel[list[KnowledgeTriple]]):
    """A chat CKA reply as the prompt asks for it: a JSON list of triples, ``[]`` for none."""


class Rewrite(BaseModel):
    """A chat WSG reply as the prompt asks for it: the new target, or ``null`` for no alternative."""

    model_config = ConfigDict(extra="forbid")

    rewrite: str | None


CKA_SHAPE = ReplyShape.of_model(Knowledge, name="crow_knowledge")
WSG_SHAPE = ReplyShape.of_model(Rewrite, name="crow_rewrite")
"""The shapes of the chat CKA and WSG replies, sent with their chat requests. A completion page asks for lines
(``head | relation | tail``, a rewritten target), which no JSON shape describes: its requests carry none."""

CKA_SYSTEM = f"""{CKA_MARK}. You point out the everyday knowledge a reader uses, without saying so, \
to understand an example of a language task.

Give between one and five triples (head, relation, tail). The head and the tail are short phrases: \
copy a few words from the context or the target, or write a short phrase of your own. Every triple \
should link something in the context with something in the target. Write common sense that most \
people share — how things are used, what causes what, what people want or feel — not encyclopedic \
facts such as dates, names or figures. Choose each relation from this list:

{{relations}}

Reply with a JSON list and nothing else, e.g. [{{{{"head": "...", "relation": "...", "tail": "..."}}}}]. \
If no such knowledge links them, reply []."""

CKA_USER = """Task: {description}
{context_name}: {context}
{targets}"""

CKA_PAGE_HEAD = f"""{CKA_MARK}: the everyday knowledge that links a context with its target, \
one triple per line as head | relation | tail.
Relations: {{names}}; any of them may be written with Not in front, or Other: <words>.
"""

CKA_PAGE_EXAMPLE = """
Task: safety detection
Context: You are frying food and the oil in the pan catches fire
Target (safe): put a metal lid on the pan
Knowledge:
- metal lid | UsedFor | cutting off the air
- fire | HinderedBy | no air

Task: intent detection
Context: Bus drivers strike for higher pay as fuel prices rise
Target (true): the drivers feel they earn too little
Knowledge:
- strike | MotivatedByGoal | higher pay
- fuel prices rise | Causes | earn too little
"""

CKA_PAGE_ITEM = """
Task: {description}
Context: {context}
{targets}
Knowledge:
-"""

WSG_SYSTEM = f"""{WSG_MARK}. You write Winograd-style minimal rewrites of examples of a language task.

You get an example, its label, and one piece of everyday knowledge the example relies on. Rewrite \
the target so that all four hold:
1. at most five words differ from the original target (replacing, adding, removing or swapping words);
2. the rewrite goes against the given knowledge;
3. the label flips: the rewritten target is {{flipped}} where the original is {{label}};
4. it stays on the topic of the context.
Do not just add or remove a "not": change the words the knowledge is about.

Reply with JSON and nothing else: {{{{"rewrite": "<the new target>"}}}}, or {{{{"rewrite": null}}}} \
when no such rewrite exists."""

WSG_USER = """Task: {description}
{context_name}: {context}
{target_name} ({label}): {target}
Knowledge: {verbalized} ({head} | {relation} | {tail})"""

WSG_PAGE_HEAD = f"""{WSG_MARK}: change at most five words of the target so that it breaks the knowledge \
and its label flips.
"""

WSG_PAGE_EXAMPLE = """
Context: You are frying food and the oil in the pan catches fire
Target (safe): put a metal lid on the pan
Knowledge: a metal lid is used for cutting off the air
Rewrite (unsafe): put a paper towel on the pan

Context: Bus drivers strike for higher pay as fuel prices rise
Target (true): the drivers feel they earn too little
Knowledge: a strike is done to get higher pay
Rewrite (false): the drivers feel they earn too much
"""

WSG_PAGE_ITEM = """
Context: {context}
Target ({label}): {target}
Knowledge: {verbalized}
Rewrite ({flipped}):"""

CKV_QUESTIONS: tuple[str, ...] = (
    "Is this knowledge true as common sense, and does it link the {context_name} with the {target_name}?",
    "Would most people agree with this knowledge, and does it matter for this example?",
    "Does this piece of everyday knowledge hold, and does it connect the two parts of the example?",
)
"""The validators' phrasings of the CKV question (validator ``i`` reads number ``i mod 3``)."""

WSV_QUESTIONS: tuple[str, ...] = (
    "Does the rewrite change only a few words, go against the knowledge, make the {target_name} {flipped}, "
    "and stay on topic?",
    "Is the rewrite a close variant of the original that breaks the knowledge and is {flipped} for this "
    "{context_name}, without leaving its topic?",
    "Would a careful reader call the rewrite {flipped}, on topic, minimally changed and at odds with the knowledge?",
)
"""The validators' phrasings of the WSV question: all four conditions at once."""

CKV_PROMPT = """Task: {description}
{context_name}: {context}
{target_name}: {target}
Knowledge: {verbalized} ({head} | {relation} | {tail})
Question: {question} Answer yes or no.
Answer:"""

WSV_PROMPT = """Task: {description}
{context_name}: {context}
Original {target_name} ({label}): {target}
Rewrite: {rewrite}
Knowledge: {verbalized}
Question: {question} Answer yes or no.
Answer:"""


def _targets(record: CrowRecord, spec: TaskSpec, name: str = "Target") -> str:
    """The target line(s): one, or every target of a translation context with its label."""
    lines = [f"{name} ({spec.label_word(record.label)}): {record.target}"]
    for other in record.others:
        lines.append(f"{name} ({spec.label_word(other.label)}): {other.text}")
    return "\n".join(lines)


def _fields(record: CrowRecord, spec: TaskSpec) -> dict[str, str]:
    return {
        "description": spec.description,
        "context_name": spec.context_name.capitalize(),
        "target_name": spec.target_name.capitalize(),
        "context": record.context,
        "target": record.target,
        "label": spec.label_word(record.label),
        "flipped": spec.label_word(not record.label),
    }


def cka_request(
    record: CrowRecord, spec: TaskSpec, style: PromptStyle, *, temperature: float, max_tokens: int, seed: int
) -> GenerateRequest:
    """The CKA request of one context."""
    fields = _fields(record, spec)
    sampling: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens, "seed": seed}
    if style == "chat":
        user = CKA_USER.format(**{**fields, "targets": _targets(record, spec, fields["target_name"])})
        system = CKA_SYSTEM.format(relations=relations_prompt_block())
        return GenerateRequest.chat(user, system=system, reply_shape=CKA_SHAPE, **sampling)
    names = ", ".join(r.name for r in relations())
    page = CKA_PAGE_HEAD.format(names=names) + CKA_PAGE_EXAMPLE
    item = {**fields, "description": _title(spec), "context": _one_line(record.context)}
    page += CKA_PAGE_ITEM.format(**item, targets=_targets(record, spec))
    return GenerateRequest(prompt=page, stop=("\n\n", "\nTask:"), **sampling)


def wsg_request(
    record: CrowRecord, spec: TaskSpec, style: PromptStyle, *, temperature: float, max_tokens: int, seed: int
) -> GenerateRequest:
    """The WSG request of one (context, kept triple)."""
    fields = _fields(record, spec)
    triple = required(record.triple, "triple")
    sampling: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens, "seed": seed}
    if style == "chat":
        user = WSG_USER.format(**fields, **_triple_fields(triple))
        system = WSG_SYSTEM.format(label=fields["label"], flipped=fields["flipped"])
        return GenerateRequest.chat(user, system=system, reply_shape=WSG_SHAPE, **sampling)
    page = WSG_PAGE_HEAD + WSG_PAGE_EXAMPLE
    page += WSG_PAGE_ITEM.format(**{**fields, "context": _one_line(record.context)}, verbalized=triple.verbalized)
    return GenerateRequest(prompt=page, stop=("\n",), **sampling)


def _title(spec: TaskSpec) -> str:
    """The task's name as a few-shot page gives it (its description up to the colon)."""
    return spec.description.split(":", 1)[0]


def _one_line(text: str) -> str:
    """A context on one line (dialogue turns separated by `` / ``), as few-shot pages show it."""
    return " / ".join(line.strip() for line in text.split("\n") if line.strip())


def _triple_fields(triple: CrowTriple) -> dict[str, str]:
    return {
        "head": triple.head,
        "relation": triple.relation,
        "tail": triple.tail,
        "verbalized": str(triple.verbalized),
    }


def ckv_prompt(record: CrowRecord, spec: TaskSpec, judge: int) -> str:
    """What CKV validator number ``judge`` reads about one triple."""
    fields = _fields(record, spec)
    question = CKV_QUESTIONS[judge % len(CKV_QUESTIONS)].format(
        context_name=spec.context_name, target_name=spec.target_name
    )
    return CKV_PROMPT.format(**fields, **_triple_fields(required(record.triple, "triple")), question=question)


def wsv_prompt(record: CrowRecord, spec: TaskSpec, judge: int) -> str:
    """What WSV validator number ``judge`` reads about one rewrite."""
    fields = _fields(record, spec)
    question = WSV_QUESTIONS[judge % len(WSV_QUESTIONS)].format(
        context_name=spec.context_name, target_name=spec.target_name, flipped=fields["flipped"]
    )
    violated = "; ".join(str(t.verbalized) for t in required(record.violates, "violates"))
    return WSV_PROMPT.format(
        **fields, rewrite=required(record.rewrite, "rewrite"), verbalized=violated, question=question
    )


def template_hashes(styles: Sequence[PromptStyle]) -> dict[str, str]:
    """SHA-256 of each template the run may use, for the manifest."""
    texts: dict[str, str] = {}
    for style in styles:
        if style == "chat":
            texts["cka/chat"] = CKA_SYSTEM + CKA_USER
            texts["wsg/chat"] = WSG_SYSTEM + WSG_USER
        else:
            texts["cka/completion"] = CKA_PAGE_HEAD + CKA_PAGE_EXAMPLE + CKA_PAGE_ITEM
            texts["wsg/completion"] = WSG_PAGE_HEAD + WSG_PAGE_EXAMPLE + WSG_PAGE_ITEM
    texts["ckv"] = CKV_PROMPT + "".join(CKV_QUESTIONS)
    texts["wsv"] = WSV_PROMPT + "".join(WSV_QUESTIONS)
    return {name: hashlib.sha256(text.encode("utf-8")).hexdigest() for name, text in sorted(texts.items())}
