"""The local build directories of a store root's stages (fine-tuning, a vocabulary: built on this machine, then
uploaded), on moto's S3 server on 127.0.0.1: one a process killed outright left (``kill -9``, an out-of-memory
kill) is removed by ``kolectra artifacts gc``; a live build's is not.

Before: they were made in ``$KOLECTRA_CACHE/.tmp/``, which nothing swept (``gc`` of the root swept the root's
own folder of the cache, ``$KOLECTRA_CACHE/roots/<hash>/``), and unmarked, so no sweep could have told a live
one from a dead one: every killed build stayed there for good, ``gc`` saying ``0 removed``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from kolectra.pipeline.cli import main
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)

HERE = Path(__file__).resolve().parents[1]


def _toy(root: str, cache: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "KOLECTRA_CACHE": str(cache), "KOLECTRA_LEASE_SECONDS": "3",
           "KOLECTRA_LEASE_POLL_SECONDS": "0.2"}
    return subprocess.Popen([sys.executable, "-m", "tests.fault_child", "toy", root, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=HERE)


def _builds(cache: Path) -> list[Path]:
    """The build directories under the cache: wherever they are made (``.tmp`` at any depth)."""
    return sorted(d for tmp in cache.rglob(".tmp") for d in tmp.iterdir()) if cache.is_dir() else []


def test_gc_removes_the_local_build_a_killed_process_left_and_keeps_a_live_one(bucket, tmp_path,
                                                                               monkeypatch):  # noqa: F811
    root, cache = f"{bucket}/r", tmp_path / "cache"
    monkeypatch.setenv("KOLECTRA_CACHE", str(cache))
    killed = _toy(root, cache, "produced", "--text", "killed")
    killed.communicate(timeout=300)
    assert killed.returncode == -9
    left = _builds(cache)
    assert len(left) == 1 and (left[0] / "data" / "a.txt").read_text() == "killed", left
    live = _toy(root, cache, "none", "--text", "live", "--hold", str(tmp_path / "go"))
    try:
        deadline = time.monotonic() + 120
        while len(_builds(cache)) < 2:
            assert time.monotonic() < deadline and live.poll() is None
            time.sleep(0.05)
        building = [d for d in _builds(cache) if d != left[0]]
        assert main(["artifacts", "gc", "--out", root]) == 0
        assert _builds(cache) == building  # the dead one gone, the live one kept
    finally:
        (tmp_path / "go").write_text("go")
    out, err = live.communicate(timeout=300)
    assert live.returncode == 0, err
    assert _builds(cache) == []
