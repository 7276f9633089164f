"""torchrun's environment as a user's shell holds it (model/launcher.py): what torchrun sets is taken, a
variable set to nothing is unset, and a malformed MASTER_PORT or LOCAL_RANK, or fine-tuning started by
torchrun, is refused in one line, not met as an internal error or a hang."""

from __future__ import annotations

import os

import pytest

from kolectra.core.errors import UserInputError
from kolectra.model import launcher
from kolectra.pipeline import stages
from kolectra.pipeline.store.artifacts import Store

LAUNCHER = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
            "CUDA_VISIBLE_DEVICES", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_RANK", "PMI_SIZE", "PMI_RANK")


@pytest.fixture
def env(monkeypatch):
    for key in LAUNCHER:
        monkeypatch.delenv(key, raising=False)
    return monkeypatch


def test_torchruns_own_variables_pass(env):
    """A rank of `torchrun --nproc_per_node 2` (its variables, the elastic agent's, SLURM's and Open MPI's
    leftovers beside them): nothing refused."""
    for key, value in dict(RANK="1", WORLD_SIZE="2", LOCAL_RANK="1", LOCAL_WORLD_SIZE="2", GROUP_RANK="0",
                           ROLE_RANK="1", TORCHELASTIC_RUN_ID="none", TORCHELASTIC_RESTART_COUNT="0",
                           TORCHELASTIC_MAX_RESTARTS="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="29500",
                           SLURM_PROCID="3", SLURM_NTASKS="4", OMPI_COMM_WORLD_RANK="3").items():
        env.setenv(key, value)
    assert launcher.launcher_rank_and_world() == (1, 2)
    launcher.check_rendezvous(2)
    assert launcher.local_rank(2) == 1
    env.setenv("RANK", "0")
    env.setenv("WORLD_SIZE", "1")  # --nproc_per_node 1: one process, no group
    assert launcher.launcher_rank_and_world() == (0, 1)


def test_a_variable_set_to_nothing_is_unset(env):
    """`RANK= WORLD_SIZE= kolectra pretrain ...` (the shell's way to clear a variable for one command, as the
    refusals' 'unset RANK' invite) was refused: "RANK='' in the environment is not a whole number" (n2)."""
    env.setenv("RANK", "")
    env.setenv("WORLD_SIZE", " ")
    env.setenv("LOCAL_RANK", "")
    assert launcher.launcher_rank_and_world() == (0, 1)  # before: UserInputError
    assert launcher.local_rank(1) == 0
    env.setenv("WORLD_SIZE", "2")  # a blank RANK beside a WORLD_SIZE is a missing one
    with pytest.raises(UserInputError, match="WORLD_SIZE=2 in the environment without RANK: "):
        launcher.launcher_rank_and_world()


@pytest.mark.parametrize("port", ["abc", "99999", "0", "-1"])
def test_a_master_port_that_is_no_port_is_refused_in_one_line(env, port):
    """WORLD_SIZE=2 RANK=0 MASTER_ADDR=localhost MASTER_PORT=abc kolectra pretrain ...: 'internal error:
    ValueError: invalid literal for int() with base 10: 'abc'' (99999: 'port must have value from 0 to
    65535'), from torch's rendezvous inside the device (n2)."""
    from kolectra.model import runtime

    for key, value in dict(RANK="0", WORLD_SIZE="2", MASTER_ADDR="localhost", MASTER_PORT=port).items():
        env.setenv(key, value)
    with pytest.raises(UserInputError, match=f"MASTER_PORT='{port}' in the environment is not a port "):
        launcher.check_rendezvous(2)
    if port == "abc":  # where the device joins the group (0 and -1 sent torch's rendezvous waiting for rank 1)
        with pytest.raises(UserInputError, match="MASTER_PORT='abc' in the environment is not a port "):
            runtime.resolve("cpu", False, 1)


def test_a_local_rank_without_its_gpu_is_refused_in_one_line(env):
    """torchrun --nproc_per_node 2 on a machine with one GPU (or LOCAL_RANK=1 left in the environment): the
    CUDA device's torch.cuda.set_device(cuda:1) said 'CUDA error: invalid device ordinal', an internal
    error; LOCAL_RANK=x an int() ValueError (n2). The CUDA device asks local_rank first."""
    env.setenv("LOCAL_RANK", "1")
    with pytest.raises(UserInputError, match=r"LOCAL_RANK=1 in the environment, but this process sees 1 CUDA device: "
                                             r"one process a GPU, so torchrun's --nproc_per_node is at most"):
        launcher.local_rank(1)
    env.setenv("CUDA_VISIBLE_DEVICES", "3")
    with pytest.raises(UserInputError, match=r"sees 1 CUDA device \(CUDA_VISIBLE_DEVICES='3'\)"):
        launcher.local_rank(1)
    assert launcher.local_rank(2) == 1
    env.setenv("LOCAL_RANK", "x")
    with pytest.raises(UserInputError, match="LOCAL_RANK='x' in the environment is not a whole number"):
        launcher.local_rank(2)


