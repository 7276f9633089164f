"""benchmarks/gpu.py, the prepared GPU check (issue 45), where there is no GPU: it refuses in one line
and measures nothing; its budget, MFU and JSON come from pure functions, checked here with made-up
timings (no timing of this machine is asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks import gpu

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: the check would measure it")
def test_without_cuda_it_exits_nonzero_with_one_line():
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu.py"), "--budget-s", "5"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 1
    assert r.stdout == ""  # no JSON: nothing pretends to be a measurement
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu.py: no CUDA device here (torch ")
    assert "nothing to measure on this machine" in lines[0]


def test_phase_budget_keeps_the_later_phases_their_minimum():
    assert gpu.phase_budget(cap=75, minimum=45, left=480, later_minimums=200) == 75
    assert gpu.phase_budget(cap=75, minimum=45, left=260, later_minimums=200) == 60  # squeezed
    assert gpu.phase_budget(cap=75, minimum=45, left=240, later_minimums=200) is None  # skipped
    # the default plan fits the 8 minutes when every phase takes its minimum
    assert sum(minimum for _, minimum in gpu.PHASES.values()) <= gpu.BUDGET_S


@pytest.mark.parametrize("name, peak", [("NVIDIA H100 80GB HBM3", 989e12), ("NVIDIA H200", 989e12),
                                        ("NVIDIA A100-SXM4-80GB", 312e12)])
def test_known_gpus_have_their_dense_bf16_peak(name, peak):
    assert gpu.peak_bf16(name) == (peak, None)


def test_an_unknown_gpu_gets_null_mfu_and_a_note():
    peak, note = gpu.peak_bf16("Tesla T4")
    assert peak is None and "no datasheet bf16 peak known for 'Tesla T4'" in note and "--peak-tflops" in note
    assert gpu.mfu(1e12, 0.01, peak) is None
    assert gpu.peak_bf16("Tesla T4", given_tflops=65.0) == (65e12, "peak 65 TFLOP/s from --peak-tflops")


def test_mfu_and_step_figures():
    # 6.6e12 useful FLOPs a step in 20 ms on a 989 TFLOP/s part: 33.4 %
    assert gpu.mfu(6.6e12, 0.02, 989e12) == pytest.approx(6.6e12 / 0.02 / 989e12)
    samples = [0.020, 0.021, 0.019, 0.030, 0.020, 0.018, 0.022, 0.020, 0.019, 0.021, 0.050]
    f = gpu.step_figures(samples, 6.6e12, 128 * 128, 989e12)
    assert f["ms"] == 20.0 and f["steps"] == 11
    assert f["p10_ms"] == pytest.approx(19.0) and f["p90_ms"] == pytest.approx(30.0)
    assert f["tokens_per_s"] == pytest.approx(128 * 128 / 0.020, rel=1e-6)
    assert f["mfu"] == round(6.6e12 / 0.020 / 989e12, 4)
    assert gpu.step_figures([0.01], 1e12, 100, None)["mfu"] is None


def test_the_report_names_the_headline_and_keeps_failures():
    raw = {"kolectra_compiled": {"samples_s": [0.070, 0.066, 0.066], "first_step_s": 51.0,
                                 "peak_memory_bytes": 18.0e9}}
    graphs = gpu.variant_result(raw, 2.0e13, 256 * 128, 989e12)
    eager = gpu.variant_result({"kolectra": {"samples_s": [0.100], "first_step_s": 2.0, "peak_memory_bytes": 20.3e9},
                                "naive_hf": {"samples_s": [0.200], "first_step_s": 2.0, "peak_memory_bytes": 21e9}},
                               2.0e13, 256 * 128, 989e12)
    assert graphs["kolectra_compiled"]["peak_memory_gb"] == 18.0 and graphs["kolectra_compiled"]["first_step_s"] == 51.0
    # a compile that used the whole budget: no timed step, said so, its first step kept
    late = gpu.variant_result({"kolectra_compiled": {"samples_s": [], "first_step_s": 70.0, "peak_memory_bytes": 1}},
                              2.0e13, 1, 989e12)["kolectra_compiled"]
    assert late["status"] == "no timed step within the budget" and late["first_step_s"] == 70.0 and "ms" not in late
    steps = {"base": {"eager": eager, "cuda_graphs": graphs},
             "small": {"compiled": {"status": "stopped at its budget of 75 s"}}}
    r = gpu.report("NVIDIA H200", 989e12, [], steps, {"pretrain": {"seconds": 80.0}},
                   {"status": "ok", "health": "ok"}, 480)
    assert r["value"] == graphs["kolectra_compiled"]["mfu"] == round(2.0e13 / 0.066 / 989e12, 4)
    assert r["baseline"]["value"] == eager["naive_hf"]["mfu"]
    assert r["ratio"] == pytest.approx(r["value"] / r["baseline"]["value"])
    assert r["steps"]["small"]["compiled"]["status"].startswith("stopped at its budget")
    assert r["pretrain"]["health"] == "ok" and r["config"]["device"] == "NVIDIA H200"
    # an unknown GPU: no headline, nothing divided by None
    empty = gpu.report("Tesla T4", None, ["note"], {"base": {"cuda_graphs": gpu.variant_result(raw, 2e13, 1, None)}},
                       {}, None, 480)
    assert empty["value"] is None and empty["ratio"] is None and empty["notes"] == ["note"]
