"""A Ctrl-C to a torchrun job (the terminal's SIGINT reaches every rank): a rank after the first said
'interrupted; nothing was published' beside rank 0's 'checkpoint: its working state is kept in ...; --resume
continues it' (real run: 2 gloo ranks stopped at step 110, step-00000100 kept and resumed exactly), as if
the run had kept nothing; a follower publishes nothing of its own, and its line now says whose line tells."""

from __future__ import annotations

from pathlib import Path

import pytest

from kolectra.pipeline.store import workspace
from kolectra.pipeline.store.artifacts import Resumable, Store
from kolectra.pipeline.store.request import Request


def test_a_followers_interrupt_points_at_rank_0s_line(tmp_path, monkeypatch):
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    store = Store(tmp_path)
    request = Request(kind="checkpoint", name="c", stage_version=1, config={})
    run = tmp_path / workspace.WORK / f"checkpoint-{request.id()}"
    run.mkdir(parents=True)
    (run / workspace.REQUEST).write_text("{}")  # rank 0 has prepared the run

    def produce(out: Path):
        raise KeyboardInterrupt  # Ctrl-C mid-training: a bare interrupt, as Python's handler raises it

    with pytest.raises(KeyboardInterrupt) as stopped:
        store.build(request, produce, resumable=Resumable(family={"kind": "checkpoint"}, scratch=("checkpoints",),
                                                          rank=1))
    # before: no note, so the command's line said 'interrupted; nothing was published'
    assert stopped.value.__notes__ == ["checkpoint: rank 1 follows rank 0, whose line says what the run kept"]
