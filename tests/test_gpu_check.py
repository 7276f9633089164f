"""benchmarks/gpu.py, the prepared GPU check (issue 45), where there is no GPU: it refuses in one line
and measures nothing; its budget, MFU and JSON come from pure functions, checked here with made-up
timings (no timing of this machine is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from benchmarks import gpu, gpu_phases

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
    assert sum(gpu.PHASES[name][1] for name in gpu.DEFAULT) <= gpu.BUDGET_S


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


def test_a_phase_stopped_at_its_budget_keeps_what_it_finished_and_says_where_it_stood():
    """A cold compile of the CUDA-graph step outlasted its 75 s on the H200 (2026-11-28) and the phase
    came back with one line; now the runners it finished keep their figures."""
    progress = {"kolectra": {"samples_s": [0.1, 0.1], "first_step_s": 1.2, "peak_memory_bytes": 2e10},
                "naive_hf": {"status": "stopped in its first step (building, compiling, capturing)",
                             "started_at": 1000.0}}
    runners = gpu.stopped(progress, 75.0, now=1070.5)
    assert runners["kolectra"] == progress["kolectra"]
    assert runners["naive_hf"] == {"status": progress["naive_hf"]["status"], "in_first_step_s": 70.5,
                                   "phase_budget_s": 75.0}
    figures = gpu.variant_result(runners, 1e12, 256 * 128, 989e12)
    assert figures["kolectra"]["ms"] == 100.0 and figures["naive_hf"]["status"].startswith("stopped in its first step")
    assert gpu.stopped({"kolectra_compiled": {"status": "stopped before its timed steps ended", "first_step_s": 80.0}},
                       90.0, now=0.0)["kolectra_compiled"]["first_step_s"] == 80.0


def test_phase_order_runs_the_named_phases_and_builds_examples_for_pretrain():
    # by default no Inductor default-mode phase: its cold compiles would not fit beside CUDA graphs' ones
    assert gpu.phase_order(None, False) == gpu.DEFAULT == [p for p in gpu.ORDER if not p.endswith("/compiled")
                                                            and p not in ("finetune", "loop_host")]
    assert gpu.phase_order("loop_host", False) == ["examples", "loop_host"]  # the loop needs examples
    assert gpu.phase_order("loop_host,small/cuda_graphs", True) == ["small/cuda_graphs", "loop_host"]
    assert gpu.phase_order(None, True) == [p for p in gpu.DEFAULT if p != "examples"]
    assert gpu.phase_order("base/compiled", True) == ["base/compiled"]
    # fine-tuning (not by default) tunes the checkpoint the run trains, from examples it builds
    assert "finetune" not in gpu.DEFAULT and gpu.phase_order("finetune", False) == ["examples", "pretrain", "finetune"]
    assert gpu.phase_order("pretrain, base/cuda_graphs", False) == ["base/cuda_graphs", "examples", "pretrain"]
    assert gpu.phase_order("pretrain", True) == ["pretrain"]
    with pytest.raises(SystemExit, match="unknown phase.*base/flash.*known: small/eager"):
        gpu.phase_order("base/flash", False)


def test_a_bad_set_is_refused_before_any_gpu_is_asked_for(capsys):
    with pytest.raises(SystemExit) as e:
        gpu.main(["--set", "train.bf16=false"])
    assert e.value.code == 2 and "model.* settings and train.compile, train.compile_mode only" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        gpu.main(["--set", "model.no_such_knob=1"])
    assert e.value.code == 2 and "no_such_knob" in capsys.readouterr().err
    # the loop's mode: checked as a CUDA run's (whole-step is CUDA's), a wrong one refused
    with pytest.raises(SystemExit) as e:
        gpu.main(["--set", "train.compile_mode=whole-step", "--set", "train.compile=false"])
    assert e.value.code == 2 and "leave train.compile at auto" in capsys.readouterr().err
    # the step phases take only the model's settings: the loop's mode does not refuse them
    model = gpu_phases.model_config("small", 8000, ["model.attention_dropout=0", "train.compile_mode=whole-step"])
    assert model.attention_dropout == 0 and model.vocab_size == 8000
    assert gpu_phases.loop_config("small", "cuda", ["train.compile_mode=whole-step"]).train.compile_mode == "whole-step"


def test_kernel_table_ranks_kernels_and_says_how_busy_the_device_was():
    kernels = [("gemm", 30_000.0, 6), ("layer_norm", 6_000.0, 12), ("adamw", 3_000.0, 2), ("copy", 1_000.0, 40)]
    t = gpu_phases.kernel_table(kernels, steps=2, wall_s=0.04, top=3)
    assert t["launches_per_step"] == 30.0 and t["busy_ms_per_step"] == 20.0
    assert t["busy_share"] == 0.5  # 20 ms of kernels in a 40 ms step: the device waited half the step
    assert [k["kernel"] for k in t["top"]] == ["gemm", "layer_norm", "adamw"]
    assert t["top"][0] == {"kernel": "gemm", "ms_per_step": 15.0, "share": 0.75, "launches_per_step": 3.0}
    assert t["ms_per_step_by_kind"] == {"matmul": 15.0, "other": 4.5, "copy": 0.5}


def test_kernels_are_sorted_into_kinds_by_their_names():
    names = {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64": "matmul",
             "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN": "matmul", "aten::addmm": "matmul",
             "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16": "attention",
             "fmha_cutlassF_bf16_aligned_64x64_rf_sm80": "attention",
             "triton_tem_fused_flex_attention_backward_0": "attention",
             "triton_per_fused__to_copy_add_native_layer_norm_3": "triton",
             "Memcpy DtoD (Device -> Device)": "copy", "void at::native::vectorized_elementwise_kernel<4>": "other"}
    assert {n: gpu_phases.kernel_kind(n) for n in names} == names


def test_the_step_phase_rehearsed_on_the_cpu_times_packed_rows_and_profiles_the_step(tmp_path, monkeypatch):
    """The child's whole path but CUDA (tiny shapes): each runner's timed steps, and the profile of
    kolectra's step (CPU ops here, CUDA kernels on a GPU)."""
    progress = tmp_path / "progress.json"
    monkeypatch.setenv(gpu_phases.PROGRESS_ENV, str(progress))
    # 4 timed steps a runner, not the check's 30: the same path, a fifth of the CPU (about 130 CPU s
    # with 30 on this machine); a deadline far off, so a machine under load cannot cut them short
    monkeypatch.setattr(gpu_phases, "TIMED", 4)
    raw = gpu_phases.time_variant("tiny", "eager", ["model.attention_dropout=0"], [4, 300, "gumbel"], time.time() + 900,
                                  device="cpu")
    assert set(raw) == {"kolectra", "naive_hf"}
    assert all(len(r["samples_s"]) == gpu_phases.TIMED and r["first_step_s"] > 0 for r in raw.values())
    # the host's queueing time is the part of each step before it waits for the device
    assert all(len(r["host_s"]) == gpu_phases.TIMED and all(0 < h <= s for h, s in zip(r["host_s"], r["samples_s"]))
               for r in raw.values())
    assert json.loads(progress.read_text()) == json.loads(json.dumps(raw))  # the last progress: the whole result
    prof = raw["kolectra"]["profile"]
    assert prof["what"].startswith("CPU ops") and prof["steps"] == gpu_phases.PROFILED
    assert 0 < len(prof["top"]) <= gpu_phases.TOP_KERNELS and sum(prof["ms_per_step_by_kind"].values()) > 0
    assert "profile" not in raw["naive_hf"]  # the baseline is timed, not profiled
    figures = gpu.variant_result(raw, 1e9, 4 * gpu.SEQ_LEN, None)
    assert figures["kolectra"]["profile"] == prof and figures["kolectra"]["mfu"] is None
    assert 0 < figures["kolectra"]["host_ms"] <= figures["kolectra"]["ms"]
    parts = figures["kolectra"]["host_ms_by_part"]  # forward, backward, AdamW, zero_grad: each step's host time split
    assert set(parts) == {"forward", "backward", "optimizer", "zero_grad"} and all(v > 0 for v in parts.values())


