"""Suite-wide fixtures: an isolated senseforge home per test, and no network but loopback."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


def _is_local(address: Any) -> bool:
    if isinstance(address, (str, bytes)):  # unix socket path
        return True
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Refuse connections to anything but loopback, and keep API keys and hubs out."""
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def guarded(sock: socket.socket, address: Any) -> Any:
        if not _is_local(address):
            raise RuntimeError(f"test tried to reach the network: {address!r}")
        return real_connect(sock, address)

    def guarded_ex(sock: socket.socket, address: Any) -> Any:
        if not _is_local(address):
            raise RuntimeError(f"test tried to reach the network: {address!r}")
        return real_connect_ex(sock, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    monkeypatch.setattr(socket.socket, "connect_ex", guarded_ex)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "SENSEFORGE_STORE_URL", "SENSEFORGE_MODEL", "SENSEFORGE_PRICES"):
        monkeypatch.delenv(key, raising=False)
    yield


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder per test session where the bundled model is assembled once."""
    return tmp_path_factory.mktemp("models")


@pytest.fixture(autouse=True)
def senseforge_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, models_dir: Path) -> Path:
    """Each test gets its own store and price table; bundled models are shared."""
    home = tmp_path / "senseforge-home"
    monkeypatch.setenv("SENSEFORGE_HOME", str(home))
    monkeypatch.setenv("SENSEFORGE_MODELS", str(models_dir))
    os.environ.pop("SENSEFORGE_STORE_URL", None)
    return home