def test_fine_tuning_under_torchrun_is_refused_before_the_store_sees_it(env, tmp_path):
    """torchrun --nproc_per_node 2 --no-python kolectra finetune nsmc ... (the sample, 64 rows) hung: rank 0
    reserved the eval and waited in the process group its device joined for rank 1, which waited for rank 0's
    build ('another run ... is building the same request; waiting'), until torchrun was killed at 300 s (n2).
    Now every rank refuses at once; here the missing model would otherwise be named first."""
    for key, value in dict(RANK="1", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT="29500").items():
        env.setenv(key, value)
    with pytest.raises(UserInputError, match=r"fine-tuning \(nsmc\) runs as one process, but WORLD_SIZE=2 in the "
                                             r"environment .*start it without torchrun"):
        stages.finetune(Store(tmp_path), "nsmc", "checkpoint/none", tmp_path / "train.txt", tmp_path / "test.txt")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_study_and_the_demo_under_torchrun_are_refused_before_anything_is_built(env, tmp_path, capsys):
    """A study's readouts and `kolectra run`'s evaluations fine-tune: under torchrun they reached the same wait
    after pretraining (the study's NSMC splits written by both ranks first). Refused at once (n2)."""
    from kolectra.pipeline.cli import main

    for key, value in dict(RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT="29500").items():
        env.setenv(key, value)
    env.chdir(tmp_path)
    nsmc = tmp_path / "ratings.txt"
    nsmc.write_text("id\tdocument\tlabel\n1\t좋다\t1\n", encoding="utf-8")
    for args in (["study", "--corpus", "sample", "--nsmc-train", str(nsmc), "--flops", "1e9", "--out", "r"],
                 ["run", "--out", "r"]):
        assert main(args) == 2
        line = capsys.readouterr().err.strip().splitlines()[-1]
        assert "runs as one process, but WORLD_SIZE=2 in the environment" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ratings.txt"]  # nothing built


@pytest.mark.parametrize("launched", [dict(SLURM_STEP_NUM_TASKS="4", SLURM_PROCID="2", SLURM_NTASKS="4"),
                                      dict(OMPI_COMM_WORLD_SIZE="4", OMPI_COMM_WORLD_RANK="2"),
                                      dict(PMI_SIZE="4", PMI_RANK="2")])
