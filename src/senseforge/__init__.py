"""senseforge: build and evaluate commonsense-reasoning benchmarks grounded in a language and its culture."""

from senseforge._version import __version__
from senseforge.data.schema import BinaryExample, Choice, Judgement, MCItem, Provenance, QuestionSet, Triple
from senseforge.errors import (
    BackendError,
    ConfigError,
    DataValidationError,
    MissingDependencyError,
    SenseforgeError,
    StoreError,
)

__all__ = [
    "BackendError",
    "BinaryExample",
    "Choice",
    "ConfigError",
    "DataValidationError",
    "Judgement",
    "MCItem",
    "MissingDependencyError",
    "Provenance",
    "QuestionSet",
    "SenseforgeError",
    "StoreError",
    "Triple",
    "__version__",
]
