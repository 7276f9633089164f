"""After an upgrade, ``--resume`` of a run an earlier kolectra left: the lines say that the run is an
earlier kolectra's, not one of "other settings" the user never changed. The old state is written here:
a request.json without the stage version (as kolectra wrote it before 2026-11-30), and a checkpoint
whose loader position names no training order (checkpoint stage version 9 or before)."""

from __future__ import annotations

import contextlib
import dataclasses
import json

import pytest
import torch

from kolectra.core import filehash
from kolectra.model import checkpoint, presets, train
from kolectra.pipeline.store import workspace
from tests.model_support import build_examples, build_tokenizer, stop_in_step
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)

CONFIG = {"preset": "tiny", "train": {"lr": 0.001, "steps": 400, "compile": "auto"}}
FAMILY = {"kind": "checkpoint", "examples": "e" * 16, "preset": "tiny"}


def _interrupted(root, aid: str, config: dict, **more) -> None:
    """An interrupted run as kolectra leaves it: request.json and a checkpoint folder in out/."""
    run = root / workspace.WORK / f"checkpoint-{aid}"
    (run / "out" / "checkpoints" / "step-00000020").mkdir(parents=True)
    (run / "out" / "checkpoints" / "step-00000020" / "state.pt").write_bytes(b"x")
    record = {"id": aid, "kind": "checkpoint", "name": "old", "family": FAMILY, "scratch": ["checkpoints"],
              "config": config, "created": "2026-11-27T10:00:00+00:00", **more}
    (run / workspace.REQUEST).write_text(json.dumps(record), encoding="utf-8")


def _found_line(root, capsys, stage_version: int = 16) -> str:
    record = {"id": "b" * 16, "kind": "checkpoint", "name": "new", "family": FAMILY, "scratch": ["checkpoints"],
              "config": {**CONFIG, "train": {**CONFIG["train"], "compile": False}}, "stage_version": stage_version}
    with contextlib.ExitStack() as held:
        run = workspace.open_run(root, record, True, held, ("train.compile",))
    assert run.id == "a" * 16
    return next(line for line in capsys.readouterr().err.splitlines() if "no interrupted run of this exact" in line)


def test_an_earlier_kolectras_run_of_the_same_settings_is_not_called_one_of_other_settings(tmp_path, capsys):
    _interrupted(tmp_path, "a" * 16, CONFIG)  # no stage_version: an earlier kolectra's request.json
    line = _found_line(tmp_path, capsys)
    assert "with the same settings under another request id (written by an earlier kolectra" in line, line
    assert "other settings" not in line


def test_a_run_recording_its_stage_version_is_named_by_it(tmp_path, capsys):
    _interrupted(tmp_path, "a" * 16, CONFIG, stage_version=15)
    line = _found_line(tmp_path, capsys, stage_version=16)
    assert "with the same settings, written by checkpoint stage version 15 (this kolectra builds 16)" in line, line


def test_a_run_of_this_stage_version_and_settings_under_another_id_names_the_libraries(tmp_path, capsys):
    _interrupted(tmp_path, "a" * 16, CONFIG, stage_version=16)  # e.g. torch upgraded since it was started
    line = _found_line(tmp_path, capsys, stage_version=16)
    assert "with the same settings and stage version under another request id (other versions of the libraries" in line


def test_a_run_of_other_settings_is_still_said_to_be_one(tmp_path, capsys):
    _interrupted(tmp_path, "a" * 16, {**CONFIG, "train": {**CONFIG["train"], "lr": 0.002}})
    assert "of the same inputs with other settings (train.lr 0.002 -> 0.001) is" in _found_line(tmp_path, capsys)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("inputs")
    tok = build_tokenizer(root / "tok")
    return build_examples(root / "examples", tok, n=48, seq_len=32), tok


def _cfg(**train_kw):
    cfg = presets.tiny()
    t = dict(steps=6, batch_size=8, warmup_steps=1, log_every=1, lr=3e-3, cpu_threads=1, save_every=2)
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, **{**t, **train_kw}))


