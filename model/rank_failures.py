"""A failure on one rank of a data-parallel run ends every rank, each in one line.

Some of a run's work is done by one rank alone (rank 0 writes ``metrics.jsonl``, TensorBoard's
events and the export; each rank reads its own shards and its own part of a checkpoint; each
mirrors its part of a checkpoint to a store). A rank that failed there used to end alone, and the
others went on to the next collective and waited for it: gloo on one machine then reported the
closed connection as an internal error (status 1), NCCL, which does not report a peer's exit, held
them until torch.distributed's timeout (10-30 min). Here such work ends with an agreement instead:
every rank says whether it failed (one all-reduce of a world-size vector:
:meth:`kolectra.model.device.Device.rank_states`) and then the failing rank raises its own error
and the others :class:`AnotherRankFailed`, naming it.

Where: at the run's start (shards, checkpoint, metrics log: one all-reduce a run), at each log step
(the all-reduce the SIGTERM stop already makes there: :mod:`model.preempt`; no collective between log
steps), after a checkpoint is mirrored to a store (one a save), when the metrics log is closed (one a
run) and after the export (in place of the barrier that was there). A checkpoint's own parts agree in
:func:`kolectra.model.checkpoint.save`. Not covered: a failure inside a training step (a batch that
cannot be read on one rank), which the others meet in the gradient all-reduce; agreeing there would
cost a host sync every step. There gloo (CPU ranks) reports the closed connection of the rank that
ended, which :func:`peer_gone` turns into one line (in every collective of
:class:`~kolectra.model.device.Device`: a rank killed outright ends the others so too); NCCL
reports nothing and the others wait for its timeout. XLA pods' hosts have no host group: a failure
there ends the host it happened on, as before.
"""

from __future__ import annotations

from kolectra.core.errors import EnvironmentProblem

FAILED = 2  # a rank's state bit at an agreement: its part failed (bit 1: SIGTERM asked it to stop)


class AnotherRankFailed(EnvironmentProblem):
    """Another rank of this run failed in work of its own (its line says why): this rank ends too."""


def settle(states: list[int] | None, error: BaseException | None, doing: str) -> list[int] | None:
    """After an agreement (``states``: every rank's, None where the ranks cannot agree): raise this
    rank's own ``error``, or :class:`AnotherRankFailed` when another rank's state says it failed."""
    if error is not None:
        raise error
    failed = [r for r, s in enumerate(states or ()) if s & FAILED]
    if failed:
        who = "rank" + ("s " if len(failed) > 1 else " ") + ", ".join(map(str, failed))
        raise AnotherRankFailed(f"{who} of this run failed {doing} (its own line says why); this rank stops too")
    return states


# gloo's words for a peer whose process ended (gloo/transport/tcp/pair.cc): its connection closed
PEER_GONE = ("Connection closed by peer", "Connection reset by peer")


def peer_gone(error: RuntimeError, doing: str) -> AnotherRankFailed | None:
    """The line for a collective that failed because another rank's process ended (gloo says so; a
    rank that failed alone inside a training step ends that way), else None."""
    if not any(words in str(error) for words in PEER_GONE):
        return None
    return AnotherRankFailed(f"another rank of this run ended{' ' + doing if doing else ''} (its line, if it "
                             "printed one, says why; gloo: its connection closed); this rank stops too")


class together:  # noqa: N801 - used as a statement: ``with together(dev, "exporting the model"):``
    """Work only some ranks do (or that can fail on one): at its end every rank learns whether one
    failed (collective: every rank enters and leaves it at the same point of the run)."""

    def __init__(self, dev, doing: str):
        self.dev, self.doing = dev, doing

    def __enter__(self) -> "together":
        return self

    def __exit__(self, kind, error, tb) -> bool:
        if kind is not None and not issubclass(kind, Exception):  # Ctrl-C, SIGTERM raised at once: as before
            return False
        if getattr(error, "agreed", False):  # the ranks agreed on it inside (model.resume.agreed_checkpoint)
            return False
        states = self.dev.rank_states(FAILED if error is not None else 0)
        if error is not None:
            return False  # this rank's own error goes on, once every rank knows
        settle(states, None, self.doing)
        return False
