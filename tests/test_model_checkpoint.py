"""Checkpoints and resume: kill -9 mid-run, damaged checkpoints, config changes, accumulation, init_from."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import ElectraForPreTraining

from kolectra.core import filehash
from kolectra.core.config import to_dict
from kolectra.model import checkpoint, init, presets, train
from kolectra.model.electra import ElectraPair, attention_bias
from tests.model_support import build_examples, build_tokenizer, stop_in_step

REPO = Path(__file__).resolve().parents[1]

# Runs pretrain in a child process that SIGKILLs itself inside its 20th step (no cleanup runs).
CHILD = """
import json, os, signal, sys
from pathlib import Path
from kolectra.model import config, objectives, train
from kolectra.core.config import from_dict
cfg = from_dict(config.PretrainConfig, json.loads(sys.argv[1]))
real, calls = objectives.STEPS["electra"], []
def dying(*a, **k):
    calls.append(1)
    if len(calls) == 20:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(*a, **k)
objectives.STEPS["electra"] = dying
train.pretrain(cfg, Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
"""


def _cfg(steps=30, **train_kw):
    cfg = presets.tiny()
    t = dict(steps=steps, batch_size=8, warmup_steps=4, log_every=1, lr=3e-3, cpu_threads=1, save_every=6)
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, **{**t, **train_kw}))


def _rows(out):
    return [{k: v for k, v in json.loads(x).items() if k not in ("tokens_per_s", "mfu")}
            for x in (out / "metrics.jsonl").read_text().splitlines()]


def _weights(out):
    return {r: (out / "hf" / r / "model.safetensors").read_bytes() for r in ("discriminator", "generator")}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("inputs")
    tok = build_tokenizer(root / "tok")
    return build_examples(root / "examples", tok, n=96, seq_len=32), tok


def test_kill_9_then_resume_is_exact_and_skips_a_damaged_checkpoint(inputs, tmp_path, capsys):
    examples, tok = inputs
    cfg = _cfg()
    straight = tmp_path / "straight"
    train.pretrain(cfg, examples, tok, straight)

    killed = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(to_dict(cfg)), str(examples), str(tok), str(killed)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    ckpts = sorted(p.name for p in checkpoint.checkpoints_dir(killed).iterdir())
    assert ckpts == ["step-00000012", "step-00000018"]  # keep_checkpoints = 2
    assert not (killed / "hf").exists()

    # Another config is refused, naming the differing values; the checkpoints stay.
    with pytest.raises(train.PretrainInputError, match=r"train.lr: 0.003 -> 0.002.*train.steps: 30 -> 40"):
        train.pretrain(_cfg(steps=40, lr=2e-3), examples, tok, killed, resume=True)
    forced = tmp_path / "forced"
    shutil.copytree(killed, forced)
    train.pretrain(_cfg(steps=40, lr=2e-3, force_resume=True), examples, tok, forced, resume=True)
    assert _rows(forced)[17]["step"] == 18 and _rows(forced)[-1]["step"] == 40

    # Alter one byte of the newest checkpoint: detected by hash, the previous one is used.
    victim = checkpoint.checkpoints_dir(killed) / "step-00000018" / "model.safetensors"
    data = bytearray(victim.read_bytes())
    data[-5] ^= 0xFF
    victim.write_bytes(bytes(data))
    capsys.readouterr()
    result = train.pretrain(cfg, examples, tok, killed, resume=True)
    err = capsys.readouterr().err
    assert "skipping checkpoint step-00000018" in err and "resuming at step 12" in err
    assert result.stats["resumed_from_step"] == 12
    # the whole run's wall time: the killed process's up to its step-12 checkpoint, plus this one's
    assert 0 < result.compute["wall_seconds_before_resume"] < result.compute["wall_seconds"]
    assert _rows(killed) == _rows(straight)  # identical per-step losses and metrics
    assert _weights(killed) == _weights(straight)  # identical final weights
    assert not checkpoint.checkpoints_dir(killed).exists()


def test_a_checkpoint_at_a_log_step_holds_that_lines_tokens_where_the_device_reads_back_late(
        inputs, tmp_path, monkeypatch):
    """On XLA a log line's values arrive after the next step runs (``read_back`` is deferred to a step
    closure); a checkpoint saved at a log step must still hold that line's tokens, or a run resumed
    from it counts ``nonpad_tokens`` one window short from then on. The CPU device here defers its
    read-backs the way XLA does."""
    from kolectra.model import runtime

    real_resolve = runtime.resolve

    def resolve(*args, **kwargs):
        dev, pending = real_resolve(*args, **kwargs), []
        read_back, step_done = dev.read_back, dev.step_done

        def deliver():
            while pending:
                pending.pop(0)()

        dev.read_back = lambda tensors, then: pending.append(lambda: read_back(tensors, then))
        dev.step_done = lambda: (deliver(), step_done())[1]  # the previous steps' values, as XLA's closures
        dev.flush = deliver
        return dev

    monkeypatch.setattr(runtime, "resolve", resolve)
    examples, tok = inputs
    out = tmp_path / "run"
    cfg = _cfg(steps=8, save_every=4, log_every=2)
    train.pretrain(cfg, examples, tok, out, clear_checkpoints=False)
    straight = _rows(out)
    own = torch.load(checkpoint.checkpoints_dir(out) / "step-00000004" / "rank-0.pt", weights_only=True)
    assert own["log"]["nonpad_tokens"] == straight[1]["nonpad_tokens"] > 0  # the line of step 4
    train.pretrain(cfg, examples, tok, out, resume=True)  # from step 4 again: the same lines
    assert _rows(out) == straight


def test_steps_forced_down_to_a_checkpoint_between_log_steps_end_with_its_open_window(inputs, tmp_path, monkeypatch):
    """--steps set (forced) to the step of a checkpoint written between log lines: nothing is left to
    train, and the checkpoint's open window (steps 17-18) is the run's last line, as a run that
    logged there would have written it."""
    examples, tok = inputs
    logged = tmp_path / "logged"  # the same training, a line every 2 steps: its line 18 is the window 17-18
    train.pretrain(_cfg(steps=30, log_every=2), examples, tok, logged)
    resume_step = stop_in_step(monkeypatch, 20, KeyboardInterrupt())
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        train.pretrain(_cfg(steps=30, log_every=4), examples, tok, out)
    resume_step()
    result = train.pretrain(_cfg(steps=18, log_every=4, force_resume=True), examples, tok, out, resume=True)
    rows, want = _rows(out), _rows(logged)[8]
    assert [r["step"] for r in rows] == [4, 8, 12, 16, 18] and result.stats["resumed_from_step"] == 18
    assert rows[-1] == want  # losses, rate, tokens: the window of steps 17-18
    assert result.stats["final"]["loss"] == want["loss"] and result.stats["nonpad_tokens_seen"] == want["nonpad_tokens"]


def test_a_forced_resume_under_another_grad_accum_is_refused_in_its_settings_words(inputs, tmp_path, monkeypatch):
    """Its micro-batches are another size, so the saved data position names other rows: refused, with
    the checkpoint and the settings that decide a micro-batch. Before, the loader's own "loader state
    was saved with batch_size=8" named a size no setting is called."""
    examples, tok = inputs
    out = tmp_path / "run"
    resume_step = stop_in_step(monkeypatch, 5, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        train.pretrain(_cfg(steps=8, save_every=2), examples, tok, out)
    resume_step()
    with pytest.raises(train.PretrainInputError, match=r"step-0*4: its data position counts micro-batches of 8 rows on "
                                                  r"each of 1 rank\(s\); this run's are 4 rows on 1 .*grad_accum"):
        train.pretrain(_cfg(steps=8, save_every=2, grad_accum=2, force_resume=True), examples, tok, out, resume=True)


def test_damage_detection_and_weights_only_state(inputs, tmp_path):
    examples, tok = inputs
    out = tmp_path / "run"
    cfg = _cfg(steps=4, save_every=2, keep_checkpoints=3)
    model = ElectraPair(dataclasses.replace(cfg.model, vocab_size=50), 50, 0)
    opt = train.build_optimizer(model, cfg.train)
    own = {"rng": {"numpy": __import__("numpy").random.get_state()}, "log": {"sums": {}, "tokens": 0, "steps": 0}}
    step_dir = checkpoint.save(out, 2, model.state_dict(keep_vars=True), opt.state_dict(),
                               {"config": to_dict(cfg), "vocab": "x", "loader": {}}, own)
    assert checkpoint.problems(step_dir) == [] and checkpoint.latest(out) == step_dir
    loaded = checkpoint.load(step_dir)  # every .pt loads with weights_only=True
    assert (loaded["own"]["rng"]["numpy"][1] == own["rng"]["numpy"][1]).all()
    fresh = ElectraPair(dataclasses.replace(cfg.model, vocab_size=50), 50, 0)
    fresh.load_state_dict(loaded["model"])  # shared tensors restored under all their names
    assert all(torch.equal(a, b) for a, b in zip(fresh.state_dict().values(), model.state_dict().values()))
    assert len(loaded["state"]["aliases"]) >= 4  # generator embeddings + tied output layer stored once

    with open(step_dir / "optimizer.pt", "r+b") as f:  # truncated
        f.truncate(100)
    assert "bytes" in checkpoint.problems(step_dir)[0] and checkpoint.latest(out) is None
    (step_dir / checkpoint.MANIFEST).unlink()
    assert "missing" in checkpoint.problems(step_dir)[0]


def test_gradient_accumulation_equals_one_big_batch(inputs, tmp_path):
    """With the randomness pinned (every candidate masked with [MASK], argmax sampling, no dropout),
    2 micro-batches of 4 give the same update as one batch of 8: losses are normalised by the
    whole step's counts, not each micro-batch's."""
    examples, tok = inputs
    base = _cfg(steps=3, save_every=0)
    base = dataclasses.replace(
        base, model=dataclasses.replace(base.model, dropout=0.0, attention_dropout=0.0),
        objective=dataclasses.replace(base.objective, mask_prob=0.99, mask_token_prob=1.0, temperature=1e-6))
    one, two = tmp_path / "one", tmp_path / "two"
    train.pretrain(base, examples, tok, one)
    train.pretrain(dataclasses.replace(base, train=dataclasses.replace(base.train, grad_accum=2)), examples, tok, two)
    for a, b in zip(_rows(one), _rows(two)):
        for k in ("loss", "gen_loss", "disc_loss", "grad_norm"):
            assert abs(a[k] - b[k]) < 1e-4 * abs(a[k]) + 1e-6, k
    from safetensors.torch import load_file
    wa, wb = (load_file(d / "hf" / "discriminator" / "model.safetensors") for d in (one, two))
    assert all(torch.allclose(wa[k], wb[k], atol=2e-5) for k in wa)


def test_continue_from_an_exported_pair(inputs, tmp_path):
    examples, tok = inputs
    first = tmp_path / "first"
    train.pretrain(_cfg(steps=20, save_every=0, log_every=20), examples, tok, first)
    # The loaded pair is the exported one.
    V = train.data.read_index(examples).vocab_size
    model_cfg = dataclasses.replace(_cfg().model, vocab_size=V)
    pair = ElectraPair(model_cfg, V, 0)
    init.load_pair(pair, first / "hf", model_cfg, V, 0)
    ref = ElectraForPreTraining.from_pretrained(first / "hf" / "discriminator").eval()
    ids = torch.tensor([[2, 10, 11, 12, 3, 0]])
    with torch.no_grad():
        bias = attention_bias((ids != 0).float())
        assert torch.allclose(pair.eval().discriminator_logits(ids, torch.zeros_like(ids), bias),
                              ref(input_ids=ids, attention_mask=(ids != 0).long()).logits, atol=1e-5)
    # Continued training starts where the first run ended, not from scratch.
    cont, scratch = tmp_path / "cont", tmp_path / "scratch"
    train.pretrain(_cfg(steps=3, save_every=0, init_from=str(first / "hf")), examples, tok, cont)
    train.pretrain(_cfg(steps=3, save_every=0), examples, tok, scratch)
    assert _rows(cont)[0]["loss"] < 0.8 * _rows(scratch)[0]["loss"]
    assert "initialised from" in (cont / "hf" / "discriminator" / "README.md").read_text()
    bad = _cfg(steps=3, save_every=0, init_from=str(first / "hf"))
    bad = dataclasses.replace(bad, model=dataclasses.replace(bad.model, hidden=128))
    with pytest.raises(init.InitError, match="hidden_size: 64 there, 128 in this run"):
        train.pretrain(bad, examples, tok, tmp_path / "bad")


def _save(out, step, cfg):
    model = ElectraPair(dataclasses.replace(cfg.model, vocab_size=50), 50, 0)
    opt = train.build_optimizer(model, cfg.train)
    own = {"rng": {"torch": torch.get_rng_state()}, "log": {"sums": {}, "tokens": 0, "steps": 0}}
    return checkpoint.save(out, step, model.state_dict(keep_vars=True), opt.state_dict(),
                           {"config": to_dict(cfg), "vocab": "x", "loader": {}}, own, keep=3)


def test_an_intact_checkpoint_that_does_not_load_falls_back_to_the_previous(tmp_path, capsys):
    cfg = _cfg()
    older, newer = _save(tmp_path, 2, cfg), _save(tmp_path, 4, cfg)
    torch.save({"evil": Path("x")}, newer / "state.pt")  # a PosixPath: refused by weights_only=True
    manifest = json.loads((newer / checkpoint.MANIFEST).read_text())
    manifest["files"]["state.pt"] = {"bytes": (newer / "state.pt").stat().st_size,
                                     "sha256": filehash.sha256(newer / "state.pt")}
    (newer / checkpoint.MANIFEST).write_text(json.dumps(manifest))
    assert checkpoint.problems(newer) == [] and checkpoint.latest(tmp_path) == newer  # the hashes match
    step_dir, loaded = checkpoint.load_latest(tmp_path)
    assert step_dir == older and loaded["state"]["step"] == 2
    assert "skipping checkpoint step-00000004: it does not load (UnpicklingError" in capsys.readouterr().err


def test_a_full_disk_while_saving_names_the_file_and_leaves_no_partial_step(tmp_path):
    import errno
    import resource

    cfg = _cfg()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, hard))  # Python ignores SIGXFSZ: writes fail with EFBIG
    try:
        with pytest.raises(checkpoint.CheckpointWriteError) as e:
            _save(tmp_path, 2, cfg)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert e.value.errno == errno.EFBIG and e.value.filename.endswith(".tmp-step-00000002/model.safetensors")
    assert list(checkpoint.checkpoints_dir(tmp_path).iterdir()) == []