def _as_before_the_shard_order(step_dir) -> None:
    """Rewrite a checkpoint's state.pt as checkpoint stage version 9 wrote it: no loader ``order``."""
    state = checkpoint.decode(torch.load(step_dir / "state.pt", map_location="cpu", weights_only=True))
    state["loader"].pop("order")
    torch.save(checkpoint.encode(state), step_dir / "state.pt")
    manifest = json.loads((step_dir / checkpoint.MANIFEST).read_text(encoding="utf-8"))
    path = step_dir / "state.pt"
    manifest["files"]["state.pt"] = {"bytes": path.stat().st_size, "sha256": filehash.sha256(path)}
    (step_dir / checkpoint.MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")


def test_a_checkpoint_of_the_earlier_training_order_says_an_earlier_kolectra_wrote_it(inputs, tmp_path, monkeypatch):
    examples, tok = inputs
    out = tmp_path / "run"
    resume_step = stop_in_step(monkeypatch, 3, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        train.pretrain(_cfg(), examples, tok, out)
    resume_step()
    steps = sorted(checkpoint.checkpoints_dir(out).glob("step-*"))
    assert [p.name for p in steps] == ["step-00000002"]
    _as_before_the_shard_order(steps[0])
    with pytest.raises(train.PretrainInputError) as e:
        train.pretrain(_cfg(), examples, tok, out, resume=True)
    msg = str(e.value)
    assert "written by an earlier kolectra, whose training order was one permutation of all rows" in msg, msg
    assert "other settings" not in msg and "train.force_resume=true" in msg and "leave out --resume" in msg
    # forced, it goes on from the step-2 weights in this version's order
    result = train.pretrain(_cfg(force_resume=True), examples, tok, out, resume=True)
    assert result.stats["resumed_from_step"] == 2


@pytest.mark.parametrize("resume", [False, "exact"])
def test_a_kept_run_of_an_earlier_kolectra_is_not_called_one_of_other_settings(tmp_path, capsys, resume):
    """Without --resume (or where only this request's run may be resumed), the line that counts the
    family's interrupted runs kept beside the fresh one says how the newest differs, as --resume's
    line does: before, 'of the same inputs with other settings' for an earlier kolectra's run of the
    very settings asked for."""
    _interrupted(tmp_path, "a" * 16, CONFIG)
    record = {"id": "b" * 16, "kind": "checkpoint", "name": "new", "family": FAMILY, "scratch": ["checkpoints"],
              "config": CONFIG, "stage_version": 16}
    with contextlib.ExitStack() as held:
        workspace.open_run(tmp_path, record, resume, held, ("train.compile",))
    line = next(x for x in capsys.readouterr().err.splitlines() if "interrupted run(s) of the same inputs" in x)
    assert "with the same settings under another request id (written by an earlier kolectra" in line, line
    assert "other settings" not in line, line


def test_on_a_bucket_root_the_kept_run_is_named_by_its_stage_version_and_not_said_to_resume(
        bucket, tmp_path, monkeypatch, capsys):
    """A store root's run records its stage version as a disk root's does (its line named a run of this
    kolectra 'written by an earlier kolectra'), and there --resume continues only this request's run
    (the line said '--resume continues it' while --resume had just started fresh beside it)."""
    from pathlib import Path

    from kolectra.core.stage import StageOutput
    from kolectra.pipeline.store.artifacts import Resumable
    from kolectra.pipeline.store.factory import open_store
    from kolectra.pipeline.store.request import Request

    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))
    run = Resumable(family=FAMILY, scratch=("state",))

    def interrupted(out: Path) -> StageOutput:
        (out / "state").mkdir()
        (out / "state" / "step-8").write_text("x")
        raise KeyboardInterrupt

    def finishes(out: Path) -> StageOutput:
        seen.append((out / "state").is_dir())
        (out / "model.txt").write_text("m")
        return StageOutput(stats={})

    seen: list[bool] = []
    with pytest.raises(KeyboardInterrupt):
        open_store(f"{bucket}/family").build(Request(kind="checkpoint", name="p", stage_version=15, config=CONFIG),
                                             interrupted, resumable=run)
    capsys.readouterr()
    open_store(f"{bucket}/family").build(Request(kind="checkpoint", name="p", stage_version=16, config=CONFIG),
                                         finishes, resumable=run, resume=True)
    line = next(x for x in capsys.readouterr().err.splitlines() if "interrupted run(s) of the same inputs" in x)
    assert seen == [False]  # started fresh
    assert "the newest with the same settings, written by checkpoint stage version 15 (this kolectra builds 16)" in line
    assert "--resume continues" not in line and "only this request's run is resumed here" in line, line
