"""Pretraining on an object store (tests/test_store_s3.py's moto server): a run killed mid-run resumes
from the bucket on a fresh machine to a straight run's weights; a second SIGTERM while a checkpoint is
copied says which checkpoint the store holds; a step a follower's part never reached keeps the one before."""

from __future__ import annotations

import json
import os

import pytest

from kolectra.core import storage
from kolectra.pipeline import stages
from kolectra.pipeline.store.factory import open_store
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)
from tests.store_s3_support import FAST_LEASE, _child, _own_cache  # noqa: F401  (_own_cache: autouse)


# ---- pretraining resumes from the store -------------------------------------------------------------
def test_pretrain_killed_mid_run_resumes_from_the_bucket_on_a_fresh_machine(bucket, tmp_path, capsys, monkeypatch):
    from tests.model_support import small_chain
    from tests.test_faults_pretrain import SETS

    root = f"{bucket}/p"
    store = open_store(root)
    monkeypatch.setenv("KOLECTRA_PARENT_ROOTS", root)  # the local straight run's parents are the bucket's

    _, _, ex = small_chain(store)
    straight = stages.pretrain(open_store(tmp_path / "local"), str(store.local(ex)), preset="tiny", sets=SETS)

    killed = _child("pretrain", root, str(ex.path), "step10", *(f"--set={s}" for s in SETS))
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert store.list("checkpoint") == []
    kept = storage.listing(f"{root}/.work")
    assert any("/out/checkpoints/step-00000008/manifest.json" in k for k in kept), sorted(kept)
    assert any("/parts/metrics.jsonl/" in k for k in kept), sorted(kept)  # the log, a part a save

    os.environ["KOLECTRA_CACHE"] = str(tmp_path / "another-machine")  # nothing local: all from the bucket
    capsys.readouterr()
    art = stages.pretrain(open_store(root), str(ex.path), preset="tiny", sets=SETS, resume=True)
    err = capsys.readouterr().err
    assert "fetching the interrupted run's step-00000008" in err and "resuming at step 8" in err
    assert art.manifest["stats"]["resumed_from_step"] == 8
    assert art.read_bytes("hf/discriminator/model.safetensors") == \
        (straight.path / "hf" / "discriminator" / "model.safetensors").read_bytes()

    def logged(data: bytes) -> list[dict]:  # the lines but their timings
        return [{k: v for k, v in json.loads(x).items() if k not in ("tokens_per_s", "mfu")} for x in data.splitlines()]

    assert logged(art.read_bytes("metrics.jsonl")) == logged((straight.path / "metrics.jsonl").read_bytes())
    assert storage.children(f"{root}/.work") == []  # published: the run's state in the store is gone
    assert store.verify(art) == []


def _resume_on_another_machine(root: str, examples: str, tmp_path, monkeypatch, capsys) -> str:
    """``pretrain --resume`` on ``root`` as another machine runs it (an empty cache), in this process (as
    the test of a run killed mid-run does): a fresh process started torch and transformers again, about
    5 CPU s a test, for nothing these tests check. What it wrote to stderr."""
    from tests.test_faults_pretrain import SETS

    for name, value in {**FAST_LEASE, "KOLECTRA_CACHE": str(tmp_path / "another-machine")}.items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    stages.pretrain(open_store(root), examples, preset="tiny", sets=SETS, resume=True)
    return capsys.readouterr().err


@pytest.mark.parametrize("at, in_store", [(2, None), (6, "step-00000004")])
def test_a_second_sigterm_during_the_copy_to_the_store_says_which_checkpoint_the_store_holds(bucket, tmp_path, at,
                                                                                             in_store, monkeypatch,
                                                                                             capsys):
    """SIGTERM at a step, then again while its checkpoint is copied to the store: the line said the
    state was kept here `and s3://.../.work; --resume continues it` while the store held no complete
    checkpoint (--resume on another machine: 'nothing to resume; starting fresh'). The copy before
    (step 4, saved every 4) stays complete in the store until the new one is; the line names it."""
    from tests.model_support import small_chain
    from tests.test_faults_pretrain import SETS

    root = f"{bucket}/t{at}"
    _, _, ex = small_chain(open_store(root))
    stopped = _child("pretrain", root, str(ex.path), f"term{at}", *(f"--set={s}" for s in SETS))
    assert stopped.returncode == 143, stopped.stderr[-3000:]
    line = stopped.stderr.strip().splitlines()[-1]
    assert line.startswith(f"kolectra pretrain: terminated (SIGTERM) after step {at} of 12, saved as the checkpoint "
                           f"step-{at:08d}; checkpoint: its working state is kept in "), line
    kept = storage.listing(f"{root}/.work")
    assert any(f"/out/checkpoints/step-{at:08d}/" in k for k in kept)  # a part of its copy: cut short
    assert sorted(k.split("/")[3] for k in kept if k.endswith("/manifest.json")) == ([in_store] if in_store else [])
    if in_store is None:
        assert f"only: the store holds no complete checkpoint of it (step-{at:08d}'s copy to " in line, line
        assert line.endswith("did not complete); --resume continues it on this machine only"), line
    else:
        assert f"holds {in_store} only (step-{at:08d}'s copy to it did not complete); --resume continues from " \
               f"step-{at:08d} on this machine, from {in_store} on another" in line, line
    # as the line says, on another machine
    again = _resume_on_another_machine(root, str(ex.path), tmp_path, monkeypatch, capsys)
    assert (f"fetching the interrupted run's {in_store}" in again if in_store
            else "nothing to resume for this request; starting fresh" in again), again[-3000:]


