"""provider/model strings resolve to backends, with clear errors and install hints."""

from __future__ import annotations

import importlib.util
import json
from typing import ClassVar

import pytest
from pydantic import BaseModel

from senseforge.errors import ConfigError, MissingDependencyError
from senseforge.llm.base import LLM, GenerateRequest, options_identity, output_changing
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


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_output_neutral_options_are_real_fields(name: str) -> None:
    info = PROVIDERS[name]
    if info.missing():
        pytest.skip(f"{name} needs {info.missing()}")
    options = importlib.import_module(info.module).Options
    neutral = options.__dict__.get("OUTPUT_NEUTRAL")
    assert isinstance(neutral, frozenset), f"{name}: Options declares no OUTPUT_NEUTRAL frozenset"
    assert neutral <= set(options.model_fields), sorted(neutral - set(options.model_fields))
    assert "OUTPUT_NEUTRAL" not in options.model_fields  # a class variable, not an option
    assert set(output_changing(options)) == set(options.model_fields) - neutral


class _Demo(BaseModel):
    OUTPUT_NEUTRAL: ClassVar[frozenset[str]] = frozenset({"threads"})
    window: int = 512
    mode: str | None = None
    threads: int | None = None
    url: str = "http://a"


def test_options_identity_is_canonical_and_leaves_out_neutral_and_covered_fields() -> None:
    entry = options_identity(_Demo(threads=4), covered={"url"})
    assert entry == {"options": '{"mode":null,"window":512}'}  # defaults included, sorted, compact
    assert options_identity(_Demo(mode="x", window=512)) == options_identity(_Demo(window=512, mode="x"))
    assert options_identity(_Demo(window=256)) != options_identity(_Demo())
    assert json.loads(options_identity(_Demo())["options"]) == {"mode": None, "url": "http://a", "window": 512}


def test_a_class_without_declarations_has_every_option_output_changing() -> None:
    class Undeclared(BaseModel):
        threads: int = 1

    class Empty(BaseModel):
        pass

    assert output_changing(Undeclared) == ("threads",)
    assert options_identity(Empty()) == {}  # no options: no entry, the identity stays bare


def test_declaring_a_name_that_is_no_field_is_an_error() -> None:
    class Misspelt(BaseModel):
        OUTPUT_NEUTRAL: ClassVar[frozenset[str]] = frozenset({"n_thread"})
        n_threads: int = 1

    with pytest.raises(TypeError, match="n_thread"):
        output_changing(Misspelt)
    with pytest.raises(TypeError, match="nope"):
        options_identity(_Demo(), covered={"nope"})