def test_only_a_write_that_failed_is_called_a_full_disk(tmp_path):
    """torch's zip writer under the file-size limit says only "unexpected pos": a write error naming
    the file. A RuntimeError that is no write's (transformers refuses tensors sharing memory so) passes
    as it is: called an input/output error it would send a user to their disk for a bug."""
    import errno
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, hard))
    try:
        with pytest.raises(checkpoint.CheckpointWriteError) as e:
            checkpoint.written(tmp_path / "optimizer.pt", lambda path: torch.save({"w": torch.ones(100_000)}, path))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert e.value.errno == errno.EFBIG and e.value.filename == str(tmp_path / "optimizer.pt")

    def shared(path):
        raise RuntimeError("Some tensors share memory, this will lead to duplicate memory on disk")

    with pytest.raises(RuntimeError) as e:
        checkpoint.written(tmp_path / "hf", shared, "export")
    assert not isinstance(e.value, OSError) and "share memory" in str(e.value)


def test_a_metrics_line_cut_short_is_dropped_naming_the_file(tmp_path, capsys):
    log = tmp_path / "metrics.jsonl"
    log.write_text('{"step": 1, "loss": 3.0}\n{"step": 2, "loss": 2.5}\nnot json\n{"step": 3, "loss": 2.0}\n'
                   '{"step": 4, "lo')
    checkpoint.trim_log(log, 3)
    assert [json.loads(x)["step"] for x in log.read_text().splitlines()] == [1, 2, 3]
    assert f"{log}: line(s) 3, 5 unreadable" in capsys.readouterr().err


