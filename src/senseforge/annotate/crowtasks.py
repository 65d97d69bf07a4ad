"""CRoW's validation task types: people tick knowledge triples (``ckv``) and check rewrites (``wsv``).

``ckv``
    One triple of a (context, target) pair, shown with the pair: does it hold as common
    sense, and does it link the two? ``accept`` (yes/no) and an optional comment. Votes
    combine as CRoW's: a triple is kept with at least two ticks of three.
``wsv``
    A rewrite beside the original target and the triples it should break, with CRoW's four
    conditions each ticked or not: ``minimal`` (few words changed), ``violates`` (it goes
    against the knowledge), ``flips`` (it is the opposite label for the task), ``on_topic``.
    The rewrite is accepted when all four hold. A form sends the ticked ones as repeated
    ``conditions`` fields; JSON may send ``{"conditions": {"minimal": true, …}}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from senseforge.annotate.fields import InvalidSubmission, comment_of, values_of, yes_no
from senseforge.data.schema import (
    SCHEMA_CONDITIONS,
    CrowPair,
    Judgement,
    KnowledgeCheckItem,
    KnowledgeCheckJudgement,
    RewriteCheckItem,
    SchemaCheckJudgement,
)
from senseforge.evaluate.policies import Policy, parse_policy

CONDITION_TEXTS: dict[str, str] = {
    "minimal": "Only a few words differ from the original",
    "violates": "It goes against the knowledge",
    "flips": "For this task it is the opposite of the original",
    "on_topic": "It stays on the topic of the context",
}
"""What each of CRoW's four conditions asks, as the page shows it."""


def _pair_view(item: CrowPair) -> dict[str, Any]:
    return {
        "id": item.id,
        "task": item.task,
        "lang": item.lang,
        "context_name": item.context_name,
        "context": item.context,
        "target_name": item.target_name,
        "target": item.target,
        "label": item.label,
    }


class CheckKnowledge:
    """CKV by people: tick a triple that holds and links the pair."""

    name: str = "ckv"
    input_model: type[BaseModel] = KnowledgeCheckItem
    policy: Policy | None = parse_policy("at-least:2/3")

    def view(self, task: KnowledgeCheckItem) -> dict[str, Any]:
        return {**_pair_view(task), "triple": task.triple.model_dump(mode="json")}

    def parse(self, task: KnowledgeCheckItem, fields: Mapping[str, Any]) -> Judgement:
        problems: list[str] = []
        accept = yes_no(fields, "accept", problems, required=True)
        comment = comment_of(fields, "comment", problems)
        if problems or accept is None:
            raise InvalidSubmission(problems)
        return KnowledgeCheckJudgement(item_id=task.id, annotator="?", accept=accept, comment=comment)


def _conditions(fields: Mapping[str, Any], problems: list[str]) -> dict[str, bool]:
    raw = fields.get("conditions")
    if isinstance(raw, Mapping):
        unknown = sorted(set(map(str, raw)) - set(SCHEMA_CONDITIONS))
        if unknown:
            problems.append(f"conditions: unknown {unknown[:4]} (known: {', '.join(SCHEMA_CONDITIONS)})")
        ticked: dict[str, bool] = {}
        for name in SCHEMA_CONDITIONS:
            value = raw.get(name)
            if not isinstance(value, bool):
                problems.append(f"conditions.{name}: required (true or false)")
            else:
                ticked[name] = value
        return ticked
    given = values_of(fields, "conditions")
    unknown = sorted(set(given) - set(SCHEMA_CONDITIONS))
    if unknown:
        problems.append(f"conditions: unknown {unknown[:4]} (known: {', '.join(SCHEMA_CONDITIONS)})")
    return {name: name in given for name in SCHEMA_CONDITIONS}


class CheckSchema:
    """WSV by people: CRoW's four conditions on a rewrite, each ticked or not."""

    name: str = "wsv"
    input_model: type[BaseModel] = RewriteCheckItem
    policy: Policy | None = parse_policy("at-least:2/3")

    def view(self, task: RewriteCheckItem) -> dict[str, Any]:
        return {
            **_pair_view(task),
            "rewrite": task.rewrite,
            "flipped": task.flipped,
            "violates": [t.model_dump(mode="json") for t in task.violates],
            "edits": task.edits,
            "flags": list(task.flags),
            "conditions": [{"name": name, "text": CONDITION_TEXTS[name]} for name in SCHEMA_CONDITIONS],
        }

    def parse(self, task: RewriteCheckItem, fields: Mapping[str, Any]) -> Judgement:
        problems: list[str] = []
        conditions = _conditions(fields, problems)
        comment = comment_of(fields, "comment", problems)
        if problems:
            raise InvalidSubmission(problems)
        return SchemaCheckJudgement(
            item_id=task.id, annotator="?", accept=all(conditions.values()), conditions=conditions, comment=comment
        )
