"""The line counting the interrupted runs of the same inputs names the root the user gave and the settings that
differ. ``kolectra pretrain --resume --steps 300 --out s3://bucket/k`` over a run stopped at ``--steps 200`` starts
fresh (a bucket root resumes only the exact request) and said '1 interrupted run(s) of the same inputs kept in
/root/.cache/kolectra/roots/<hash>/.work, the newest with other settings': this machine's cache, not the bucket,
and not which settings (h5's report, item 13). It now names ``s3://bucket/k/.work`` and ``train.steps 200 -> 300``;
on a disk root too, where a fresh run says the same line."""

from __future__ import annotations

from pathlib import Path

import pytest

from kolectra.core.errors import Terminated
from kolectra.core.stage import StageOutput
from kolectra.pipeline.store import workspace
from kolectra.pipeline.store.artifacts import Resumable
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.request import Request
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)

FAMILY = {"kind": "checkpoint", "examples": "e", "preset": "tiny"}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))


def _pretrain(root: str, train: dict, *, resume: bool = False, stop: bool = False) -> None:
    """A checkpoint request built as stages.pretrain builds it (the store's part real); ``stop``: stopped after
    saving step 21."""
    def produce(out: Path) -> StageOutput:
        if stop:
            (out / "checkpoints" / "step-00000021").mkdir(parents=True, exist_ok=True)
            (out / "checkpoints" / "step-00000021" / "state.pt").write_bytes(b"x")
            raise Terminated("terminated (SIGTERM) after step 21, saved as the checkpoint step-00000021")
        (out / "metrics.json").write_text("{}")
        return StageOutput(stats={})
    request = Request(kind="checkpoint", name="p", stage_version=1, config={"preset": "tiny", "train": train})
    build = open_store(root).build
    if stop:
        with pytest.raises(Terminated):
            build(request, produce, resumable=Resumable(family=FAMILY, scratch=("checkpoints",)), resume=resume)
    else:
        build(request, produce, resumable=Resumable(family=FAMILY, scratch=("checkpoints",)), resume=resume)


def _kept_line(err: str) -> str:
    return next(x for x in err.splitlines() if "interrupted run(s) of the same inputs kept in" in x)


def test_a_bucket_root_names_the_bucket_s_work_and_the_settings_that_differ(bucket, tmp_path, capsys):
    root = f"{bucket}/k"
    _pretrain(root, {"steps": 200, "lr": 0.001}, stop=True)
    capsys.readouterr()
    _pretrain(root, {"steps": 300, "lr": 0.001}, resume=True)  # another request: starts fresh
    line = _kept_line(capsys.readouterr().err)
    assert f"kept in {root}/.work, the newest with other settings (train.steps 200 -> 300); " in line, line
    assert str(tmp_path / "cache") not in line and "only this request's run is resumed here" in line, line


def test_a_disk_root_names_the_settings_that_differ_a_few_then_how_many_more(tmp_path, capsys):
    root = tmp_path / "root"
    _pretrain(str(root), {"steps": 200, "lr": 0.001, "batch": 8, "seed": 1, "warmup": 10}, stop=True)
    capsys.readouterr()
    _pretrain(str(root), {"steps": 300, "lr": 0.002, "batch": 16, "seed": 1, "mask": "x"})  # fresh, without --resume
    line = _kept_line(capsys.readouterr().err)
    assert (f"kept in {root / workspace.WORK}, the newest with other settings (train.batch 8 -> 16, train.lr 0.001 "
            '-> 0.002, train.mask (unset) -> "x" and 2 more); --resume continues it; ') in line, line