def _save_small(out, step, keep=2):
    return checkpoint.save(out, step, {"w": torch.ones(3) * step}, {"state": {}, "param_groups": []},
                           {"config": {}}, {"rng": {}, "log": {}}, keep=keep)


def test_a_save_is_on_the_disk_before_it_is_renamed_in_and_before_older_ones_go(tmp_path, monkeypatch):
    """A rename is atomic against a kill, not a power loss: every file, the step directory and then
    the rename are synced, and only then is the oldest checkpoint deleted."""
    events, real = [], checkpoint.synced

    def recording(path):
        events.append((Path(path).name, sorted(p.name for p in checkpoint.checkpoints_dir(tmp_path).iterdir())))
        real(path)

    monkeypatch.setattr(checkpoint, "synced", recording)
    _save_small(tmp_path, 1, keep=1)
    events.clear()
    _save_small(tmp_path, 2, keep=1)
    names = [name for name, _ in events]
    assert set(names[:5]) == {"rank-0.pt", "model.safetensors", "optimizer.pt", "state.pt", checkpoint.MANIFEST}
    assert names[5:] == [".tmp-step-00000002", "checkpoints"]
    assert events[-1][1] == ["step-00000001", "step-00000002"]  # the old one still there when the rename is synced
    assert [p.name for p in checkpoint.checkpoints_dir(tmp_path).iterdir()] == ["step-00000002"]


