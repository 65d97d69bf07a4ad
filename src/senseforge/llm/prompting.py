"""How an instruction reaches a model: through its own chat template, or as plain text it continues.

A model either has a chat template (an instruction-tuned GGUF or tokenizer, a chat API)
or it does not (a base model). Chat turns sent to a base model are wrapped by whatever
fallback the serving library picks (llama-cpp-python's is Llama 2's ``<<SYS>> … [/INST]``),
and the model then continues that foreign markup instead of answering. So the decision is
made once per model, from what the provider declares (:func:`chat_template`), and every
path that asks a model for text goes through :func:`fit`: a model with a template gets
the chat turns, a model without one gets a completion prompt with the instruction written
into the text and stop sequences that end the answer. Providers refuse chat turns they
cannot template rather than fall back.

:func:`sent` records exactly what went out, for ``samples.jsonl``; :func:`diagnose` reads
a batch of replies and names the likely cause when they look wrong as a whole (every
reply cut at the token limit, or replies echoing a chat template's markers).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from senseforge.llm.base import Completion, GenerateRequest, Message

UNKNOWN_TEMPLATE = "unknown"
"""What :func:`chat_template` answers for a backend that does not say (it is treated as a chat model)."""

DEFAULT_STOP: tuple[str, ...] = ("\n\n",)
"""Where a completion-style answer ends unless the caller says otherwise: at the first blank line, before
a base model goes on to write the next question of its own."""

TEMPLATE_MARKERS: dict[str, tuple[str, ...]] = {
    "llama-2": ("<<SYS>>", "<</SYS>>", "[INST]", "[/INST]"),
    "chatml": ("<|im_start|>", "<|im_end|>"),
    "gemma": ("<start_of_turn>", "<end_of_turn>"),
    "llama-3": ("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"),
    "phi-3/zephyr": ("<|system|>", "<|user|>", "<|assistant|>", "<|end|>"),
    "deepseek": ("<｜User｜>", "<｜Assistant｜>"),
    "alpaca": ("### Instruction:", "### Response:"),
}
"""Markup of the common chat-template families; a reply holding any of it echoes a template."""
_MARKER_STARTS = frozenset(marker[0] for markers in TEMPLATE_MARKERS.values() for marker in markers)


def chat_template(llm: object) -> str | None:
    """The name of the chat template a model's chat turns go through, or ``None`` for a base model.

    Asks the backend's ``chat_template()`` (every built-in provider has one, wrappers pass it
    on). A backend without the method is taken for a chat model (:data:`UNKNOWN_TEMPLATE`).

    >>> class Base:
    ...     def chat_template(self) -> None:
    ...         return None
    >>> chat_template(Base()) is None
    True
    >>> chat_template(object())
    'unknown'
    """
    probe = getattr(llm, "chat_template", None)
    if not callable(probe):
        return UNKNOWN_TEMPLATE
    name = probe()
    return None if name is None else str(name)


def completion_text(messages: Sequence[Message]) -> str:
    """Chat turns as one plain text a base model continues: the instruction first, each turn a paragraph.

    A system turn and user turns are written as they are; an assistant turn (a worked
    example) follows the user turn it answers, on the next line, so the last user turn's
    own cue (``Answer:``) is where the model goes on.

    >>> completion_text([Message(role="system", content="Answer briefly."), Message(role="user", content="Q?\\nA:")])
    'Answer briefly.\\n\\nQ?\\nA:'
    >>> completion_text([Message(role="user", content="2+2 =")])
    '2+2 ='
    """
    parts: list[str] = []
    for message in messages:
        text = message.content.strip("\n")
        if message.role == "assistant" and parts:
            parts[-1] = f"{parts[-1]} {text}" if parts[-1].endswith(":") else f"{parts[-1]}\n{text}"
        else:
            parts.append(text)
    return "\n\n".join(parts)


def fit(
    request: GenerateRequest, template: str | None, *, stop: Sequence[str] = DEFAULT_STOP, cue: str = ""
) -> GenerateRequest:
    """The request as this model should get it.

    A model with a template (``template`` not ``None``) and a plain prompt pass unchanged.
    Chat turns for a model without one become a completion prompt (:func:`completion_text`)
    that keeps the sampling settings and adds ``stop`` to the request's own stop sequences; ``cue``
    (e.g. ``"\\nVerdict:"``) ends the text where the last turn asks a question without an answer cue.
    A JSON request keeps ``json_mode`` (backends constrain the output where they can).

    >>> chat = GenerateRequest.chat("Q: 2+2?\\nA:", system="Answer with a number.")
    >>> fit(chat, "chatml") is chat
    True
    >>> plain = fit(chat, None)
    >>> plain.prompt, plain.stop
    ('Answer with a number.\\n\\nQ: 2+2?\\nA:', ('\\n\\n',))
    """
    if template is not None or request.messages is None:
        return request
    stops = tuple(dict.fromkeys([*request.stop, *stop]))
    text = completion_text(request.messages) + cue
    return request.model_copy(update={"prompt": text, "messages": None, "stop": stops})


def fit_for(
    llm: object, request: GenerateRequest, *, stop: Sequence[str] = DEFAULT_STOP, cue: str = ""
) -> GenerateRequest:
    """:func:`fit` for the model behind ``llm``."""
    return fit(request, chat_template(llm), stop=stop, cue=cue)


def sent(request: GenerateRequest, template: str | None) -> dict[str, Any]:
    """What went out, as ``samples.jsonl`` records it.

    ``{"kind": "completion", "text": …, "stop": […]}`` for a plain prompt, or
    ``{"kind": "chat", "messages": [{"role", "content"}…], "template": name}`` for chat turns.

    >>> sent(GenerateRequest(prompt="Q:", stop=("\\n",)), None)
    {'kind': 'completion', 'text': 'Q:', 'stop': ['\\n']}
    """
    if request.messages is None:
        return {"kind": "completion", "text": request.prompt, "stop": list(request.stop)}
    return {
        "kind": "chat",
        "messages": [message.model_dump() for message in request.messages],
        "template": template or UNKNOWN_TEMPLATE,
    }


def template_marker(text: str) -> str | None:
    """The chat-template family whose markup ``text`` holds, or ``None``.

    >>> template_marker("Answer.\\n<</SYS>> Question: …")
    'llama-2'
    >>> template_marker("B") is None
    True
    """
    if not any(start in text for start in _MARKER_STARTS):
        return None  # most replies: none of the markers' first characters
    for family, markers in TEMPLATE_MARKERS.items():
        if any(marker in text for marker in markers):
            return family
    return None


def diagnose(
    replies: Sequence[Completion], *, model: str, max_tokens: int | None = None, template: str | None = UNKNOWN_TEMPLATE
) -> str | None:
    """One line naming the likely cause when a batch of replies looks wrong as a whole, else ``None``.

    Two signs, each over the replies that came back: at least half of them holding a chat
    template's markup; or every one of them (at least two) cut at the token limit. For a
    model taken for a chat model (``template`` not ``None``) both mean, most often, a base
    model sent chat turns through a template it does not have; for a model already sent
    completion prompts, cut replies mean the answer did not end where the stop sequences
    expected.

    >>> cut = [Completion(text="x", finish_reason="length")] * 3
    >>> diagnose(cut, model="openai/gemma", max_tokens=32, template="server").split(":")[0]
    'every reply (3 of 3) hit the token limit (32)'
    >>> diagnose([Completion(text="B", finish_reason="stop")] * 3, model="openai/gemma") is None
    True
    """
    answered = [reply for reply in replies if reply.ok]
    if not answered:
        return None
    declare = (
        f"if {model} is a base model, declare it (-o api=completions behind an OpenAI-compatible server; a GGUF or "
        "model folder without a chat template is recognised) so that it gets completion prompts"
    )
    families = [family for family in (template_marker(reply.text) for reply in answered) if family]
    if families and 2 * len(families) >= len(answered):
        family = max(set(families), key=families.count)
        return (
            f"{len(families)} of {len(answered)} replies echo {family} chat-template markup: the model was sent "
            f"chat turns through a template it does not know; {declare}"
        )
    if len(answered) >= 2 and all(reply.finish_reason == "length" for reply in answered):
        limit = f" ({max_tokens})" if max_tokens else ""
        head = f"every reply ({len(answered)} of {len(answered)}) hit the token limit{limit}"
        if template is None:
            return f"{head}: {model} ran on past where an answer ends; raise the limit or check the stop sequences"
        return f"{head}: the model did not stop where an answer ends; {declare}, or raise the limit"
    return None
