"""What tests/test_faults_store_r4.py and tests/test_faults_store_r4_manifests.py share: the short lease,
the autouse fixture that gives each test its own cache and that lease (imported into each module, it
applies to its tests), and the toy request both build."""

from __future__ import annotations

import pytest

LEASE = 3.0
FAST_LEASE = {"KOLECTRA_LEASE_SECONDS": str(LEASE), "KOLECTRA_LEASE_POLL_SECONDS": "0.2"}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))
    for k, v in FAST_LEASE.items():
        monkeypatch.setenv(k, v)


def _toy_request():
    from kolectra.core.stage import StageOutput
    from kolectra.pipeline.store.request import Request

    def produce(out):
        (out / "data").mkdir()
        (out / "data" / "a.txt").write_text("x")
        return StageOutput(stats={"n": 1})

    return Request(kind="corpus", name="toy", stage_version=1, config={"text": "x"}), produce