def test_checkpoints_skipped_on_resume_are_set_aside_and_do_not_push_out_intact_ones(tmp_path, capsys):
    """Resumed from 12 past a damaged 18, a run saving every 4 steps must not delete 12 (and then 16)
    to keep the damaged 18: that one is set aside, and keep_checkpoints counts the usable ones."""
    for step in (12, 18):
        _save_small(tmp_path, step)
    (checkpoint.checkpoints_dir(tmp_path) / "step-00000018" / "state.pt").write_bytes(b"torn")
    assert checkpoint.latest(tmp_path).name == "step-00000012"
    _save_small(tmp_path, 16)
    assert sorted(p.name for p in checkpoint.checkpoints_dir(tmp_path).iterdir()) == [
        "step-00000012", "step-00000016", "step-00000018.skipped"]
    assert "step-00000018 was skipped on resume; set aside as step-00000018.skipped" in capsys.readouterr().err
    _save_small(tmp_path, 20)
    assert sorted(p.name for p in checkpoint.checkpoints_dir(tmp_path).iterdir()) == [
        "step-00000016", "step-00000018.skipped", "step-00000020"]
    assert checkpoint.latest(tmp_path).name == "step-00000020"


def test_a_rank_told_that_rank_0_could_not_make_the_first_checkpoint_folder_says_so(tmp_path):
    """Rank 0 failing to make ``checkpoints/`` at the run's first save (a full disk, no permission):
    the other ranks, told so by the collective (``agree``: the ranks where the part failed), end with
    the one line naming rank 0, not a FileNotFoundError of the folder that was never made."""
    with pytest.raises(checkpoint.CheckpointNotWritten, match=r"rank 0 could not write its part .*no earlier checkpoint"):
        checkpoint.save(tmp_path, 5, None, None, None, {"x": 1}, rank=1, agree=lambda failed: [0])
    assert not (tmp_path / "checkpoints").exists()


