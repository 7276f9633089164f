"""The followers of a data-parallel build: ranks after the first, which neither reserve nor publish.

Every rank of a data-parallel run (``torchrun``'s ranks; a TPU pod's hosts, one XLA process each)
runs the same build; rank 0 reserves it, prepares or fetches its run and publishes it
(:meth:`Store.build`), the others wait for each of those here and train beside it
(``Store._follow``, ``StoreRuns._follow_remote``). Every wait is polled and ends, after
``KOLECTRA_FOLLOW_SECONDS``, in one line naming what it waited for.

Which rank a process is, the stage tells the store with the build (:attr:`.workspace.Resumable.rank`),
as the device layer says (:func:`kolectra.model.runtime.rank_and_world`): only it knows whether the
rank is torchrun's ``RANK`` or an XLA host's process index. The store reads no ``RANK`` itself; a
build given no rank is a single process's, rank 0.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from typing import Callable, Iterator

from kolectra.pipeline.store.manifest import ArtifactError
from kolectra.pipeline.store.workspace import Resumable

FOLLOW_SECONDS = float(os.environ.get("KOLECTRA_FOLLOW_SECONDS", "900"))


def follower_rank(resumable: bool | Resumable) -> int:
    """The rank of this process in a data-parallel build when it is not the first, else 0 (a build
    that is not resumable has one process). Every rank runs the same build; only rank 0 reserves
    and publishes it, the others train beside it (:meth:`Store.build`)."""
    return resumable.rank if isinstance(resumable, Resumable) else 0


def wait_for(what: str, ready: Callable[[], object], rank: int, seconds: float = FOLLOW_SECONDS):
    """``ready()``'s first true value, polled; an ArtifactError naming ``what`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        found = ready()
        if found:
            return found
        if time.monotonic() > deadline:
            raise ArtifactError(f"rank {rank}: gave up after {seconds:.0f} s waiting for {what} "
                                "(did rank 0 stop?)")
        time.sleep(0.5)


def wait_for_rank_0_group(rank: int, seconds: float = FOLLOW_SECONDS) -> None:
    """Before a follower joins the process group: rank 0's rendezvous store (``MASTER_ADDR:MASTER_PORT``,
    the ``env://`` store of gloo, NCCL and XLA alike) accepting connections, polled every 0.5 s.

    Why: a follower that called ``init_process_group`` while rank 0 still waited (for a dead run's
    lease, say) sat in c10d's connect retry, whose pause grows 1.5x a try up to 60 s with +-50 %
    jitter (c10d/Backoff.hpp), so it joined up to 90 s after rank 0 was ready (docs/pretraining.md).
    Under torchrun the agent's store listens from the start and this returns at once."""
    host, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT", "")
    if not host or not port.isdigit():
        return  # no env:// rendezvous to wait for: init_process_group reports what is missing

    def listening() -> bool:
        try:
            socket.create_connection((host, int(port)), timeout=2).close()
        except OSError:
            return False
        return True

    wait_for(f"rank 0's process group at {host}:{port}", listening, rank, seconds)


@contextlib.contextmanager
def training_beside(kind: str, rank: int) -> Iterator[None]:
    """A follower's part of the build. A bare stop there (Ctrl-C reaches every rank of a torchrun job) said
    'interrupted; nothing was published' beside rank 0's 'its working state is kept in ...; --resume continues
    it', as if the run had kept nothing: a follower publishes and keeps nothing of its own, so its line
    points at rank 0's. A stop that says what it did (SIGTERM's 'saved as the checkpoint step-N') is left so."""
    try:
        yield
    except KeyboardInterrupt as e:
        if not str(e) and not getattr(e, "__notes__", None):
            e.add_note(f"{kind}: rank {rank} follows rank 0, whose line says what the run kept")
        raise
