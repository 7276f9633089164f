"""SIGTERM during pretraining: finish the step, save a checkpoint of it, end as :class:`Terminated`.

A scheduler or a preempted machine sends SIGTERM and, after a grace period (30 s on GCE and TPU
VMs, Kubernetes' default, Slurm's ``KillWait``), SIGKILL. Raised at once, as the command's own
handler did (``pipeline/cli/errors.py``), SIGTERM lost every step since the last ``save_every``
checkpoint. Inside :class:`StopAtStepEnd` the first SIGTERM only asks for a stop: the loop (model/
train.py) finishes the step it is in, saves a checkpoint of it (atomic, as every checkpoint:
model/checkpoint.py) and raises Terminated, so ``--resume`` goes on from that very step. A step
or a save longer than the grace is cut by the SIGKILL, which leaves the previous checkpoint as it
was. Raised at once, as before, are a second SIGTERM, one before this process finished a step (it
has nothing newer than its checkpoint to save) and one on several hosts that cannot agree on a
step between them (XLA pods: see :meth:`kolectra.model.device.Device.any_rank`).

A SIGHUP (the terminal's hangup: an SSH session that dropped) stops the run the same way, unless the
caller ignores it (``nohup``), as an ignored SIGTERM stays ignored: :mod:`kolectra.core.stops`.

Ranks: every rank of a torchrun job checks at each log step (every ``train.log_every`` steps)
whether any rank was asked to stop (one all-reduce of a flag in the job's own group, where the
loss is read back anyway: no host sync between log steps, no second process group), so they stop at
the same step and write one checkpoint together, whether all got the signal (one machine's torchrun
forwards it to its ranks) or only one machine's ranks did (that machine was preempted). The grace
must therefore hold ``log_every`` steps and a save (base on an H200: 100 steps of 66 ms); one
process checks after every step. The same all-reduce tells every rank whether one failed in its
work of that log step (rank 0's metrics lines: :mod:`model.rank_failures`).
"""

from __future__ import annotations

import threading

from kolectra.core import stops
from kolectra.core.errors import Terminated
from kolectra.model.rank_failures import FAILED, settle


class StopAtStepEnd:
    """``with StopAtStepEnd(dev) as stop:`` around the training steps; :meth:`armed` once a step of
    this process is done, :meth:`agreed` after each step (every rank calls it: collective)."""

    def __init__(self, dev):
        self.dev = dev
        self.requested = False
        self._armed = False
        self._previous: dict = {}

    def __enter__(self) -> "StopAtStepEnd":
        if threading.current_thread() is threading.main_thread():
            self._previous = stops.catch(self._handler)
        return self

    def __exit__(self, kind, *exc) -> None:
        stops.put_back(self._previous)
        if self.requested and kind is None:  # came after the last step's check: not lost, raised here
            raise Terminated()

    def armed(self) -> None:
        """A step of this process is done: from now on a SIGTERM waits for the step's end (where
        the ranks can agree on one)."""
        self._armed = self.dev.ranks_can_agree

    def _handler(self, signum, frame) -> None:
        stops.note(signum)
        if self._armed and not self.requested:
            self.requested = True  # nothing printed here: a handler may interrupt a print of the main thread
            return
        raise Terminated()

    def agreed(self, log_step: bool, failed: Exception | None = None, doing: str = "") -> bool:
        """Whether the run stops after this step: a SIGTERM reached this rank or another. Several
        ranks agree at log steps only (``log_step``, the same steps on every rank). ``failed``: this
        rank's failure in the step's own work (rank 0's metrics lines), told to every rank in the
        same all-reduce: this rank raises it, the others :class:`~kolectra.model.rank_failures.
        AnotherRankFailed` naming it and what it was ``doing``."""
        if self.dev.world_size > 1 and not log_step:
            if failed is not None:  # (lines are written at log steps only: no rank waits for this one)
                raise failed
            return False
        states = self.dev.rank_states(int(self.requested) | (FAILED if failed is not None else 0))
        if states is None:  # the ranks cannot agree: a SIGTERM pending here is raised now, as before
            self._armed = False
            if failed is not None:
                raise failed
            if self.requested:
                raise Terminated()
            return False
        return any(s & 1 for s in settle(states, failed, doing))