def test_a_small_file_the_disk_refuses_is_a_write_error_not_a_bug(tmp_path):
    """torch's writer says "basic_ios::clear: iostream error" where a file that fits its 64 kB buffer
    (rank-R.pt, state.pt: the first files a save writes) fails at the flush: a0f3f02's list of a write's
    words lacked it, so a full disk at a save ended in 'internal error: RuntimeError' (exit 1). And
    safetensors' "(os error N)" is that errno: a quota, a read-only disk, permissions were each called
    'Input/output error' (the words as safetensors 0.8 says them, seen with the syscall failed by strace)."""
    import errno
    import resource

    from safetensors import SafetensorError

    from kolectra.pipeline.cli.errors import describe

    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (500, hard))  # the 1.5 kB file fails at the buffer's flush
    try:
        with pytest.raises(checkpoint.CheckpointWriteError) as e:
            checkpoint.written(tmp_path / "rank-0.pt", lambda path: torch.save({"rng": torch.zeros(10)}, path))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert "iostream error" in str(e.value.__cause__)
    assert e.value.errno == errno.EFBIG and e.value.filename == str(tmp_path / "rank-0.pt")

    for code, words, said in ((errno.EDQUOT, "Disk quota exceeded", "the disk quota is exceeded"),
                              (errno.EROFS, "Read-only file system", "read-only file system"),
                              (errno.EACCES, "Permission denied", "permission denied"),
                              (errno.ENOSPC, "No space left on device", "no space left on the device")):
        def refused(path, words=words, code=code):
            raise SafetensorError(f"Error while serializing: I/O error: {words} (os error {code})")

        with pytest.raises(checkpoint.CheckpointWriteError) as e:
            checkpoint.written(tmp_path / "model.safetensors", refused)
        assert e.value.errno == code and describe(e.value) == f"{tmp_path / 'model.safetensors'}: {said}"
    assert checkpoint.said_errno("[enforce fail at inline_container.cc:746] . open file failed with strerror: "
                                 "Read-only file system") == errno.EROFS
