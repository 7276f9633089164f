"""What an ``env://`` launcher (``torchrun``) tells a process of a data-parallel run: its rank and
the number of ranks (RANK, WORLD_SIZE), the GPU of its machine it drives (LOCAL_RANK), and whether
the rendezvous (MASTER_ADDR, MASTER_PORT) can start. Read by :mod:`model.device` and :mod:`model.xla`
before a process group or device is built; a variable missing, malformed or out of range is refused
in one line, not met as an IndexError, a ValueError in torch's rendezvous or CUDA's 'invalid device
ordinal'. A variable set to nothing (``RANK= kolectra ...``, the shell's way to clear one for a
command) is read as unset."""

from __future__ import annotations

import os

from kolectra.core.errors import UserInputError


def _given(key: str) -> str | None:
    """The variable's value, None where it is unset or blank."""
    raw = os.environ.get(key, "")
    return raw if raw.strip() else None


def _whole(key: str, default: int) -> int:
    raw = _given(key)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise UserInputError(f"{key}={raw!r} in the environment is not a whole number (torchrun sets it)") from None


def launcher_rank_and_world() -> tuple[int, int]:
    """(RANK, WORLD_SIZE) as ``torchrun`` (or any ``env://`` launcher) sets them; (0, 1) without one."""
    rank, world = _whole("RANK", 0), _whole("WORLD_SIZE", 1)
    if world < 1 or not 0 <= rank < world:  # a RANK left in the environment without its WORLD_SIZE: an IndexError
        shown = "unset: 1" if _given("WORLD_SIZE") is None else repr(os.environ["WORLD_SIZE"])
        raise UserInputError(f"RANK={rank} with WORLD_SIZE={world} ({shown}) in the environment: a rank is one of 0 to "
                             "WORLD_SIZE - 1 (torchrun sets both); unset RANK to run as one process")
    if world > 1 and _given("RANK") is None:  # every process rank 0; torch: 'RANK expected'
        raise rendezvous_missing(world, ["RANK"])
    return rank, world


def rendezvous_missing(world: int, missing: list[str]) -> UserInputError:
    """WORLD_SIZE without the rest of torchrun's variables: init_process_group failed as an internal error."""
    return UserInputError(f"WORLD_SIZE={world} in the environment without {', '.join(missing)}: a run of several "
                          "processes is started by torchrun, which sets them all; unset WORLD_SIZE to run as one process")


def check_rendezvous(world: int) -> None:
    """Before ``init_process_group``: ``env://`` needs MASTER_ADDR and MASTER_PORT (torchrun sets them), the
    port a whole number from 1 to 65535 (torch: 'internal error: ValueError: invalid literal for int()',
    'port must have value from 0 to 65535')."""
    if missing := [k for k in ("MASTER_ADDR", "MASTER_PORT") if _given(k) is None]:
        raise rendezvous_missing(world, missing)
    raw = os.environ["MASTER_PORT"]
    if not raw.strip().isdigit() or not 0 < int(raw) < 65536:
        raise UserInputError(f"MASTER_PORT={raw!r} in the environment is not a port (1 to 65535): the rank 0 "
                             "machine's rendezvous port, which torchrun sets (--master-port)")


def local_rank(devices: int) -> int:
    """The GPU of this machine a process drives: LOCAL_RANK (torchrun sets it; 0 unset), one of the ``devices``
    this process sees. torchrun --nproc_per_node above a machine's GPUs, or a LOCAL_RANK left in the
    environment, was CUDA's 'invalid device ordinal' in torch.cuda.set_device, an internal error."""
    local = _whole("LOCAL_RANK", 0)
    if not 0 <= local < devices:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        seen = f"{devices} CUDA device{'s' if devices != 1 else ''}" + (
            f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else "")
        raise UserInputError(f"LOCAL_RANK={local} in the environment, but this process sees {seen}: one process a GPU, "
                             "so torchrun's --nproc_per_node is at most the GPUs of a machine; unset LOCAL_RANK to "
                             "run as one process on the first GPU")
    return local


# launchers that start several copies of one command with variables of their own, not torchrun's: (the
# launcher, its number of tasks, the task's index). Not SLURM_NTASKS: an sbatch script has it, one process.
OTHER_LAUNCHERS = (("srun", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID"),
                   ("mpirun (Open MPI)", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"),
                   ("mpirun (MPICH, Intel MPI)", "PMI_SIZE", "PMI_RANK"))


def not_one_of_tasks() -> None:
    """Refuse pretraining started as one of several tasks by ``srun`` or ``mpirun`` without torchrun's
    RANK and WORLD_SIZE: each task took itself for a run of one process, exit 0: on one root the first
    trained and the others waited for it and reused its artifact, on a disk of each machine N copies of
    one run trained alone; a job of N GPUs trained on one each. With WORLD_SIZE given (torchrun under
    srun, one a machine; or WORLD_SIZE=1, each task alone on purpose) nothing is refused."""
    if _given("WORLD_SIZE") is not None:
        return
    for launcher, size_key, rank_key in OTHER_LAUNCHERS:
        size = (_given(size_key) or "").strip()
        if size.isdigit() and int(size) > 1:
            task = (_given(rank_key) or "?").strip()
            raise UserInputError(
                f"this process is task {task} of {size} that {launcher} started ({rank_key}={task}, {size_key}="
                f"{size}) without torchrun's RANK and WORLD_SIZE: each task would pretrain alone, not one run over "
                f"{size} processes; start torchrun instead, one a machine (srun --ntasks-per-node=1 torchrun "
                "--nnodes ... --nproc_per_node GPUS ...: docs/pretraining.md, Multi-GPU), or set WORLD_SIZE=1 to "
                "pretrain in each task alone")


def one_process(what: str) -> None:
    """Refuse a command that runs as one process when a launcher started several (WORLD_SIZE above 1):
    ``torchrun ... kolectra finetune`` hung, every rank joining a process group nothing used while rank 1
    waited for rank 0's build of the same eval, and rank 0 for rank 1 in the group ('waiting for it to
    finish' until torchrun was killed)."""
    if (world := launcher_rank_and_world()[1]) > 1:
        raise UserInputError(f"{what} runs as one process, but WORLD_SIZE={world} in the environment (torchrun "
                             "starts one process a GPU for pretraining): start it without torchrun, or unset "
                             "WORLD_SIZE and RANK")
