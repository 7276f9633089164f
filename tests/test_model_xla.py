"""The pretrain loop on XLA, proven on the CPU (PJRT_DEVICE=CPU): recompile-free, SPMD, portable checkpoints.

Each XLA run happens in a subprocess (``python -m tests.test_model_xla SPEC``): torch-xla reads
its environment (PJRT_DEVICE, CPU_NUM_DEVICES) once per process, and this keeps the test
process's torch state untouched. The three XLA runs start together to share the wall clock:

- A: one device, 8 steps with a checkpoint at 5, interrupted in step 7;
- B: the same on four devices (SPMD over a 1-D mesh), the same global batch;
- C: one device, resuming a checkpoint the CPU wrote.

The examples pack several sequences into some rows (``doc_ids``), as the examples stage does by
default, so every step builds the per-sequence attention bias and positions.

A's checkpoint is then resumed on the CPU, in this process. Every run logs each step
(``log_every=1``), so ``metrics.jsonl`` shows torch-xla's counters step by step.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kolectra.core.config import override
from kolectra.model import presets, runtime, train
from tests.model_support import build_examples, build_tokenizer

pytestmark = pytest.mark.xla  # skipped where torch_xla is absent (tests/conftest.py)
ROOT = Path(__file__).resolve().parents[1]
TINY = ["model.hidden=32", "model.layers=2", "model.heads=2", "model.intermediate=64", "model.embedding_size=32",
        "model.generator_hidden=16", "model.generator_layers=2", "model.generator_heads=1",
        "model.generator_intermediate=32", "train.steps=8", "train.batch_size=8", "train.warmup_steps=2",
        "train.lr=2e-3", "train.log_every=1", "train.save_every=5", "train.cpu_threads=1", "train.force_resume=true"]
PEAK = "train.peak_tflops=1"  # A and B log MFU
CRASH_AT = 7  # an interruption in step 7 leaves the checkpoint of step 5


class Interrupted(Exception):
    pass


def _run(spec: dict) -> dict:
    """One pretrain run as ``spec`` says (sets, paths, crash_at, resume); returns stats and XLA counters."""
    cfg = override(presets.tiny(), spec["sets"])
    real_resolve, report = runtime.resolve, {}

    def resolve(*args, **kwargs):  # wraps the device so the run can be cut short at a given step
        dev = real_resolve(*args, **kwargs)
        if spec.get("crash_at"):
            inner, inner_flush, count, flushing = dev.step_done, dev.flush, [0], [False]

            def step_done():
                if flushing[0]:  # a flush (before a checkpoint, at the close) is no training step
                    return inner()
                count[0] += 1
                if count[0] == spec["crash_at"]:
                    raise Interrupted(f"simulated interruption in step {count[0]}")
                inner()

            def flush():
                flushing[0] = True
                try:
                    inner_flush()
                finally:
                    flushing[0] = False

            dev.step_done, dev.flush = step_done, flush
        return dev

    runtime.resolve = resolve
    try:
        result = train.pretrain(cfg, Path(spec["examples"]), Path(spec["tok"]), Path(spec["out"]),
                                resume=spec.get("resume", False))
        report.update(stats=result.stats, compute=result.compute)
    except Interrupted:
        report["interrupted"] = True
    finally:
        runtime.resolve = real_resolve
    if cfg.train.device == "xla":
        import torch_xla.debug.metrics as met
        import torch_xla.runtime as xr

        from kolectra.model.xla import counters

        report.update(counters=counters(), fallback_ops=list(met.executed_fallback_ops()),
                      devices=xr.global_runtime_device_count())
    return report


def _rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _loader_state(out: Path) -> dict:
    """The data position stored in the checkpoint of step 5."""
    import torch

    state = torch.load(out / "checkpoints" / "step-00000005" / "state.pt", map_location="cpu", weights_only=False)
    return state["loader"]


def _log_state(out: Path) -> dict:
    """Rank 0's metrics window and token count in the checkpoint of step 5."""
    import torch

    return torch.load(out / "checkpoints" / "step-00000005" / "rank-0.pt", map_location="cpu", weights_only=True)["log"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("xla")
    tok = build_tokenizer(root / "tok")
    examples = build_examples(root / "examples", tok, n=64, seq_len=32)
    paths = {"examples": str(examples), "tok": str(tok)}

    # The CPU checkpoint that C resumes on XLA.
    cpu_out = root / "cpu"
    assert _run({**paths, "sets": TINY, "out": str(cpu_out), "crash_at": CRASH_AT}) == {"interrupted": True}

    loader_at = {"cpu": _loader_state(cpu_out)}
    xla = TINY + ["train.device=xla"]
    specs = {
        "A": ({**paths, "sets": xla + [f"train.xla_cache_dir={root / 'cache'}", PEAK], "out": str(root / "A"),
               "crash_at": CRASH_AT}, 1),
        "B": ({**paths, "sets": xla + [PEAK], "out": str(root / "B"), "crash_at": CRASH_AT}, 4),
        "C": ({**paths, "sets": xla, "out": str(cpu_out), "resume": True}, 1),
        # DeBERTaV3's sharing: the discriminator's tables are a parametrization (generator's + delta)
        "D": ({**paths, "sets": xla + ["model.embedding_sharing=gdes"], "out": str(root / "D"),
               "crash_at": CRASH_AT}, 1),
    }
    procs = {}
    for name, (spec, n_devices) in specs.items():
        env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "XLA_USE_BF16")}
        # LLVM optimisation off: the XLA CPU compiler is several times faster on these tiny graphs.
        env.update(PJRT_DEVICE="CPU", CPU_NUM_DEVICES=str(n_devices), XLA_FLAGS="--xla_backend_optimization_level=0")
        procs[name] = subprocess.Popen([sys.executable, "-m", "tests.test_model_xla", json.dumps(spec)], cwd=ROOT,
                                       env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reports = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=900)
        assert proc.returncode == 0, f"XLA run {name} failed:\n{stderr[-4000:]}"
        reports[name] = json.loads(stdout.strip().splitlines()[-1])

    loader_at.update(A=_loader_state(root / "A"), B=_loader_state(root / "B"))
    reports["log_at"] = _log_state(root / "A")
    reports["loader_at"] = loader_at
    reports["rows"] = {name: _rows(root / name) for name in ("A", "B", "D")}  # before A goes on, on the CPU
    # A's XLA checkpoint, resumed on the CPU in this process.
    reports["A_on_cpu"] = _run({**paths, "sets": TINY + [PEAK], "out": str(root / "A"), "resume": True})
    return root, reports


