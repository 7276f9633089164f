"""The local memory check (corpus/local_memory.py) counts the local runner's worker processes: each
holds its own Kiwi, tokenizer or tables beside the launcher (docs/scale.md, "The local runner's worker processes").

Beam's own option parsing (``runners.pipeline_options``) and each job's fitted model; no job runs."""

from __future__ import annotations

import os

import pytest

from kolectra.corpus import build, examples, local_memory
from kolectra.corpus.local_memory import LocalMemoryError, check_local_memory
from kolectra.corpus.runners import pipeline_options
from kolectra.vocab import count

MODELS = {"corpus": build.LOCAL_MEMORY, "corpus beam's own": build.LOCAL_MEMORY_BEAM_OWN,
          "corpus near-dup": build.LOCAL_MEMORY_NEAR_DUP, "corpus near-dup beam's own": build.LOCAL_MEMORY_NEAR_DUP_BEAM_OWN,
          "examples": examples.LOCAL_MEMORY, "vocab": count.LOCAL_MEMORY}
SIZE = 50e6  # bytes of the model's measure


@pytest.mark.parametrize("name", MODELS)
def test_worker_processes_alone_can_make_a_local_run_not_fit(name):
    """A limit the launcher's estimate fits under, with room for less than one more worker
    process: refused with 4 worker processes, the message naming them and the remedy; the same
    run with its worker in the launcher (one worker, or Beam's in_memory mode) passes."""
    model = MODELS[name]
    in_process = model.peak_bytes(SIZE)
    limit = f"--local_memory_gb={(in_process + model.worker_mb * 0.5e6) / 1e9:.9f}"
    with pytest.raises(LocalMemoryError) as e:
        check_local_memory(pipeline_options(["--direct_num_workers=4", limit]), name, SIZE, model)
    said = str(e.value)
    assert said.startswith(f"{name}: ") and "\n" not in said
    assert "4 worker processes" in said and "--direct_num_workers 1" in said and "--local_memory_gb" in said
    assert f"{(in_process + 4 * model.worker_mb * 1e6) / 1e9:,.1f} GB" in said
    for one_process in (["--direct_num_workers=1"], ["--direct_num_workers=4", "--direct_running_mode=in_memory"]):
        assert check_local_memory(pipeline_options([*one_process, limit]), name, SIZE, model) == in_process


def test_the_default_worker_count_on_a_large_machine_is_counted(monkeypatch):
    """No --direct_num_workers: on 16 CPUs a large input gets 8 worker processes
    (runners.local_workers), and the check counts all 8."""
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(local_memory, "machine_memory", lambda: 1e12)
    options = pipeline_options([], 1 << 30)
    model = count.LOCAL_MEMORY
    assert check_local_memory(options, "vocab", SIZE, model) == pytest.approx(model.peak_bytes(SIZE) + 8 * model.worker_mb * 1e6)
    monkeypatch.setattr(local_memory, "machine_memory", lambda: model.peak_bytes(SIZE) + 7 * model.worker_mb * 1e6)
    with pytest.raises(LocalMemoryError, match=r"^vocab: .* \+ 8 worker processes x .*over this machine's memory"):
        check_local_memory(options, "vocab", SIZE, model)
