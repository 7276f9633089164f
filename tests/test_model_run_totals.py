"""Every figure in a checkpoint's metrics and health is the run's whole (issue 46): after
``--resume`` the non-padding token count goes on from the checkpoint's (it restarted at 0: half
the tokens reported), and under ``torchrun`` with 2 ranks it counts both ranks (rank 0's alone made
the health check report 50 % padding where the rows hold almost none). Driven through ``kolectra
pretrain`` as a user runs it: killed and resumed, and launched by ``torchrun --no-python``."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kolectra.pipeline import stages
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import Store
from tests.model_support import small_chain
from tests.test_faults_pretrain import SETS
from tests.test_faults_publish import child

FLAGS = [f"--set={s}" for s in SETS]  # 12 steps of 8 rows, a line a step, a checkpoint every 4


@pytest.fixture(scope="module")
def chain(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("chain")
    small_chain(Store(root))
    return root


def _store(chain: Path, dest: Path) -> tuple[Store, str]:
    shutil.copytree(chain, dest)
    store = Store(dest)
    return store, str(store.list("examples")[0].path)


def _pretrain(store: Store, ex: str, capsys, *extra: str) -> dict:
    assert main(["pretrain", "--examples", ex, "--out", str(store.root), "--preset", "tiny", *FLAGS, *extra]) == 0
    art = Path(capsys.readouterr().out.strip().splitlines()[-1])
    lines = [json.loads(ln) for ln in (art / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    return {"stats": json.loads((art / "manifest.json").read_text(encoding="utf-8"))["stats"], "lines": lines}


def _padding(ex: str) -> float:
    """The examples' own padding share: what every row of the run holds, whoever reads it."""
    stats = json.loads(Path(ex, "stats.json").read_text(encoding="utf-8"))
    index = json.loads(Path(ex, "index.json").read_text(encoding="utf-8"))
    return 1.0 - stats["tokens"] / (stats["examples"] * index["max_seq_length"])


@pytest.fixture(scope="module")
def straight(chain, tmp_path_factory) -> dict:
    """The reference run, in this process (a child's start would cost its imports alone, ~7 CPU s): the
    resumed and the torchrun runs are the ones driven as a user runs them."""
    store, ex = _store(chain, tmp_path_factory.mktemp("straight") / "root")
    art = stages.pretrain(store, ex, preset="tiny", sets=SETS).path
    return {"stats": json.loads((art / "manifest.json").read_text())["stats"],
            "lines": [json.loads(ln) for ln in (art / "metrics.jsonl").read_text().splitlines()]}


def test_a_resumed_run_counts_the_tokens_of_the_steps_before_its_checkpoint(chain, straight, tmp_path, capsys):
    store, ex = _store(chain, tmp_path / "root")
    proc = child("pretrain", str(store.root), ex, "step10", *FLAGS)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    resumed = _pretrain(store, ex, capsys, "--resume")
    assert resumed["stats"]["resumed_from_step"] == 8
    whole = straight["stats"]["nonpad_tokens_seen"]
    assert whole > 0 and resumed["stats"]["nonpad_tokens_seen"] == whole  # was the 4 steps after step 8 only
    assert [ln["nonpad_tokens"] for ln in resumed["lines"]] == [ln["nonpad_tokens"] for ln in straight["lines"]]
    assert resumed["lines"][-1]["nonpad_tokens"] == whole
    health = resumed["stats"]["health"]["figures"]
    assert health["nonpad_tokens"] == whole and health["padding_share"] == straight["stats"]["health"]["figures"][
        "padding_share"]
    assert abs(health["padding_share"] - _padding(ex)) < 0.02


def test_two_ranks_under_torchrun_count_both_ranks_tokens(chain, straight, tmp_path):
    store, ex = _store(chain, tmp_path / "root")
    torchrun = Path(sys.executable).with_name("torchrun")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([str(torchrun), "--standalone", "--nproc-per-node=2", "--no-python",
                           str(Path(sys.executable).with_name("kolectra")), "pretrain", "--examples", ex, "--out",
                           str(store.root), "--preset", "tiny", *FLAGS, "-q"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [art] = store.list("checkpoint")
    stats = art.manifest["stats"]
    assert stats["ranks"] == 2
    figures = stats["health"]["figures"]
    # the same 12 global batches of 8 rows of the same examples: about the straight run's tokens (other rows)
    assert abs(figures["padding_share"] - _padding(ex)) < 0.05, figures  # was about 0.5: rank 0's half
    assert stats["nonpad_tokens_seen"] == figures["nonpad_tokens"]
    assert 0.9 < stats["nonpad_tokens_seen"] / straight["stats"]["nonpad_tokens_seen"] < 1.1
    assert "padding:" not in proc.stderr