def test_steps_after_warmup_run_one_graph_without_compiles_transfers_or_fallbacks(runs):
    root, reports = runs
    for name in ("A", "B", "D"):
        assert reports[name]["interrupted"]
        rows = reports["rows"][name]
        # Line 6 waited for its values in a step closure; closing the device delivered it.
        assert [r["step"] for r in rows] == [1, 2, 3, 4, 5, 6]
        compiles = [r["xla_compiles"] for r in rows]
        assert compiles[1] <= 2 and all(c == compiles[1] for c in compiles[1:]), compiles
        # The only reads from the device are the metric lines, one transfer each, delivered by a
        # step closure after the next step was dispatched: no .item() or host sync inside a step.
        # (Line 6 also counts the checkpoint written after step 5.)
        transfers = [r["xla_transfers_to_host"] for r in rows]
        assert transfers[:5] == [0, 1, 2, 3, 4] and transfers[5] > 5
        assert all(r["xla_aten_fallbacks"] == 0 for r in rows)
        c = reports[name]["counters"]
        assert c["xla_compiles"] == compiles[1]  # nor in the checkpoint of step 5 and step 6
        # One graph per step: 7 steps were traced (the interruption came at the end of step 7 and
        # closing the device ran it with the flush), 7 programs ran, 2 distinct ones were compiled.
        assert c["xla_executions"] == CRASH_AT
        assert c["xla_aten_fallbacks"] == 0 and reports[name]["fallback_ops"] == []
        assert all(math.isfinite(r["loss"]) for r in rows)
    assert any((root / "cache").iterdir())  # the persistent compile cache was written
    # The device loader reads ahead, yet a checkpoint records the position after the steps trained.
    assert reports["loader_at"]["A"] == reports["loader_at"]["B"] == reports["loader_at"]["cpu"]
    # Line 5's values arrive in a step closure; the checkpoint of step 5 still counts its tokens.
    assert reports["log_at"]["nonpad_tokens"] == reports["rows"]["A"][4]["nonpad_tokens"] > 0