def test_pretraining_as_a_task_of_srun_or_mpirun_without_torchrun_is_refused(env, tmp_path, capsys, launched):
    """`srun -n 4 kolectra pretrain ...` (or mpirun -np 4): SLURM_PROCID/SLURM_STEP_NUM_TASKS, not torchrun's RANK
    and WORLD_SIZE, so each task was a run of one process, exit 0: on one root the first trained and the others
    waited for it and reused its artifact (two tasks on the sample, n12's demo root: 'another run ... is building
    the same request; waiting', then 'reusing'), on a disk of each machine 4 copies trained alone. Now one line
    before anything is read; WORLD_SIZE given (torchrun's under srun, or 1: each task alone on purpose) or an
    sbatch script's own environment (SLURM_NTASKS, no step) passes on to the examples, here missing."""
    from kolectra.pipeline.cli import main

    def line() -> str:
        assert main(["pretrain", "--examples", "nothing", "--out", str(tmp_path / "r")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "Traceback" not in err[0], err
        return err[0]

    for key, value in launched.items():
        env.setenv(key, value)
    size_key, rank_key = [k for k in launched if k != "SLURM_NTASKS"]
    said = line()
    assert f"this process is task 2 of 4 that {'srun' if 'SLURM' in size_key else 'mpirun'}" in said, said
    assert f"({rank_key}=2, {size_key}=4) without torchrun's RANK and WORLD_SIZE" in said, said
    assert "set WORLD_SIZE=1 to pretrain in each task alone" in said, said
    assert not (tmp_path / "r").exists()
    env.setenv("WORLD_SIZE", "1")
    assert "no artifact 'nothing'" in line()
    env.delenv("WORLD_SIZE")
    if "SLURM_NTASKS" in launched:  # the batch script of `sbatch --ntasks 4`: one process, SLURM_PROCID 0
        env.delenv("SLURM_STEP_NUM_TASKS")
        env.setenv("SLURM_PROCID", "0")
        assert "no artifact 'nothing'" in line()


def test_a_refusal_under_torchrun_is_what_its_summary_of_failed_ranks_shows(tmp_path):
    """`torchrun --nproc_per_node 2 -m kolectra.pipeline.cli finetune ...` (real torchrun, 2 ranks on the CPU):
    after rank 0's one line, torchrun printed its ChildFailedError summary, whose entry for that rank said only
    'traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html', and rank 1, stopped
    by torchrun while it loaded, 'kolectra: terminated while starting; nothing was done', naming no cause. The
    refusal is now in torchrun's error file, so the summary shows it; a rank stopped so says torchrun did."""
    import subprocess
    import sys

    from kolectra.core.errors import BY_TORCHRUN
    from kolectra.pipeline.cli import TERMINATED_LINE
    from tests.s3_support import free_port

    environ = {k: v for k, v in os.environ.items() if k not in LAUNCHER and not k.startswith("TORCHELASTIC")}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master-port",
                           str(free_port()), "-m", "kolectra.pipeline.cli", "finetune", "nsmc", "--model", "none",
                           "--train", "a", "--test", "b", "--out", str(tmp_path / "r")],
                          capture_output=True, text=True, timeout=300, env=environ, cwd=tmp_path)
    refusal = "kolectra finetune nsmc: error: fine-tuning (nsmc) runs as one process, but WORLD_SIZE=2 in the environment"
    assert proc.returncode == 1 and "ChildFailedError" in proc.stderr, proc.stderr[-3000:]
    summary = proc.stderr.split("ChildFailedError")[-1]
    assert f"traceback : {refusal}" in summary, summary
    ours = [line for line in proc.stderr.splitlines() if line.startswith("kolectra") and "FAILED" not in line]
    stopped = (TERMINATED_LINE + BY_TORCHRUN, f"kolectra finetune nsmc: terminated{BY_TORCHRUN}; nothing was published")
    assert ours and all(line.startswith(refusal) or line in stopped for line in ours), ours  # as far as rank 1 got


def test_a_bad_option_value_under_torchrun_is_in_its_error_file(tmp_path, monkeypatch):
    """argparse's refusal (`--steps abc`) reached torchrun's summary of failed ranks as 'To enable traceback
    see: ...': the line is now written to the error file torchrun names, as kolectra's own refusals are."""
    import json

    from kolectra.pipeline.cli import main

    error_file = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(error_file))
    with pytest.raises(SystemExit) as stop:
        main(["pretrain", "--examples", "x", "--steps", "abc", "--out", str(tmp_path / "r")])
    assert stop.value.code == 2
    told = json.loads(error_file.read_text())["message"]["message"]
    assert told == "kolectra pretrain: error: argument --steps: invalid int value: 'abc'", told


@pytest.mark.parametrize("local_rank", ["0", "1"])
def test_a_data_parallel_build_prints_its_path_once_a_machine(tmp_path, env, capsys, local_rank):
    """Every rank of `torchrun --nproc_per_node 2 -m kolectra.pipeline.cli pretrain ...` returns the checkpoint rank 0
    published, and each printed its path: stdout held it twice (real run: two lines, 8 with 8 GPUs), so
    `CKPT=$(torchrun ... pretrain ...)` was no path for `finetune --model "$CKPT"`. The first rank of each machine
    (LOCAL_RANK 0) prints it now; the others' progress was rank 0's already."""
    import dataclasses

    from kolectra.core.stage import StageOutput
    from kolectra.pipeline.cli import commands, main
    from kolectra.pipeline.store.request import Request

    art = Store(tmp_path).build(Request(kind="checkpoint", name="c", stage_version=1, config={}),
                                lambda out: StageOutput(stats={}))
    env.setitem(commands.COMMANDS, "pretrain", dataclasses.replace(commands.COMMANDS["pretrain"],
                                                                  run=lambda args, store, beam_args: art, loads=""))
    for key, value in dict(RANK=local_rank, WORLD_SIZE="2", LOCAL_RANK=local_rank, LOCAL_WORLD_SIZE="2",
                           MASTER_ADDR="127.0.0.1", MASTER_PORT="29500").items():
        env.setenv(key, value)
    assert main(["pretrain", "--examples", "x", "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out == (f"{art.path}\n" if local_rank == "0" else "")  # before: the path on rank 1 too
