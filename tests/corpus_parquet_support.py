"""The autouse fixtures tests/test_corpus_parquet.py and tests/test_corpus_parquet_batches.py share: the
default verbosity and a cache folder of the test's own (imported into each module, they apply to its tests)."""

from __future__ import annotations

import pytest

from kolectra.core import verbosity


@pytest.fixture(autouse=True)
def _verbosity(monkeypatch):
    monkeypatch.setenv(verbosity.ENV, str(verbosity.NORMAL))


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))
