"""What an ``env://`` launcher (``torchrun``) tells a process of a data-parallel run: its rank and
the number of ranks (RANK, WORLD_SIZE), and whether the rendezvous (MASTER_ADDR, MASTER_PORT) can
start. Read by :mod:`model.device` and :mod:`model.xla` before a process group or device is built;
a variable missing or out of range is refused in one line, not met as an IndexError or in torch's
rendezvous."""

from __future__ import annotations

import os

from kolectra.core.errors import UserInputError


def launcher_rank_and_world() -> tuple[int, int]:
    """(RANK, WORLD_SIZE) as ``torchrun`` (or any ``env://`` launcher) sets them; (0, 1) without one."""
    values = {}
    for key, default in (("RANK", "0"), ("WORLD_SIZE", "1")):
        raw = os.environ.get(key, default)
        try:
            values[key] = int(raw)
        except ValueError:
            raise UserInputError(f"{key}={raw!r} in the environment is not a whole number (torchrun sets it)") from None
    rank, world = values["RANK"], values["WORLD_SIZE"]
    if world < 1 or not 0 <= rank < world:  # a RANK left in the environment without its WORLD_SIZE: an IndexError
        shown = "unset: 1" if "WORLD_SIZE" not in os.environ else repr(os.environ["WORLD_SIZE"])
        raise UserInputError(f"RANK={rank} with WORLD_SIZE={world} ({shown}) in the environment: a rank is one of 0 to "
                             "WORLD_SIZE - 1 (torchrun sets both); unset RANK to run as one process")
    if world > 1 and not os.environ.get("RANK", "").strip():  # every process rank 0; torch: 'RANK expected'
        raise rendezvous_missing(world, ["RANK"])
    return rank, world


def rendezvous_missing(world: int, missing: list[str]) -> UserInputError:
    """WORLD_SIZE without the rest of torchrun's variables: init_process_group failed as an internal error."""
    return UserInputError(f"WORLD_SIZE={world} in the environment without {', '.join(missing)}: a run of several "
                          "processes is started by torchrun, which sets them all; unset WORLD_SIZE to run as one process")


def check_rendezvous(world: int) -> None:
    """Before ``init_process_group``: ``env://`` needs MASTER_ADDR and MASTER_PORT (torchrun sets them)."""
    if missing := [k for k in ("MASTER_ADDR", "MASTER_PORT") if not os.environ.get(k, "").strip()]:
        raise rendezvous_missing(world, missing)