def test_the_runs_trained_on_packed_rows(runs):
    """The examples hold rows of several sequences (doc_ids), so the one-graph-per-step figures
    above include the per-sequence attention bias and positions."""
    import numpy as np

    from kolectra.model.data import ExampleLoader

    root, _ = runs
    rows = next(ExampleLoader(root / "examples", batch_size=64, seed=0, prefetch=0))
    assert (rows["doc_ids"].max(axis=1) >= 2).any() and np.isin(rows["doc_ids"], [0, 1, 2]).all()


def test_spmd_over_four_devices_matches_one_device(runs):
    _, reports = runs
    one, four = reports["rows"]["A"], reports["rows"]["B"]
    assert len(one) == len(four) == 6
    for a, b in zip(one, four):
        for key in ("loss", "gen_loss", "disc_loss"):
            assert b[key] == pytest.approx(a[key], rel=1e-4), (a["step"], key)


def test_mfu_counts_every_device_of_the_mesh(runs):
    """B's step runs on four devices, each with the peak given, not on one per host: its MFU is a
    quarter of A's for the same FLOPs per token (it was A's, four times too high)."""
    _, reports = runs
    one, four = reports["rows"]["A"], reports["rows"]["B"]
    for a, b in zip(one, four):
        assert 4 * b["mfu"] / b["tokens_per_s"] == pytest.approx(a["mfu"] / a["tokens_per_s"], rel=1e-6)


def test_xla_checkpoint_resumes_on_cpu(runs):
    root, reports = runs
    r = reports["A_on_cpu"]
    assert r["stats"]["resumed_from_step"] == 5 and r["compute"]["device"].startswith("cpu")
    rows = _rows(root / "A")
    assert [x["step"] for x in rows] == list(range(1, 9))
    assert all("xla_compiles" in x for x in rows[:5]) and not any("xla_compiles" in x for x in rows[5:])
    # The same weights and optimizer state carry on: the loss continues from where XLA left it.
    assert all(abs(x["loss"] / rows[4]["loss"] - 1) < 0.15 for x in rows[5:])
    assert (root / "A" / "hf" / "discriminator" / "model.safetensors").is_file()


def test_cpu_checkpoint_resumes_on_xla(runs):
    root, reports = runs
    r = reports["C"]
    assert r["stats"]["resumed_from_step"] == 5 and r["compute"]["device"].startswith("xla")
    rows = _rows(root / "cpu")
    assert [x["step"] for x in rows] == list(range(1, 9))
    xla_rows = rows[5:]
    assert all("xla_compiles" in x for x in xla_rows)
    assert xla_rows[-1]["xla_compiles"] <= 2 and xla_rows[-1]["xla_aten_fallbacks"] == 0
    assert all(abs(x["loss"] / rows[4]["loss"] - 1) < 0.15 for x in xla_rows)
    assert (root / "cpu" / "hf" / "discriminator" / "model.safetensors").is_file()


def test_a_micro_batch_not_divisible_by_the_mesh_is_refused(runs):
    """8 rows in 4 micro-batches are 2 rows for 4 devices: refused by name before training (XLA's
    SPMD partitioner aborted the process with a failed C++ check)."""
    root, _ = runs
    spec = {"examples": str(root / "examples"), "tok": str(root / "tok"), "out": str(root / "E"),
            "sets": TINY + ["train.device=xla", "train.grad_accum=4"]}
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "XLA_USE_BF16")}
    env.update(PJRT_DEVICE="CPU", CPU_NUM_DEVICES="4", XLA_FLAGS="--xla_backend_optimization_level=0")
    proc = subprocess.run([sys.executable, "-m", "tests.test_model_xla", json.dumps(spec)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "train.batch_size 8 is not divisible by grad_accum 4 x 4 devices (1 ranks)" in proc.stderr


def test_device_descriptions_and_misuse(runs):
    _, reports = runs
    assert reports["B"]["devices"] == 4 and reports["A"]["devices"] == 1
    assert reports["C"]["compute"]["device"] == "xla (CPU x 1 devices, SPMD)"
    with pytest.raises(ValueError, match="unknown device"):
        runtime.resolve("tpu")


if __name__ == "__main__":  # the subprocess side: one XLA run, its report as the last stdout line
    print(json.dumps(_run(json.loads(sys.argv[1]))))
