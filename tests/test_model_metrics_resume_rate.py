"""The first line after a resume gives the rate of its whole window, not of this process's part of it.

A checkpoint written between log steps (a SIGTERM's, a `--save-every` that does not divide `train.log_every`)
carries the open window's sums and tokens; its elapsed time was not saved, so the resumed run's first line
divided the whole window's tokens by the seconds since the resume: `kolectra pretrain` stopped at step 54 of a
5-step window read `46,365 tok/s` at step 55 beside 17,000 on every other line, and a run resumed at its last
step (nothing left to train) logged 216,627 tok/s in metrics.jsonl for a real 4,300. MFU was read the same way.
Real MetricsLog, real files, real time."""

from __future__ import annotations

import json
import time

import torch

from kolectra.model import metrics, runtime

TOKENS_A_STEP = 1000


def _step(log: metrics.MetricsLog, step: int, write: bool, seconds: float) -> None:
    time.sleep(seconds)
    log.add({"loss": torch.tensor(1.0)}, tokens=TOKENS_A_STEP)
    log.step_done(step, 1e-3, write)


def test_a_window_cut_by_a_checkpoint_keeps_its_seconds_across_the_resume(tmp_path):
    dev, path = runtime.resolve("cpu"), tmp_path / "metrics.jsonl"
    first = metrics.MetricsLog(path, dev, 10, flops_per_step=1e9, peak_flops=1e12)
    for step in (1, 2, 3, 4):  # a window of 5 steps, cut by a checkpoint after step 4
        _step(first, step, write=False, seconds=0.1)
    state = first.state_dict()
    first.close()

    resumed = metrics.MetricsLog(path, dev, 10, resume_step=4, flops_per_step=1e9, peak_flops=1e12)
    resumed.load_state_dict(state)
    _step(resumed, 5, write=True, seconds=0.1)
    resumed.close()
    line = json.loads(path.read_text(encoding="utf-8").splitlines()[-1])
    assert line["step"] == 5 and line["nonpad_tokens"] == 5 * TOKENS_A_STEP
    # 5,000 tokens in about 0.5 s (a little more on a busy machine): about 10,000 a second; before, about
    # 50,000 (5,000 tokens over the 0.1 s since the resume)
    assert 5_000 < line["tokens_per_s"] < 11_000, line["tokens_per_s"]
    assert 0.004 < line["mfu"] < 0.011, line["mfu"]  # 5 steps of 1e9 FLOPs in ~0.5 s at a peak of 1e12; before ~0.05


def test_a_checkpoint_of_an_older_kolectra_without_the_seconds_still_loads(tmp_path):
    dev, path = runtime.resolve("cpu"), tmp_path / "metrics.jsonl"
    first = metrics.MetricsLog(path, dev, 10)
    _step(first, 1, write=False, seconds=0.0)
    state = {k: v for k, v in first.state_dict().items() if k != "window_seconds"}
    first.close()
    resumed = metrics.MetricsLog(path, dev, 10, resume_step=1)
    resumed.load_state_dict(state)
    _step(resumed, 2, write=True, seconds=0.0)
    resumed.close()
    assert json.loads(path.read_text(encoding="utf-8").splitlines()[-1])["nonpad_tokens"] == 2 * TOKENS_A_STEP
