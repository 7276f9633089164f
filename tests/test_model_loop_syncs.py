"""The pretraining loop never waits for the device between log steps (issue 45).

On a GPU a host sync in the loop (``.item()``, ``float(t)``, ``if bool(t)``, ``.tolist()``,
``.cpu()``, printing a tensor) stalls the host until the queued steps finish, so the next step
cannot be queued meanwhile. ``torch.cuda.set_sync_debug_mode`` sees that only on CUDA; here the
real loop runs a few steps on the CPU with counting wrappers around torch's own methods that read a
tensor's values on the host, and every such call made by the loop's code while it is in a step that
writes no metrics line (and is neither the run's first, timed step nor a checkpoint's save) is a
failure, named with where it came from. The step itself is traced for syncs by
tests/test_cuda_defaults.py; this covers what is around it.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import traceback

import pytest
import torch

from kolectra.model import data, device, health, metrics, optim, presets, step_graph, train
from tests.model_support import small_examples

# Tensor methods that hand the host a tensor's values, so on a GPU wait for the work queued before.
READS = ("item", "tolist", "cpu", "numpy", "__float__", "__int__", "__bool__", "__index__", "__repr__", "__format__")
TRAIN = train.__file__
# The loop's own code: a read made here, or in torch code called from here (clipping, the
# optimizer), counts. The step's graph is dynamo's to check (tests/test_cuda_defaults.py), and
# CPU-only modules (model/cpu_dropout.py draws its seed with int(): a CPU tensor) never run on a GPU.
LOOP = {m.__file__ for m in (train, metrics, data, device, health, optim, step_graph)}
TORCH = torch.__file__.rsplit("/", 1)[0] + "/"


def _from_loop(frame) -> bool:
    """Whether the first frame outside torch, from ``frame`` up, is the loop's code."""
    while frame is not None and frame.f_code.co_filename.startswith(TORCH):
        frame = frame.f_back
    return frame is not None and frame.f_code.co_filename in LOOP


def _loop_step(frame) -> tuple[int, object] | None:
    """(0-based step, run) of the innermost frame of train.py's loop or step on the stack, or None
    outside the loop; None too inside the run's first (timed) step and a checkpoint's save."""
    found = None
    while frame is not None:
        code = frame.f_code
        if code.co_filename == TRAIN:
            if code.co_name in ("first_step", "save_checkpoint"):
                return None
            if found is None and code.co_name in ("train_step", "train_loop") and "step" in frame.f_locals:
                found = frame.f_locals["step"], frame.f_locals["run"]
        frame = frame.f_back
    return found


@pytest.fixture
def syncs(monkeypatch):
    """Where each host read of a tensor made by the loop between log steps came from."""
    found: list[str] = []
    for name in READS:
        real = getattr(torch.Tensor, name)

        def counted(self, *args, _real=real, _name=name, **kwargs):
            caller = sys._getframe(1)
            at = _loop_step(caller)
            if at is not None and _from_loop(caller):
                step, run = at
                done, t = step + 1, run.cfg.train
                if done % t.log_every and done != t.steps:
                    found.append(f"Tensor.{_name} at step {done}:\n" + "".join(traceback.format_stack(caller, limit=4)))
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    return found


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return small_examples(tmp_path_factory.mktemp("inputs"))


@pytest.mark.parametrize("objective", ["electra", "mlm_then_rtd"])
def test_no_host_sync_between_log_steps(inputs, tmp_path, syncs, objective):
    """Micro-steps, a scheduled temperature, mlm_then_rtd's phase switch and a checkpoint between log steps."""
    examples, tok = inputs
    cfg = presets.tiny()
    cfg = dataclasses.replace(
        cfg, objective=dataclasses.replace(cfg.objective, objective=objective, temperature_start=2.0),
        train=dataclasses.replace(cfg.train, steps=12, batch_size=8, warmup_steps=2, log_every=4, grad_accum=2,
                                  save_every=6))
    train.pretrain(cfg, examples, tok, tmp_path)
    assert not syncs, f"{len(syncs)} host sync(s) between log steps; the first:\n{syncs[0]}"
    lines = [json.loads(ln) for ln in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [ln["step"] for ln in lines] == [4, 8, 12]  # the log steps did read back (the wrappers saw them)
