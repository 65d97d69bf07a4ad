"""Generation of the ``hf`` provider (:mod:`senseforge.llm.providers.hf`): prompts, decoding, stop strings.

One request at a time, so that each request keeps its own sampling parameters and seed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from senseforge.llm.base import Completion, GenerateRequest

if TYPE_CHECKING:
    import torch


class NoChatTemplateError(ValueError):
    """Chat turns for a tokenizer without a chat template (a base model): they are refused, never wrapped in
    a made-up template."""


def earliest_stop(text: str, stops: Sequence[str]) -> int | None:
    """Index of the first place where any stop string starts, or None.

    >>> earliest_stop("a.b,c", [",", "."])
    1
    >>> earliest_stop("abc", ["x"]) is None
    True
    """
    found = [text.find(stop) for stop in stops if stop]
    hits = [index for index in found if index >= 0]
    return min(hits) if hits else None


def prompt_tokens(tokenizer: Any, request: GenerateRequest, empty_context: Sequence[int]) -> list[int]:
    """Prompt tokens: a chat goes through the chat template (refused without one, see :class:`NoChatTemplateError`).

    An empty prompt becomes ``empty_context`` (BOS, or EOS when there is no BOS).
    """
    if request.messages is not None:
        if not getattr(tokenizer, "chat_template", None):
            raise NoChatTemplateError(
                "the tokenizer has no chat template (a base model): send it a plain prompt "
                "(senseforge.llm.prompting.fit)"
            )
        turns = [{"role": m.role, "content": m.content} for m in request.messages]
        text = tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)
        # the template writes its own BOS
        tokens = [int(t) for t in tokenizer.encode(str(text), add_special_tokens=False)]
    else:
        assert request.prompt is not None
        tokens = [int(t) for t in tokenizer.encode(request.prompt, add_special_tokens=True)]
    return tokens or list(empty_context)


def eos_ids(model: Any, tokenizer: Any) -> set[int]:
    """The tokens that end generation: the model's generation config, else the tokenizer's EOS."""
    eos = model.generation_config.eos_token_id
    if eos is None:
        eos = tokenizer.eos_token_id
    if eos is None:
        return set()
    return {int(e) for e in eos} if isinstance(eos, list | tuple) else {int(eos)}


def generate_one(
    model: Any,
    tokenizer: Any,
    device: torch.device,
    request: GenerateRequest,
    *,
    empty_context: Sequence[int],
    stop_strings_ok: bool,
) -> Completion:
    """Generate the completion of one request (see :meth:`senseforge.llm.providers.hf.HFLLM.generate`).

    Args:
        model: the loaded model.
        tokenizer: its tokenizer.
        device: the device the model is on.
        request: the request.
        empty_context: the prompt tokens used when the prompt encodes to none.
        stop_strings_ok: whether transformers can stop on strings with this tokenizer; stop
            strings always cut the text.
    """
    import torch
    from transformers import GenerationConfig

    began = time.perf_counter()
    prompt = prompt_tokens(tokenizer, request, empty_context)
    stops = [stop for stop in request.stop if stop]
    pad = model.generation_config.pad_token_id
    if pad is None:
        pad = tokenizer.pad_token_id
    if pad is None:
        pad = min(eos_ids(model, tokenizer) or {0})
    # the request's knobs, and those that would bend greedy decoding, override the checkpoint's defaults
    settings: dict[str, Any] = {
        "max_new_tokens": request.max_tokens,
        "min_new_tokens": 0,
        "num_beams": 1,
        "repetition_penalty": 1.0,
        "pad_token_id": int(pad),
    }
    if request.temperature == 0:
        settings["do_sample"] = False  # greedy: sampling knobs are not read
    else:
        settings.update(do_sample=True, temperature=request.temperature, top_p=request.top_p, top_k=0)
    use_stop_strings = bool(stops) and stop_strings_ok
    if use_stop_strings:
        settings["stop_strings"] = stops
    make_config: Any = GenerationConfig  # untyped in transformers
    config = make_config(**settings)

    processors: Any = None
    holder = None
    if request.reply_shape is not None:
        from transformers import LogitsProcessorList

        from senseforge.llm.providers._hf_shapes import shape_processor

        holder = shape_processor(tokenizer, request.reply_shape, len(prompt), completion=request.prompt is not None)
        processors = LogitsProcessorList([holder]) if holder is not None else None
    input_ids = torch.tensor([prompt], dtype=torch.long, device=device)
    rng_devices = [] if device.type == "cpu" else [device.index or 0]
    device_type = None if device.type == "cpu" else device.type
    with torch.inference_mode(), torch.random.fork_rng(devices=rng_devices, device_type=device_type):
        if request.seed is not None:
            torch.manual_seed(request.seed)
        output = model.generate(
            input_ids=input_ids,
            attention_mask=torch.ones_like(input_ids),
            generation_config=config,
            tokenizer=tokenizer if use_stop_strings else None,
            logits_processor=processors,
        )
    new_tokens = [int(t) for t in output[0, len(prompt) :].tolist()]
    text = str(tokenizer.decode(new_tokens, skip_special_tokens=True))
    cut = earliest_stop(text, stops)
    if cut is not None:
        text, finish = text[:cut], "stop"
    elif new_tokens and new_tokens[-1] in eos_ids(model, tokenizer):
        finish = "stop"
    elif len(new_tokens) >= request.max_tokens:
        finish = "length"
    else:
        finish = "stop"
    return Completion(
        text=text,
        finish_reason=finish,
        tokens_in=len(prompt),
        tokens_out=len(new_tokens),
        latency_s=time.perf_counter() - began,
        constrained=None if request.reply_shape is None else holder is not None,
    )
