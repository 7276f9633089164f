"""What tests/test_store_s3*.py share: each test's own cache (``KOLECTRA_CACHE``, autouse where imported),
a short lease, and a fault child or a kolectra command in a process of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

FAST_LEASE = {"KOLECTRA_LEASE_SECONDS": "3", "KOLECTRA_LEASE_POLL_SECONDS": "0.2"}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))


def _child(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tests.fault_child", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **FAST_LEASE, **(env or {})},
                          cwd=Path(__file__).resolve().parents[1])


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})