def test_the_step_runner_takes_another_sampler_than_the_devices():
    from benchmarks import step_bench
    from kolectra.model import presets

    cfg = presets.preset("tiny").model
    cfg = type(cfg)(**{**cfg.__dict__, "vocab_size": 300})
    kw = dict(seq_len=16, batch_size=2, bf16=False, device="cpu", fill=1.0, seed=0)
    assert step_bench.build_runner("kolectra", cfg, **kw).model.sampler == "inverse_cdf"  # the CPU's own
    runner = step_bench.build_runner("kolectra", cfg, **kw, sampler="gumbel")
    assert runner.model.sampler == "gumbel" and runner.step() > 0


def test_the_loop_phase_rehearsed_on_the_cpu_splits_the_hosts_time_a_step_by_part(tmp_path):
    """The real loop of the trainer on a small examples artifact: each part of a step timed on the host,
    the parts and the loop's own Python adding up to the host's time a step, the trainer's functions
    given back afterwards."""
    from kolectra.model import optim, rtd
    from kolectra.pipeline.store.factory import open_store
    from tests.model_support import small_chain

    small_chain(open_store(str(tmp_path)))
    before = (rtd.normalizers, optim.set_lr, torch.Tensor.backward)
    r = gpu_phases.loop_host(str(tmp_path), "e", 4, [], time.time() + 600, device="cpu", preset="tiny")
    assert (rtd.normalizers, optim.set_lr, torch.Tensor.backward) == before
    assert r["status"] == "ok" and r["steps"] == 4 and r["compile_mode"] is None  # the CPU's default: eager
    parts = r["host_ms_by_part"]
    assert {"step_function", "backward", "optimizer", "zero_grad", "clip_grads", "normalizers", "batches",
            "metric_sums", "set_lr", "other"} <= set(parts)
    assert all(v > 0 for k, v in parts.items() if k != "other")
    assert sum(parts.values()) == pytest.approx(r["host_ms_per_step"], abs=0.01)
    assert r["host_ms_per_step"] <= r["wall_ms_per_step"] * 1.05 and r["tokens_per_s"] > 0


