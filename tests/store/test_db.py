"""The store: cache rows written once, ledger appends, memoized file digests."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest

from senseforge.errors import StoreError
from senseforge.store.db import CacheRow, LedgerRow, Store, default_store_url


def _row(key: str, response: str = "{}") -> CacheRow:
    return CacheRow(key=key, provider="p", model="p/m", kind="generate", request="{}", response=response)


def test_default_url_follows_senseforge_home(senseforge_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_store_url() == f"sqlite:///{senseforge_home / 'senseforge.db'}"
    monkeypatch.setenv("SENSEFORGE_STORE_URL", "sqlite:///elsewhere.db")
    assert default_store_url() == "sqlite:///elsewhere.db"


def test_first_response_wins_and_duplicates_do_not_fail(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    store.cache_put([_row("k1", '{"a": 1}'), _row("k1", '{"a": 2}')])
    store.cache_put([_row("k1", '{"a": 3}'), _row("k2")])
    assert store.cache_get(["k1", "k2", "k3"]) == {"k1": '{"a": 1}', "k2": "{}"}


def test_concurrent_writers_store_each_key_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    Store(url)
    errors: list[BaseException] = []

    def write(offset: int) -> None:
        try:
            store = Store(url)
            store.cache_put([_row(f"k{i}") for i in range(offset, offset + 50)])
            store.ledger_add(
                [LedgerRow(ts=0.0, provider="p", model="p/m", kind="generate", cache_key="k", cache_hit=False)]
            )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(offset,)) for offset in (0, 25, 10, 40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    store = Store(url)
    assert len(store.cache_get([f"k{i}" for i in range(200)])) == 90
    assert len(store.ledger_rows()) == 4


def test_file_digest_is_memoized_and_refreshed_on_change(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    weights = tmp_path / "w.bin"
    weights.write_bytes(b"abc")
    assert store.file_digest(weights) == hashlib.sha256(b"abc").hexdigest()
    weights.write_bytes(b"abcd")
    os.utime(weights, ns=(1, 1))
    assert store.file_digest(weights) == hashlib.sha256(b"abcd").hexdigest()


def test_unopenable_store_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="cannot open the store"):
        Store(f"sqlite:///{blocker / 'sub' / 'x.db'}")