def test_a_second_sigterm_as_the_manifest_of_the_copy_to_the_store_lands_does_not_deny_it(bucket, tmp_path, monkeypatch,
                                                                                        capsys):
    """The second SIGTERM after the checkpoint's manifest reached the store, before the upload returned
    (1 of 12 real trials with TERM twice 0.2 s apart on moto): the line said the store 'holds step-00000004
    only (step-00000006's copy to it did not complete); --resume continues ... from step-00000004 on
    another', while the store held step-00000006 complete, from which another machine's --resume went on.
    The store is not asked while stopping (it may be what hangs); the line says the copy may be there."""
    from tests.model_support import small_chain
    from tests.test_faults_pretrain import SETS

    root = f"{bucket}/tl"
    _, _, ex = small_chain(open_store(root))
    stopped = _child("pretrain", root, str(ex.path), "termlast6", *(f"--set={s}" for s in SETS))
    assert stopped.returncode == 143, stopped.stderr[-3000:]
    line = stopped.stderr.strip().splitlines()[-1]
    kept = storage.listing(f"{root}/.work")
    assert sorted(k.split("/")[3] for k in kept if k.endswith("/manifest.json")) == ["step-00000004", "step-00000006"]
    assert "did not complete" not in line, line  # before: 'holds step-00000004 only (step-00000006's copy ...'
    assert ("holds step-00000004, and step-00000006 too unless its copy was cut short as its manifest was "
            "written; --resume continues from step-00000006 on this machine, from the newer of the two there on "
            "another") in line, line
    again = _resume_on_another_machine(root, str(ex.path), tmp_path, monkeypatch, capsys)
    assert "fetching the interrupted run's step-00000006" in again, again[-3000:]


def test_a_step_a_follower_s_part_never_reached_keeps_the_one_before_in_the_store(bucket, tmp_path):
    """Each rank copies its own part of a checkpoint to the store, rank 0 the rest and the manifest, and
    rank 0 then removed every older step. A follower whose part of step 8 lagged and whose machine went
    (2 gloo ranks on moto, rank 1 killed before its upload) left the store step 8 without rank-1.pt and no
    step 4: every --resume fetched step 8 and ended ('.../rank-1.pt: missing; was this checkpoint written
    with another number of ranks?'), the run lost. Now the step before stays until the new one has as many
    parts, and a step lacking one is not complete: --resume fetches step 4."""
    store = open_store(f"{bucket}/parts")
    store._run_url, store._logs = storage.join(store.url, ".work", "checkpoint-q7"), {}

    def saved(rank: int, step: int) -> None:
        step_dir = tmp_path / f"rank-{rank}" / "checkpoints" / f"step-{step:08d}"
        step_dir.mkdir(parents=True)
        names = [f"rank-{rank}.pt"] + ["model.safetensors", "state.pt", "manifest.json"] * (rank == 0)
        for name in names:
            (step_dir / name).write_text(f"{name} {step}")
        store._run_rank = rank
        store.checkpoint_saved(step_dir)

    def steps() -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for rel in storage.listing(f"{store._run_url}/out/checkpoints"):
            found.setdefault(rel.split("/")[0], []).append(rel.split("/")[1])
        return {step: sorted(names) for step, names in found.items()}

    saved(0, 4), saved(1, 4)
    saved(0, 8)  # rank 1's part of step 8 never comes
    assert steps() == {"step-00000004": ["manifest.json", "model.safetensors", "rank-0.pt", "rank-1.pt", "state.pt"],
                       "step-00000008": ["manifest.json", "model.safetensors", "rank-0.pt", "state.pt"]}
    assert store._steps(storage.listing(store._run_url)) == ["step-00000004"]  # what --resume fetches
    saved(1, 8)
    saved(0, 12)  # step 8 complete now: step 4 goes, step 8 stays until step 12 has rank 1's part
    assert sorted(steps()) == ["step-00000008", "step-00000012"]
    saved(1, 12), saved(0, 16), saved(1, 16), saved(0, 20)
    assert sorted(steps()) == ["step-00000016", "step-00000020"]
