#!/usr/bin/env python3
"""What holding the embedded model to a reply shape costs per token, with llama.cpp's grammar sampler and with
senseforge's grammar mask, against decoding with no shape at all (the model's own step: the bound).

The shapes are the recipes' own (culture-adapt's spans and item, culture-gen's items, a set of words); each is
decoded from the same prompt with the bundled Gemma 3 270M (one thread) three ways, one after the other in this
run: no grammar, llama.cpp's grammar sampler (``grammar=``), and the mask (:func:`grammar_mask`, which runs the
same grammar check only on the tokens the sampler chain can keep). It prints milliseconds per token for each, the
mask's cost over the bare step beside the sampler's, and whether every masked reply is the sampler's reply
(it exits 1 if one is not).

Example::

    .venv/bin/python benchmarks/grammar_mask.py --tokens 48
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from machine import cpu_name

SAMPLINGS = {
    "greedy": {"temperature": 0.0, "top_k": 1, "top_p": 1.0},
    "t0.7": {"temperature": 0.7, "top_k": 0, "top_p": 1.0},
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=48, help="max tokens per reply")
    parser.add_argument("--seeds", type=int, default=2, help="seeds per shape and sampling")
    args = parser.parse_args(argv)

    from llama_cpp import Llama

    from senseforge.llm.base import ReplyShape
    from senseforge.llm.providers._llamacpp_shapes import MIN_P, grammar_mask, shape_grammar
    from senseforge.llm.providers.llamacpp import bundled_model_path
    from senseforge.pipelines.culture_adapt.templates import ADAPT_SHAPE, EXTRACT_SHAPE
    from senseforge.pipelines.culture_gen.templates import GENERATE_SHAPE

    path, _ = bundled_model_path("gemma-3-270m")
    llm = Llama(model_path=str(path), n_ctx=1024, n_batch=16, n_ubatch=16, n_threads=1, seed=0, verbose=False)
    cue = "Find the culture-specific words in: Tom ate a bagel at Thanksgiving, then watched football.\nJSON:"
    cases = [
        ("culture_adapt_spans", EXTRACT_SHAPE, cue),
        ("culture_adapt_item", ADAPT_SHAPE, cue),
        ("culture_gen_items", GENERATE_SHAPE, "Tulis tiga soal tentang rendang dalam JSON.\nJawaban:"),
        ("verdict", ReplyShape.one_of("verdict", ["yes", "no", "unsure"]), "Is the sky green?\nAnswer:"),
    ]
    totals = {"none": [0.0, 0], "grammar sampler": [0.0, 0], "mask": [0.0, 0]}
    same = True

    def timed(mode: str, prompt: str, kwargs: dict[str, Any], params: dict[str, Any]) -> str:
        llm.reset()
        started = time.perf_counter()
        out = llm.create_completion(prompt, **kwargs, **params)
        totals[mode][0] += time.perf_counter() - started
        totals[mode][1] += out["usage"]["completion_tokens"]
        return str(out["choices"][0]["text"])

    for name, shape, prompt in cases:
        grammar = shape_grammar(shape, completion=True)
        for sampling in SAMPLINGS.values():
            for seed in range(args.seeds):
                params = {"max_tokens": args.tokens, "seed": seed, "repeat_penalty": 1.0, "min_p": MIN_P, **sampling}
                timed("none", prompt, {}, params)
                native = timed("grammar sampler", prompt, {"grammar": grammar}, params)
                with grammar_mask(llm, grammar, params) as masking:
                    masked = timed("mask", prompt, masking, params)
                if masked != native:
                    same = False
                    print(f"DIFFERENT: {name} {sampling} seed {seed}: {native!r} vs {masked!r}", file=sys.stderr)
    llm.close()
    per_token = {mode: 1000 * seconds / max(tokens, 1) for mode, (seconds, tokens) in totals.items()}
    bare = per_token["none"]
    print(f"CPU: {cpu_name()}; Gemma 3 270M (Q4_K_M), 1 thread; {len(cases)} shapes x {len(SAMPLINGS)} samplings")
    print(f"x {args.seeds} seeds, up to {args.tokens} tokens each")
    print(f"{'decoding':<18}{'ms/token':>10}{'over the bare step':>22}")
    for mode, value in per_token.items():
        print(f"{mode:<18}{value:>10.1f}{value / bare:>21.2f}x")
    extra_sampler, extra_mask = per_token["grammar sampler"] - bare, per_token["mask"] - bare
    print(f"the mask's cost per token is {extra_mask / extra_sampler:.2f} of the grammar sampler's")
    print(f"masked replies identical to the grammar sampler's: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
