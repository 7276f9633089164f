"""``kolectra artifacts gc`` on a bucket root, of a pretraining run stopped before its first checkpoint was copied.

Such a run leaves ``ROOT/.work/checkpoint-<id>/request.json`` alone in the store (its local run, holding
nothing, goes): gc kept it as 'kept interrupted run ... (electra-tiny, 0.0 MB): --resume continues it; gc
--interrupted removes it', and --resume then said 'checkpoint: nothing to resume for this request; starting
fresh'. As on a disk root (db67b3d), a run holding nothing to continue is removed now; one with a checkpoint's
object in the store, or working state in this machine's cache (its copy to the store never completed), is kept."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kolectra.core import storage
from kolectra.pipeline.store.artifacts import Resumable
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.request import Request
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)

SCRATCH = Resumable(family={"kind": "checkpoint"}, scratch=("checkpoints",))


@pytest.mark.parametrize("held", ["nothing", "a local checkpoint", "a checkpoint's object"])
def test_gc_keeps_a_stopped_run_on_a_bucket_only_if_it_holds_something_to_continue(bucket, tmp_path, monkeypatch,
                                                                                     held):
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))
    root = f"{bucket}/gc-{held.split()[-1]}"
    request = Request(kind="checkpoint", name="c", stage_version=1, config={"held": held})
    run = f"{root}/.work/checkpoint-{request.id()}"

    def produce(out: Path):
        if held != "nothing":  # a complete local checkpoint (its copy to the store cut short, or never begun)
            (out / "checkpoints" / "step-00000004").mkdir(parents=True)
            (out / "checkpoints" / "step-00000004" / "manifest.json").write_text("{}")
        if held == "a checkpoint's object":
            storage.write_bytes(f"{run}/out/checkpoints/step-00000004/model.safetensors", b"w")
        raise KeyboardInterrupt  # a Ctrl-C in training

    with pytest.raises(KeyboardInterrupt):
        open_store(root).build(request, produce, resumable=SCRATCH)
    if held == "a checkpoint's object":  # this machine's copy gone: the store's alone is what continues it
        shutil.rmtree(tmp_path / "cache")
    assert storage.exists(f"{run}/request.json")
    removed, kept = open_store(root).collect(dry_run=True)
    if held == "nothing":  # before: kept as 'interrupted run (0.0 MB): --resume continues it'
        assert run in removed and kept == [], (removed, kept)
    else:
        assert run not in removed and [r.path for r in kept] == [run], (removed, kept)
