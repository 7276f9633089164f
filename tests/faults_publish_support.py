"""The helpers tests/test_faults_publish.py and tests/test_faults_publish_force.py share: a build in a child
process (tests/fault_child.py), a stage that writes one text, what is left in a store's private areas, and the
check that no half artifact is published."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kolectra.core.stage import StageOutput
from kolectra.pipeline.store.artifacts import Store

REPO = Path(__file__).resolve().parents[1]


def child(*args: str, wait: bool = True):
    cmd = [sys.executable, "-m", "tests.fault_child", *args]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if not wait:
        return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def _writes(text: str, calls: list):
    def produce(out: Path) -> StageOutput:
        calls.append(out)
        (out / "data").mkdir()
        (out / "data" / "a.txt").write_text(text)
        return StageOutput(stats={"n": len(text)})
    return produce


def _private(root: Path) -> dict[str, list[str]]:
    """What is left in the store's private areas."""
    return {d: sorted(p.name for p in (root / d).iterdir()) if (root / d).is_dir() else []
            for d in (".tmp", ".work", ".locks")}


def _no_half_artifact(store: Store) -> list:
    arts, broken = store.scan()
    assert broken == [], broken
    for art in arts:
        assert store.verify(art) == [], art.path
    return arts
