"""provider/model strings resolve to backends, with clear errors and install hints."""

from __future__ import annotations

import importlib.util

import pytest

from senseforge.errors import ConfigError, MissingDependencyError
from senseforge.llm.base import LLM, GenerateRequest
from senseforge.llm.registry import PROVIDERS, get_llm, parse_spec


def test_parse_spec_keeps_slashes_in_model_names() -> None:
    assert parse_spec("openai/Qwen/Qwen2.5-7B-Instruct") == ("openai", "Qwen/Qwen2.5-7B-Instruct")
    assert parse_spec("llamacpp/gemma-3-270m") == ("llamacpp", "gemma-3-270m")


@pytest.mark.parametrize("spec", ["nope/x", "gpt-4o", "", "llamacpp", "llamacpp/"])
def test_bad_specs_are_config_errors(spec: str) -> None:
    with pytest.raises(ConfigError):
        get_llm(spec)


def test_missing_dependency_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "openai" else real(name, *a))
    with pytest.raises(MissingDependencyError, match=r"pip install 'senseforge\[openai\]'"):
        get_llm("openai/gpt-4o-mini")


def test_unknown_option_is_rejected() -> None:
    with pytest.raises(ConfigError, match="bad options for provider 'scripted'"):
        get_llm("scripted/echo", {"temperature": 1})


def test_scripted_backend_satisfies_the_protocol() -> None:
    llm = get_llm("scripted/echo")
    assert isinstance(llm, LLM)
    assert llm.generate([GenerateRequest(prompt="ping", stop=("n",))])[0].text == "pi"


def test_every_provider_module_exposes_options_and_create() -> None:
    for info in PROVIDERS.values():
        if info.missing():
            continue
        module = importlib.import_module(info.module)
        assert hasattr(module, "Options") and callable(module.create), info.name
        assert module.Options.model_config.get("extra") == "forbid", info.name