def test_packed_rows_hold_three_whole_sequences_each():
    from benchmarks import step_bench
    from kolectra.model import rtd

    sp = rtd.Specials(vocab_size=300)
    for fill in (1.0, 0.75):
        for ids, types, doc in step_bench._batches(300, sp, 32, 8, fill, 0, "cpu", packed=True):
            n = int(32 * fill)
            assert (doc[:, n:] == 0).all() and (ids[:, n:] == sp.pad_id).all() and (types == 0).all()
            for row_ids, row_doc in zip(ids, doc):
                starts = [i for i in range(n) if i == 0 or row_doc[i] != row_doc[i - 1]]
                assert row_doc[:n].unique().tolist() == [1, 2, 3] and len(starts) == 3
                ends = [*(s - 1 for s in starts[1:]), n - 1]
                assert all(row_ids[s] == sp.cls_id and row_ids[e] == sp.sep_id and e - s >= 3
                           for s, e in zip(starts, ends))


def test_the_loop_is_read_against_the_bare_step_and_a_bad_batch_is_refused(capsys):
    steps = {"small": {"cuda_graphs": {"kolectra_compiled": {"mfu": 0.2}}}}
    assert gpu.loop_vs_step(steps, {"last_window": {"mfu": 0.19}}) == 0.95
    # the H200's run (2026-11-28): windows after the compiling one, their median read against the step
    logged = [{"step": 50, "tokens_per_s": 11400.3, "mfu": 0.00078}, *({"step": st, "tokens_per_s": t, "mfu": m} for st, t, m in
              [(100, 799838, 0.0549), (150, 679870, 0.0467), (200, 804969, 0.0553), (250, 669339, 0.046), (300, 636745, 0.0437)])]
    windows, median_mfu = gpu_phases.loop_windows(logged)
    assert [w["step"] for w in windows] == [100, 150, 200, 250, 300] and median_mfu == 0.0467
    assert gpu.loop_vs_step({"small": {"cuda_graphs": {"kolectra_compiled": {"mfu": 0.0528}}}},
                            {"median_window_mfu": median_mfu, "last_window": {"mfu": 0.0437}}) == 0.884
    assert gpu_phases.loop_windows(logged[:1]) == ([], None)
    assert gpu.loop_vs_step(steps, {"status": "failed"}) is None and gpu.loop_vs_step({}, {"last_window": {"mfu": 1}}) is None
    r = gpu.report("H200", 989e12, [], steps, {}, {"last_window": {"mfu": 0.18}}, 465, {"small": (128, 8000)})
    assert r["pretrain"]["loop_vs_step"] == 0.9 and r["config"]["shapes"] == {"small": {"batch": 128, "vocab_size": 8000}}
    for bad in ("huge=512", "base=0", "base"):
        with pytest.raises(SystemExit) as e:
            gpu.main(["--batch", bad])
        assert e.value.code == 2 and "expected PRESET=N" in capsys.readouterr().err


def test_a_report_without_its_headline_is_still_printed(capsys):
    """On the H200 the check measured every phase but its headline (a stopped compile) and then died
    dividing None by the baseline, printing nothing: a missing figure is null, its ratio too."""
    from benchmarks import common

    r = common.emit("gpu_check", "MFU", None, "naive_hf_step", 0.1549, {"device": "NVIDIA H200"})
    assert r["value"] is None and r["ratio"] is None and r["baseline"]["value"] == 0.1549
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["ratio"] is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: the phase would run")
def test_a_phase_runs_in_a_process_of_its_own_and_its_failure_comes_back_in_the_json():
    # the child imports the phases' module by itself (the check is run as a script); a step phase asked
    # for CUDA on a machine without it fails there, and the parent keeps the error line and the tail
    r = gpu.child("step", ["tiny", "eager", [], [4, 300]], 120)
    assert r["status"] == "failed" and r["error"].startswith("RuntimeError")
    assert "gpu_phases.py" in r["stderr_tail"] and "ModuleNotFoundError" not in r["stderr_tail"]
