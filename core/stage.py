"""What a stage hands back to the artifact store: its statistics and, for compute stages, cost.

Stage functions (``corpus.build.build``, ``vocab.build.build``, ``corpus.examples.build``,
``model.train.pretrain``, ``finetune.nsmc.run``, ``finetune.korquad.run``) write their files into
the directory they are given and return a :class:`StageOutput`; they never name the artifact
root, compute ids or write manifests. That is :mod:`pipeline.store.artifacts`' job.
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass
class StageOutput:
    stats: dict[str, Any]
    # parameters, flops, wall_seconds, device — for stages that train or evaluate models
    compute: dict[str, Any] | None = None
    # a stage that wrote its files where the artifact lives (Beam workers writing to a store): each
    # file's path, bytes and sha256 as reported by whoever wrote it; None: the store hashes the directory
    files: list[dict[str, Any]] | None = None


def progress(msg: str, quiet_too: bool = False) -> None:
    """Progress goes to stderr: stdout's last line is reserved for the artifact directory. Written
    above any progress bar on the terminal (:mod:`core.bars`). At ``-q`` (:mod:`core.verbosity`)
    only a message carrying a ``WARNING`` is written: the stages' warnings are progress lines
    that say so; ``quiet_too``: one that belongs with such a warning (the line withdrawing it)."""
    from kolectra.core import url_secrets, verbosity  # noqa: PLC0415
    from kolectra.core.bars import write  # noqa: PLC0415 - tqdm only once something reports

    if verbosity.quiet() and "WARNING" not in msg and not quiet_too:
        return
    write(f"[kolectra] {url_secrets.redacted(msg)}")  # an --input URL's credentials: never printed


def size_text(n: int) -> str:
    """A byte count as people read it in a progress line or a listing: ``412.5 MB``, ``3.0 kB``, ``12 B``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def warn(msg: str) -> None:
    """A warning: written at every verbosity, ``-q`` included."""
    progress(f"WARNING: {msg}")
