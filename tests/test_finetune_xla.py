"""Fine-tuning on XLA, proven on the CPU (PJRT_DEVICE=CPU): both tasks through the same skeleton and Device.

Each run happens in a subprocess (``python -m tests.test_finetune_xla SPEC``), as in
``tests/test_model_xla.py``: torch-xla reads its environment once per process. The two runs start
together. The task classes are wrapped so that every epoch's record also carries torch-xla's
compile count: with batches padded to ``max_length`` (``Device.static_shapes``) the programs
compiled by the end of NSMC's second epoch (the very first update also creates the optimizer
state, a program of its own) serve every later one.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_finetune_e2e import FIXTURE, nsmc_file, tiny_model  # noqa: F401 - tiny_model is a fixture

pytestmark = pytest.mark.xla  # skipped where torch_xla is absent (tests/conftest.py)
ROOT = Path(__file__).resolve().parents[1]


def _run(spec: dict) -> dict:
    import torch_xla.debug.metrics as met

    from kolectra.finetune import config, korquad, nsmc, skeleton
    from kolectra.model.xla import counters

    base = {"nsmc": (nsmc.Nsmc, config.sample_nsmc), "korquad": (korquad.Korquad, config.sample_korquad)}
    task_cls, preset = base[spec["task"]]

    class Counted(task_cls):
        def epoch_record(self, scores):
            return {**super().epoch_record(scores), "xla_compiles": counters()["xla_compiles"]}

    cfg = dataclasses.replace(preset(), device="xla", **spec["cfg"])
    result = skeleton.run(Counted(), cfg, Path(spec["model"]), Path(spec["train"]), Path(spec["eval"]),
                          Path(spec["out"]))
    return {"stats": result.stats, "compute": result.compute, "counters": counters(),
            "fallback_ops": sorted(met.executed_fallback_ops())}


@pytest.fixture(scope="module")
def runs(tiny_model, tmp_path_factory):
    root = tmp_path_factory.mktemp("ft-xla")
    specs = {
        "nsmc": {"task": "nsmc", "train": str(nsmc_file(root / "train.txt", 60, 0)),
                 "eval": str(nsmc_file(root / "test.txt", 20, 1)),
                 # whole batches, dev and test of one size: fewer programs to compile
                 "cfg": {"max_length": 32, "batch_size": 16, "epochs": 3, "max_train_examples": 48,
                         "max_eval_examples": 12}},
        "korquad": {"task": "korquad", "train": str(FIXTURE), "eval": str(FIXTURE),
                    "cfg": {"max_length": 64, "max_query_length": 24, "doc_stride": 32, "batch_size": 16,
                            "epochs": 1, "max_train_examples": 6, "max_eval_examples": 6, "train_on_eval": True}},
    }
    procs = {}
    for name, spec in specs.items():
        spec.update(model=str(tiny_model), out=str(root / name))
        env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "XLA_USE_BF16")}
        env.update(PJRT_DEVICE="CPU", CPU_NUM_DEVICES="1", XLA_FLAGS="--xla_backend_optimization_level=0",
                   TRANSFORMERS_VERBOSITY="error")
        procs[name] = subprocess.Popen([sys.executable, "-m", "tests.test_finetune_xla", json.dumps(spec)], cwd=ROOT,
                                       env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reports = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=900)
        assert proc.returncode == 0, f"XLA fine-tuning {name} failed:\n{stderr[-4000:]}"
        reports[name] = json.loads(stdout.strip().splitlines()[-1])
        reports[name]["metrics"] = json.loads((root / name / "metrics.json").read_text(encoding="utf-8"))
    return root, reports


def test_later_epochs_compile_nothing_and_only_the_loss_reads_leave_the_device(runs):
    _, reports = runs
    compiles = [e["xla_compiles"] for e in reports["nsmc"]["metrics"]["epochs"]]
    assert len(compiles) == 3 and compiles[2] == compiles[1], compiles
    for name, r in reports.items():
        # the only device-to-host scalar reads are the loss curve's (aten::_local_scalar_dense)
        assert set(r["fallback_ops"]) <= {"aten::_local_scalar_dense"}, r["fallback_ops"]
        assert r["compute"]["device"] == "xla" and r["compute"]["device_description"].startswith("xla (CPU")


def test_both_tasks_finish_with_their_outputs_on_xla(runs):
    root, reports = runs
    m = reports["nsmc"]["metrics"]
    assert 0.0 <= m["accuracy"] <= 1.0 and [e["epoch"] for e in m["epochs"]] == [1, 2, 3]
    assert len((root / "nsmc" / "predictions.jsonl").read_text(encoding="utf-8").splitlines()) == m["test_examples"]
    k = reports["korquad"]["metrics"]
    assert 0.0 <= k["f1"] <= 100.0 and k["questions"] == 6
    contexts = {q["id"]: p["context"] for a in json.loads(FIXTURE.read_text(encoding="utf-8"))["data"]
                for p in a["paragraphs"] for q in p["qas"]}
    preds = json.loads((root / "korquad" / "predictions.json").read_text(encoding="utf-8"))
    assert len(preds) == 6 and all(v in contexts[q] for q, v in preds.items())


if __name__ == "__main__":  # the subprocess side: one XLA run, its report as the last stdout line
    print(json.dumps(_run(json.loads(sys.argv[1]))))
