"""Fault injection on pretraining through the artifact store: the real trainer killed at every
publish step, resumed with damaged state or another config, two identical runs at once, divergence.

The reference is an uninterrupted run of the same request: every recovery must end with its
exact weights (resume is exact), a verified artifact with ``hf/`` and ``metrics.jsonl``, no
checkpoints inside it, and nothing left in the store's private areas.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import signal
import time
from pathlib import Path

import pytest
import torch

from kolectra.core import filehash
from kolectra.model import checkpoint, train
from kolectra.pipeline import stages
from kolectra.pipeline.store.artifacts import Store
from tests.model_support import small_chain
from tests.test_faults_publish import _no_half_artifact, _private, child

SETS = ["train.steps=12", "train.batch_size=8", "train.warmup_steps=2", "train.log_every=1", "train.save_every=4",
        "train.lr=3e-3", "train.cpu_threads=1"]


@pytest.fixture(scope="module")
def chain(tmp_path_factory) -> Path:
    """A root holding corpus -> vocab -> examples (small real tokenizer and examples, no Beam)."""
    root = tmp_path_factory.mktemp("chain")
    small_chain(Store(root))
    return root


def _copy(chain: Path, dest: Path) -> tuple[Store, str]:
    shutil.copytree(chain, dest)
    store = Store(dest)
    return store, str(store.list("examples")[0].path)


@pytest.fixture(scope="module")
def straight(chain, tmp_path_factory) -> bytes:
    store, ex = _copy(chain, tmp_path_factory.mktemp("straight") / "root")
    art = stages.pretrain(store, ex, preset="tiny", sets=SETS)
    return _weights(art.path)


def _weights(path: Path) -> bytes:
    return (path / "hf" / "discriminator" / "model.safetensors").read_bytes()


def _published_cleanly(store: Store, art, straight: bytes) -> None:
    assert [a.path for a in _no_half_artifact(store) if a.kind == "checkpoint"] == [art.path]
    names = [f["path"] for f in art.manifest["files"]]
    assert "metrics.jsonl" in names and not any(n.startswith("checkpoints/") for n in names)
    assert _weights(art.path) == straight  # the interrupted run ends exactly where the straight one did
    assert _private(store.root) == {".tmp": [], ".work": [], ".locks": []}


@pytest.mark.parametrize("point, resumed_from", [("produced", 8), ("set_aside", 8), ("sealed", None),
                                                 ("published", None)])
def test_pretrain_killed_at_each_publish_step_recovers(chain, straight, tmp_path, capsys, point, resumed_from):
    store, ex = _copy(chain, tmp_path / "root")
    proc = child("pretrain", str(store.root), ex, point, *(f"--set={s}" for s in SETS))
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    assert len([a for a in _no_half_artifact(store) if a.kind == "checkpoint"]) == (point == "published")
    capsys.readouterr()
    art = stages.pretrain(store, ex, preset="tiny", sets=SETS, resume=True)
    err = capsys.readouterr().err
    if resumed_from is not None:  # the checkpoints outlived the export: not back to step 0
        assert f"resuming at step {resumed_from}" in err and art.manifest["stats"]["resumed_from_step"] == 8
    elif point == "sealed":
        assert "a complete build of this request whose run was stopped just before publishing" in err
    else:
        assert "reusing" in err
    _published_cleanly(store, art, straight)


def test_pretrain_killed_mid_run_resumes_exactly_past_damage_and_refuses_other_settings(
        chain, straight, tmp_path, capsys):
    store, ex = _copy(chain, tmp_path / "root")
    proc = child("pretrain", str(store.root), ex, "step10", *(f"--set={s}" for s in SETS))
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    (run,) = (store.root / ".work").iterdir()
    assert sorted(p.name for p in checkpoint.checkpoints_dir(run / "out").iterdir()) == [
        "step-00000004", "step-00000008"]

    # Another config: found (same examples and preset), refused naming every difference, kept.
    with pytest.raises(train.PretrainInputError, match=r"train.lr: 0.003 -> 0.002.*train.steps: 12 -> 16"):
        stages.pretrain(store, ex, preset="tiny", sets=SETS + ["train.steps=16", "train.lr=2e-3"], resume=True)
    assert [p.name for p in (store.root / ".work").iterdir()] == [run.name]

    # Forced, on a copy: continued from step 8 under the new schedule, and the manifest says from what.
    forced_store, forced_ex = _copy(store.root, tmp_path / "forced")
    capsys.readouterr()
    forced = stages.pretrain(forced_store, forced_ex, preset="tiny", sets=SETS + ["train.steps=16", "train.force_resume=true"],
                             resume=True)
    err = capsys.readouterr().err
    assert "schedule changed (steps 12 -> 16): from step 8" in err and "reaching 0 at step 16" in err
    assert forced.manifest["stats"]["resumed_from_step"] == 8 and forced.manifest["stats"]["steps"] == 16
    assert forced.manifest["provenance"]["continued_from"]["request"] == run.name.rpartition("-")[2]
    assert _private(forced_store.root)[".work"] == []

    # Damage: a metrics line cut short (a full disk during an append) and a newest checkpoint that
    # verifies but holds a pickle weights_only refuses: resume from step 4, still exact.
    with open(run / "out" / "metrics.jsonl", "a") as f:
        f.write('{"step": 11, "loss": 3')
    step8 = checkpoint.checkpoints_dir(run / "out") / "step-00000008"
    torch.save({"evil": Path("x")}, step8 / "state.pt")  # a PosixPath: refused by weights_only
    manifest = json.loads((step8 / "manifest.json").read_text())
    manifest["files"]["state.pt"] = {"bytes": (step8 / "state.pt").stat().st_size,
                                     "sha256": filehash.sha256(step8 / "state.pt")}
    (step8 / "manifest.json").write_text(json.dumps(manifest))
    assert checkpoint.problems(step8) == []
    capsys.readouterr()
    art = stages.pretrain(store, ex, preset="tiny", sets=SETS, resume=True)
    err = capsys.readouterr().err
    assert "skipping checkpoint step-00000008: it does not load (UnpicklingError" in err
    assert "resuming at step 4" in err and "metrics.jsonl: line(s)" in err
    rows = [json.loads(line) for line in (art.path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, 13))
    _published_cleanly(store, art, straight)


def test_two_identical_pretrain_runs_one_waits_and_joins(chain, straight, tmp_path, capsys):
    store, ex = _copy(chain, tmp_path / "root")
    first = child("pretrain", str(store.root), ex, "none", *(f"--set={s}" for s in SETS), wait=False)
    deadline = time.time() + 120
    while time.time() < deadline and not list((store.root / ".locks").glob("checkpoint-*.lock")):
        time.sleep(0.05)
    capsys.readouterr()
    art = stages.pretrain(store, ex, preset="tiny", sets=SETS)
    out, err_first = first.communicate(timeout=300)
    assert first.returncode == 0, err_first[-3000:]
    err = capsys.readouterr().err
    assert "is building the same request" in err and "reusing" in err
    assert out.strip().splitlines()[-1] == str(art.path)
    assert (art.path / "metrics.jsonl").is_file() and (art.path / "tensorboard").is_dir()
    _published_cleanly(store, art, straight)


def test_a_diverging_run_says_so_and_leaves_nothing(chain, tmp_path):
    store, ex = _copy(chain, tmp_path / "root")
    with pytest.raises(train.TrainingDiverged, match=r"loss is NaN at step \d+ .*learning rate is too high"):
        stages.pretrain(store, ex, preset="tiny", sets=SETS + ["train.lr=1e6", "train.warmup_steps=0"])
    assert _private(store.root) == {".tmp": [], ".work": [], ".locks": []}


def test_a_shard_truncated_while_pretraining_reads_it_is_one_line_naming_it(chain, tmp_path):
    """Shards used to be memory-mapped: a read past the new end was SIGBUS (exit 135, no line, no log)."""
    store, ex = _copy(chain, tmp_path / "root")
    proc = child("pretrain", str(store.root), ex, "truncate3", *(f"--set={s}" for s in SETS))
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("kolectra pretrain: error: ") and "/data/shard-" in last
    assert "truncated while training read it" in last and "Traceback" not in proc.stderr


def _renumbered(hf: Path, dest: Path, n: int) -> Path:
    """A copy of the pair ``hf`` whose tokenizers name other tokens at ``n`` ids (same size): the
    first ``n`` regular tokens rotated by one place."""
    shutil.copytree(hf, dest)
    for part in ("discriminator", "generator"):
        tj = dest / part / "tokenizer.json"
        doc = json.loads(tj.read_text(encoding="utf-8"))
        vocab = doc["model"]["vocab"]
        tokens = sorted(vocab, key=vocab.get)[10:10 + n]
        for tok, new_id in zip(tokens, [vocab[t] for t in tokens[1:] + tokens[:1]]):
            vocab[tok] = new_id
        tj.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
        by_id = sorted(vocab, key=vocab.get)
        (dest / part / "vocab.txt").write_text("".join(t + "\n" for t in by_id), encoding="utf-8")
    return dest


def test_init_from_a_pair_of_another_vocabulary_of_the_same_size_is_refused(chain, tmp_path, capsys):
    from kolectra.pipeline.cli import main

    store, ex = _copy(chain, tmp_path / "root")
    first = stages.pretrain(store, ex, preset="tiny", sets=SETS)
    other = _renumbered(first.path / "hf", tmp_path / "other", 37)
    capsys.readouterr()
    argv = ["pretrain", "--examples", ex, "--out", str(store.root), "--preset", "tiny",
            *(f"--set={s}" for s in SETS), f"--set=train.init_from={other}"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("kolectra pretrain: error: ") and "37 of " in err[-1]
    assert "trained with another vocabulary" in err[-1]
    assert [a.kind for a in store.list()].count("checkpoint") == 1
    same = ["pretrain", "--examples", ex, "--out", str(store.root), "--preset", "tiny",
            *(f"--set={s}" for s in SETS), f"--set=train.init_from={first.path / 'hf'}"]
    assert main(same) == 0  # its own vocabulary: accepted


@pytest.mark.parametrize("flags", [["--steps", "0"], ["--set", "train.steps=0"]])
def test_zero_steps_is_refused_not_published_as_a_random_checkpoint(chain, tmp_path, capsys, flags):
    from kolectra.pipeline.cli import main

    store, ex = _copy(chain, tmp_path / "root")
    assert main(["pretrain", "--examples", ex, "--out", str(store.root), "--preset", "tiny", *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kolectra pretrain: error: train.steps: 0 would publish")
    assert [a.kind for a in store.list()].count("checkpoint") == 0


@pytest.mark.skipif(importlib.util.find_spec("torch_xla") is not None,
                    reason="torch_xla is installed here; this checks the message where it is not")
def test_device_xla_without_torch_xla_is_one_line_naming_the_extra(chain, tmp_path, capsys):
    """The base install has no torch-xla (it needs torch 2.9.0 exactly; the `xla` extra pins both)."""
    from kolectra.pipeline.cli import main

    store, ex = _copy(chain, tmp_path / "root")
    assert main(["pretrain", "--examples", ex, "--out", str(store.root), "--preset", "tiny", "--device", "xla"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("kolectra pretrain: error: train.device=xla needs torch-xla") and ".[xla]" in err[-1]
    assert [a.kind for a in store.list()].count("checkpoint") == 0
