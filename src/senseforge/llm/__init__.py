"""The LM layer: one batch-first protocol, providers behind ``provider/model`` strings, a cache and a ledger."""

from senseforge.llm.base import (
    LLM,
    Completion,
    Failure,
    GenerateRequest,
    Loglikelihood,
    LoglikelihoodRequest,
    Message,
)
from senseforge.llm.jsonx import JSONExtractionError, extract_json
from senseforge.llm.registry import DEFAULT_MODEL, get_llm, parse_spec

__all__ = [
    "DEFAULT_MODEL",
    "LLM",
    "Completion",
    "Failure",
    "GenerateRequest",
    "JSONExtractionError",
    "Loglikelihood",
    "LoglikelihoodRequest",
    "Message",
    "extract_json",
    "get_llm",
    "parse_spec",
]
