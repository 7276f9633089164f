"""A TPU pod's hosts on one store: which host reserves and publishes a pretraining build is the device
layer's answer, not ``RANK``.

On a pod ``kolectra pretrain --device xla`` runs one process per host, without torchrun, so no
``RANK``. Before, the store read ``RANK`` itself: every host took itself for rank 0 and tried to
reserve the build; on a bucket one host got the lease and the others waited for it, while the SPMD
program that host started waited for them (docs/tpu.md, "Pods and several hosts").

Two XLA hosts cannot be started here: torch-xla's CPU client is always one process, index 0 of 1
(``pjrt_registry.cc`` builds it with no distributed runtime, whatever ``TPU_WORKER_ID`` says; run
below with it set). So the two halves are tested at their seam, with real parts:

- the device layer: ``model.runtime.rank_and_world`` gives torchrun's variables on the CPU and the
  XLA runtime's process index and count on XLA, asked without compiling or fixing the SPMD mode, so
  the device built afterwards (with a compilation cache) is the one it would have been; the pretrain
  stage asks it before the store sees the build (an XLA run under torchrun is refused first);
- the store: two processes without ``RANK`` on a bucket, ranked as a pod's two hosts are: host 0
  reserves, trains and publishes, host 1 follows in its own cache and mirrors only its own part, and
  both meet inside the build, as the hosts of one SPMD program must.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kolectra.core import storage
from kolectra.core.errors import UserInputError
from kolectra.core.stage import StageOutput
from kolectra.pipeline.store.artifacts import Resumable, Store
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.request import Request
from tests.s3_support import bucket, s3_endpoint  # noqa: F401 - fixtures

ROOT = Path(__file__).resolve().parents[1]
LAUNCHER = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
REQUEST = Request(kind="checkpoint", name="pod", stage_version=1, config={"steps": 1})
MEET_SECONDS = 60  # a host alone in the program gives up after this (the failure before the fix)


def test_on_the_cpu_the_rank_is_torchruns(monkeypatch):
    from kolectra.model import runtime  # torch: not in the hosts' processes below

    for key in LAUNCHER:
        monkeypatch.delenv(key, raising=False)
    assert runtime.rank_and_world("cpu") == (0, 1)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert runtime.rank_and_world("cpu") == runtime.rank_and_world("cuda") == (1, 2)
    monkeypatch.setenv("RANK", "one")
    with pytest.raises(UserInputError, match="RANK='one' in the environment is not a whole number"):
        runtime.rank_and_world("cpu")


def test_a_rank_outside_the_world_size_is_refused_before_the_store_sees_it(tmp_path, monkeypatch):
    """RANK=1 left in the environment without WORLD_SIZE (1) ended in an internal error, an IndexError in
    shard_order.rank_files after the build was reserved (m8); WORLD_SIZE=2 alone in torch's rendezvous
    ('environment variable RANK expected'); both refused in one line, nothing reserved."""
    from kolectra.model import runtime
    from kolectra.pipeline import stages

    for key in LAUNCHER:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("RANK", "1")
    with pytest.raises(UserInputError, match=r"RANK=1 with WORLD_SIZE=1 \(unset: 1\) in the environment: a rank is "
                                             r"one of 0 to WORLD_SIZE - 1 \(torchrun sets both\)"):
        stages.pretrain(Store(tmp_path), "examples/none")
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    for rank, world in (("2", "2"), ("-1", "2"), ("0", "0")):
        monkeypatch.setenv("RANK", rank)
        monkeypatch.setenv("WORLD_SIZE", world)
        with pytest.raises(UserInputError, match=f"RANK={rank} with WORLD_SIZE={world} \\('{world}'\\)"):
            runtime.rank_and_world("cpu")
    # WORLD_SIZE without the rest of torchrun's variables: torch's rendezvous failed as an internal error
    monkeypatch.delenv("RANK")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(UserInputError, match="WORLD_SIZE=2 in the environment without RANK: a run of several processes "
                                             "is started by torchrun, which sets them all"):
        stages.pretrain(Store(tmp_path), "examples/none")
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    monkeypatch.setenv("RANK", "0")  # the rendezvous address, read where the device joins the group
    with pytest.raises(UserInputError, match="WORLD_SIZE=2 in the environment without MASTER_ADDR, MASTER_PORT:"):
        runtime.resolve("cpu", False, 1)


def test_an_xla_run_under_torchrun_is_refused_before_the_store_sees_it(tmp_path, monkeypatch):
    """The stage asks the device layer first. Before, nothing asked it until the build: the store
    took this RANK=1 for a follower and waited for a rank 0 (15 minutes by default), and only the
    device, built inside the build, refused; here the missing examples would have been named first."""
    from kolectra.pipeline import stages

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(UserInputError, match="start it without torchrun"):
        stages.pretrain(Store(tmp_path), "examples/none", sets=["train.device=xla"])
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing reserved, nothing waited for


def _host(rank: int, world: int, root: str, cache: str, meet: str, report: str) -> None:
    """One pod host as ``kolectra pretrain --device xla`` is on a slice: no launcher variables, its
    place in the run from the device layer (here given: the CPU runtime has one host only)."""
    for key in LAUNCHER:
        os.environ.pop(key, None)
    os.environ["KOLECTRA_CACHE"] = cache
    storage.reset()
    store = open_store(root)
    seen = {}

    def meet_all(step: str) -> None:  # the SPMD program goes on only with every host in it
        Path(meet, f"{step}-{rank}").touch()
        deadline = time.monotonic() + MEET_SECONDS
        while sum(1 for p in Path(meet).iterdir() if p.name.startswith(step)) < world:
            if time.monotonic() > deadline:
                raise TimeoutError(f"host {rank}: alone in the program at {step} after {MEET_SECONDS} s")
            time.sleep(0.1)

    def train(out: Path) -> StageOutput:
        seen["out"] = str(out)
        meet_all("start")
        step = out / "checkpoints" / "step-00000001"
        step.mkdir(parents=True, exist_ok=True)
        (step / f"rank-{rank}.pt").write_text(f"host {rank}'s state")
        store.checkpoint_saved(step)  # the trainer's hook: the store mirrors this host's part
        meet_all("saved")
        if rank == 0:
            seen["mirror"] = sorted(storage.listing(f"{root}/.work/checkpoint-{REQUEST.id()}/out/checkpoints"))
            (out / "model.txt").write_text("trained by the pod")
        return StageOutput(stats={})

    run = Resumable(family={"kind": "checkpoint"}, scratch=("checkpoints",), rank=rank)
    art = store.build(REQUEST, train, resumable=run)
    Path(report, f"host-{rank}.json").write_text(json.dumps({**seen, "published": str(art.path)}))


def test_a_pods_second_host_follows_the_first_on_a_bucket(bucket, tmp_path):  # noqa: F811
    meet, report = tmp_path / "meet", tmp_path / "report"
    meet.mkdir()
    report.mkdir()
    hosts = [mp.get_context("spawn").Process(target=_host, args=(r, 2, bucket, str(tmp_path / f"cache-{r}"),
                                                                  str(meet), str(report))) for r in (1, 0)]
    for h in hosts:  # the follower first: it must not take the lease and wait for itself
        h.start()
    for h in hosts:
        h.join(timeout=300)
    assert [h.exitcode for h in hosts] == [0, 0]
    seen = [json.loads((report / f"host-{r}.json").read_text()) for r in (0, 1)]
    store = open_store(bucket)
    [art] = store.list("checkpoint")
    assert {s["published"] for s in seen} == {str(art.path)}
    assert [f["path"] for f in art.manifest["files"]] == ["model.txt"]
    # host 0 trained in the run it reserved, host 1 in its own copy of it, each mirroring its own part
    assert seen[0]["out"].endswith(f"/.work/checkpoint-{REQUEST.id()}/out")
    assert seen[1]["out"].endswith(f"/.work/checkpoint-{REQUEST.id()}-rank1/out")
    assert seen[0]["out"].startswith(str(tmp_path / "cache-0")) and seen[1]["out"].startswith(str(tmp_path / "cache-1"))
    assert seen[0]["mirror"] == ["step-00000001/rank-0.pt", "step-00000001/rank-1.pt"]
    assert storage.children(f"{bucket}/.work") == [] and storage.children(f"{bucket}/.locks") == []


@pytest.mark.xla
def test_the_xla_runtime_gives_the_host_index_before_the_device_is_built(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in (*LAUNCHER, "XLA_USE_BF16")}
    # TPU_WORKER_ID: a TPU host's worker id; the CPU client is one process whatever it says
    env.update(PJRT_DEVICE="CPU", CPU_NUM_DEVICES="2", TPU_WORKER_ID="1")
    done = subprocess.run([sys.executable, "-m", "tests.test_store_pod_rank", str(tmp_path / "xla-cache")], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {"asked": [0, 1], "compiled": False, "spmd_fixed": False, "device": [0, 1, 2], "sum": 8.0}


def _xla_host(cache_dir: str) -> dict:
    """In a process of its own (torch-xla reads its environment once): what the stage asks, then the device."""
    import torch
    import torch_xla

    from kolectra.model import runtime

    asked = runtime.rank_and_world("xla", cache_dir)
    xlac = torch_xla._XLAC
    state = {"asked": list(asked), "compiled": xlac._xla_computation_cache_is_initialized(),
             "spmd_fixed": xlac._xla_get_spmd_config_is_locked()}
    dev = runtime.resolve("xla", xla_cache_dir=cache_dir)  # refused if asking had compiled already
    try:
        total = (torch.ones(4, device=dev.torch_device) * 2).sum()
        dev.step_done()
        return {**state, "device": [dev.rank, dev.world_size, dev.devices], "sum": float(total.cpu())}
    finally:
        dev.close()


if __name__ == "__main__":  # the subprocess side of the XLA test: its report as the last stdout line
    print(json.dumps(_xla_host(sys.argv[1])))
