"""A scripted run of culture-adapt with a verification panel (``scripted/<this file>:<function>``).

:func:`respond` stands in for every model stage: no names or places, every element familiar to the culture (so
nothing is rewritten), and translation that returns the text, but for options translated into Sundanese, which
gain `` (su)`` (so the panel's members can tell the languages apart). The members score choices (log-likelihood
requests: the question as context, the option as continuation); each item's first option (``A``) is its answer:

* :func:`knows` prefers the answer, but for the ``sleep`` item in Sundanese (the third option);
* :func:`reads_id` prefers the answer in Indonesian, the second option in Sundanese;
* :func:`misses` always prefers the second option.
"""

from __future__ import annotations

from senseforge.llm.base import GenerateRequest, LoglikelihoodRequest
from senseforge.pipelines.culture_adapt.templates import OPENINGS, RELEVANCE_TEMPLATES

OPTIONS: dict[str, tuple[str, ...]] = {
    "rain": ("water", "sand", "fire", "smoke", "glass"),
    "cold": ("coat", "sandals", "ice", "fan", "towel"),
    "sleep": ("bed", "roof", "oven", "sink", "road"),
}
"""Each item's options, in order, by its concept (the answer first)."""
SU = " (su)"


def items() -> list[dict[str, object]]:
    """The source items (CommonsenseQA's shape), one per concept."""
    questions = {
        "rain": "What falls from the sky in the rain?",
        "cold": "What do you wear in the cold?",
        "sleep": "Where do you sleep at night?",
    }
    return [
        {
            "id": f"s-{concept}",
            "question": questions[concept],
            "question_concept": concept,
            "choices": {"label": list("ABCDE"), "text": list(options)},
            "answerKey": "A",
        }
        for concept, options in OPTIONS.items()
    ]


def respond(request: GenerateRequest) -> str:
    messages = request.as_messages()
    system = messages[0].content if messages[0].role == "system" else ""
    user = messages[-1].content
    if system.startswith(OPENINGS["extract"][0]):
        return '{"names": [], "places": []}'
    if system.startswith(OPENINGS["translate"][0]):
        field, text = user.split("\n", 1)
        into_sundanese = "into Sundanese" in system
        return text + SU if into_sundanese and field.startswith("Answer option") and not text.endswith(SU) else text
    index = next(i for i, (text, _) in enumerate(RELEVANCE_TEMPLATES) if user.startswith(text.split("{culture}")[0]))
    return "Yes." if RELEVANCE_TEMPLATES[index][1] else "No."  # familiar, in the prompt's polarity


def _prefers(request: LoglikelihoodRequest, rank: int) -> float:
    option = request.continuation.strip().removesuffix(SU.strip()).strip()
    concept = next(c for c in OPTIONS if c in request.context)
    return 0.0 if OPTIONS[concept][rank] == option else -8.0


def _sundanese(request: LoglikelihoodRequest) -> bool:
    return request.continuation.rstrip().endswith(SU.strip())


def knows(request: LoglikelihoodRequest) -> float:
    wrong = _sundanese(request) and "sleep" in request.context
    return _prefers(request, 2 if wrong else 0)


def reads_id(request: LoglikelihoodRequest) -> float:
    return _prefers(request, 1 if _sundanese(request) else 0)


def misses(request: LoglikelihoodRequest) -> float:
    return _prefers(request, 1)
