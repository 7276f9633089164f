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

Ctrl-C is asked the same way once a step is done (:mod:`kolectra.core.ctrl_c`: the first press is a
request, one line printed at once; the checkpoint's stop then ends with status 130, not 143): the ranks
agree on it in the same all-reduce, whose flag says too whether a stop signal asked on any rank (then
the stop is SIGTERM's). A press during the run's last step saves nothing: the run is done, and its export
and publish are let finish (``ctrl_c``'s FINISH), which :meth:`StopAtStepEnd.__exit__` hands over to.
So are a SIGTERM or SIGHUP during the last step or after it (before 2026-12-02 one in the last step saved
a checkpoint of it and stopped, and one after it, in the export or publish, stopped at once): the export
writes a third of a checkpoint's bytes, so it fits the grace a checkpoint's save would have had; the
command then ends as that signal's stop (143, 129). XLA pods' hosts stop at once in the last step (they
cannot agree on a step), and let the export finish after it, as for a Ctrl-C.
"""

from __future__ import annotations

import threading

from kolectra.core import ctrl_c, stops
from kolectra.core.errors import Terminated
from kolectra.model.rank_failures import FAILED, settle

SIGNALLED = 4  # a rank's state bit at an agreement: a stop signal (SIGTERM, SIGHUP), not a Ctrl-C, asked it


class StopAtStepEnd:
    """``with StopAtStepEnd(dev) as stop:`` around the training steps; :meth:`armed` once a step of
    this process is done, :meth:`agreed` after each step (every rank calls it: collective)."""

    def __init__(self, dev, steps: int = 0, log_every: int = 1):
        self.dev, self.steps, self.log_every = dev, steps, max(1, log_every)
        self.requested = False
        self.by_ctrl_c = False  # the request was a Ctrl-C's (core/ctrl_c.py), not a stop signal's
        self.signalled = False  # at the last agreement: a stop signal asked on some rank (the stop is SIGTERM's)
        self.at = 0  # the step in progress, 1-based (the loop sets it): the Ctrl-C line names it
        self._armed = False
        self._ctrl_c = False
        self._previous: dict = {}

    def __enter__(self) -> "StopAtStepEnd":
        if threading.current_thread() is threading.main_thread():
            self._previous = stops.catch(self._handler)
        return self

    def __exit__(self, kind, *exc) -> None:
        stops.put_back(self._previous)
        if kind is not None:
            if self._ctrl_c:
                ctrl_c.at_once()
            return
        signalled = self.requested and not self.by_ctrl_c  # (in the last step, or after the last step's check)
        if signalled and not ctrl_c.can_finish():  # no window to finish in (the loop called alone): raised here
            raise Terminated()
        # the steps are done: a Ctrl-C or stop signal now (or one during the last step) lets the export and
        # publish finish, then stops (core/ctrl_c.py)
        if ctrl_c.can_finish():
            ctrl_c.let_finish("{0}: training is done; exporting and publishing the run first, then stopping; "
                              "{0} again to stop at once" if self.dev.is_main else None,
                              pressed=self.requested, signum=stops.received() if signalled else None)

    def armed(self) -> None:
        """A step of this process is done: from now on a SIGTERM waits for the step's end (where
        the ranks can agree on one), and so does a first Ctrl-C."""
        self._armed = self.dev.ranks_can_agree
        if self._armed and not self._ctrl_c and ctrl_c.active() and ctrl_c.mode() == ctrl_c.NOW:
            self._ctrl_c = True
            ctrl_c.at_step_end(self._pressed, self._pressed_line)

    def _pressed(self) -> bool:
        """A first Ctrl-C: a request as a SIGTERM's; refused (stop at once) after a stop signal's."""
        if self.requested:
            return False
        self.requested = self.by_ctrl_c = True
        return True

    def _pressed_line(self) -> str | None:
        if not self.dev.is_main:
            return None
        at = min(max(self.at, 1), self.steps) if self.steps else max(self.at, 1)
        # several ranks agree at log steps only: the step they stop at
        stop = at if self.dev.world_size == 1 else min(self.steps or at, -(-at // self.log_every) * self.log_every)
        if stop == self.steps:
            return (f"Ctrl-C: finishing the last step ({self.steps}), then exporting and publishing the run; "
                    "Ctrl-C again to stop at once")
        if stop == at:
            return f"Ctrl-C: finishing step {at} and saving a checkpoint of it; Ctrl-C again to stop at once"
        return (f"Ctrl-C: finishing the steps up to {stop} (the ranks stop together at a log step) and saving a "
                "checkpoint; Ctrl-C again to stop at once")

    def stopped(self, done: int, total: int, saved: str, signalled: bool) -> KeyboardInterrupt:
        """The stop after the checkpoint ``saved`` of step ``done``: SIGTERM's (status 143: ``signalled``, a
        stop signal asked) or Ctrl-C's (130)."""
        if signalled:
            return Terminated(f"terminated ({stops.name()}) after step {done} of {total}, saved as the checkpoint "
                              f"{saved}")
        return KeyboardInterrupt(f"interrupted (Ctrl-C) after step {done} of {total}, saved as the checkpoint {saved}")

    def _handler(self, signum, frame) -> None:
        stops.note(signum)
        if self._armed and not self.requested:
            self.requested = True  # nothing printed here: a handler may interrupt a print of the main thread
            return
        raise Terminated()

    def agreed(self, log_step: bool, failed: Exception | None = None, doing: str = "") -> bool:
        """Whether the run stops after this step: a SIGTERM (or Ctrl-C) reached this rank or another. Several
        ranks agree at log steps only (``log_step``, the same steps on every rank). ``failed``: this
        rank's failure in the step's own work (rank 0's metrics lines), told to every rank in the
        same all-reduce: this rank raises it, the others :class:`~kolectra.model.rank_failures.
        AnotherRankFailed` naming it and what it was ``doing``."""
        if self.dev.world_size > 1 and not log_step:
            if failed is not None:  # (lines are written at log steps only: no rank waits for this one)
                raise failed
            return False
        signalled = self.requested and not self.by_ctrl_c
        states = self.dev.rank_states(int(self.requested) | (FAILED if failed is not None else 0)
                                      | (SIGNALLED if signalled else 0))
        if states is None:  # the ranks cannot agree: a SIGTERM pending here is raised now, as before
            self._armed = False
            if failed is not None:
                raise failed
            if self.requested:
                raise Terminated() if signalled else KeyboardInterrupt()
            return False
        states = settle(states, failed, doing)
        self.signalled = any(s & SIGNALLED for s in states)
        return any(s & 1 for s in states)
