"""A stopped ``--force`` rebuild of a published pretraining request names what continues its run.

``kolectra pretrain --force``, stopped (SIGTERM, a hangup: its step saved), said 'checkpoint: its working
state is kept in ...; --resume continues it'; but ``--resume`` alone finds the copy published before,
reuses it ('reusing ... (same request; --force rebuilds)') and leaves the run where it was. Only ``--force
--resume`` continues it, and the line now says so, on a disk and a bucket. With nothing published there,
``--resume`` alone still continues it, and says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from kolectra.core.errors import Terminated
from kolectra.core.stage import StageOutput
from kolectra.pipeline.store.artifacts import Request, Resumable
from kolectra.pipeline.store.factory import open_store
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))


def _pretrain(root: str, found: list, *, force: bool = False, resume: bool = False, stop: bool = False):
    """A checkpoint request built as stages.pretrain builds it (the store's part real): its training found
    the steps listed in ``found``; ``stop``: stopped after saving step 21."""
    def produce(out: Path) -> StageOutput:
        steps = out / "checkpoints"
        found.append(sorted(p.name for p in steps.glob("step-*")))
        if stop:
            (steps / "step-00000021").mkdir(parents=True, exist_ok=True)
            raise Terminated("terminated (SIGTERM) after step 21 of 600, saved as the checkpoint step-00000021")
        (out / "metrics.json").write_text("{}")
        return StageOutput(stats={"forced": force})
    return open_store(root).build(Request(kind="checkpoint", name="p", stage_version=1, config={"n": 1}),
                                  produce, force, resumable=Resumable(family={"kind": "checkpoint"},
                                                                      scratch=("checkpoints",)), resume=resume)


@pytest.mark.parametrize("where", ["disk", "bucket"])
def test_a_stopped_forced_rebuild_says_force_resume_continues_it(where, tmp_path, request, capsys):
    root = str(tmp_path / "root") if where == "disk" else f"{request.getfixturevalue('bucket')}/forced"
    found: list[list[str]] = []
    first = _pretrain(root, found)
    with pytest.raises(Terminated) as stopped:
        _pretrain(root, found, force=True, stop=True)
    notes = "; ".join(stopped.value.__notes__)
    assert "; --force --resume continues it" in notes, notes  # before: '; --resume continues it'
    # what --resume alone does: the published copy is reused, the run left where it was
    assert _pretrain(root, found, resume=True).manifest == first.manifest
    assert len(found) == 2
    # what the line says does continue it
    again = _pretrain(root, found, force=True, resume=True)
    assert found[-1] == ["step-00000021"] and again.manifest["stats"] == {"forced": True}
    assert open_store(root).verify(again) == []


@pytest.mark.parametrize("where", ["disk", "bucket"])
def test_a_stopped_first_build_still_says_resume_continues_it(where, tmp_path, request):
    root = str(tmp_path / "root") if where == "disk" else f"{request.getfixturevalue('bucket')}/first"
    found: list[list[str]] = []
    with pytest.raises(Terminated) as stopped:
        _pretrain(root, found, force=True, stop=True)  # --force with nothing published: --resume alone continues
    notes = "; ".join(stopped.value.__notes__)
    assert "; --resume continues it" in notes and "--force --resume" not in notes, notes
    _pretrain(root, found, resume=True)
    assert found[-1] == ["step-00000021"]
