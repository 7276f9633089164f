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
from kolectra.pipeline.store.artifacts import Resumable
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.request import Request
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


@pytest.mark.parametrize("where", ["disk", "bucket"])
def test_a_forced_rebuild_discarding_an_interrupted_one_names_force_resume(where, tmp_path, request, capsys):
    """A --force rebuild over a published copy, stopped, then another --force without --resume: it discards the
    first one's run, saying '(--resume would continue it)', one line after the stop's '--force --resume continues
    it'; --resume alone reuses the copy. Both now name --force --resume; with nothing published, --resume."""
    root = str(tmp_path / "root") if where == "disk" else f"{request.getfixturevalue('bucket')}/discarded"
    found: list[list[str]] = []
    for published in (False, True):
        with pytest.raises(Terminated):
            _pretrain(root, found, force=True, stop=True)
        capsys.readouterr()
        with pytest.raises(Terminated):
            _pretrain(root, found, force=True, stop=True)
        err = capsys.readouterr().err
        said = "(--force --resume would continue it)" if published else "(--resume would continue it)"
        assert "discarding the interrupted run in " in err and said in err, err  # before: --resume when published
        assert published or "--force --resume" not in err, err
        _pretrain(root, found)  # published from here on


def _manifest_lost(monkeypatch: pytest.MonkeyPatch, landed: bool) -> None:
    """The manifest's write fails as a lost connection (having landed or not), and the one request after it,
    asking whether it landed, finds the store unreachable."""
    from kolectra.core import conditional, storage
    from kolectra.pipeline.store.remote import RemoteStore
    real_create, real_version = conditional.create_exclusive, RemoteStore._manifest_version  # noqa: SLF001

    def unreachable(prefix):
        monkeypatch.setattr(RemoteStore, "_manifest_version", staticmethod(real_version))
        raise storage.StoreError(f"{prefix}: the store cannot be reached")

    def create_exclusive(url, *args, **kwargs):
        if not str(url).endswith("/manifest.json"):
            return real_create(url, *args, **kwargs)
        if landed:
            real_create(url, *args, **kwargs)
        monkeypatch.setattr(RemoteStore, "_manifest_version", staticmethod(unreachable))
        raise storage.StoreError(f"{url}: the connection was lost")
    monkeypatch.setattr(conditional, "create_exclusive", create_exclusive)


@pytest.mark.parametrize("force", [False, True])
def test_a_pretraining_run_whose_manifest_write_is_unknown_says_how_to_continue_it(bucket, force):
    """Pretraining done, its manifest's write to the store unanswered and the store still not answering: the
    line said only '`kolectra artifacts verify ...` says whether it was published (if not, ... / if neither,
    the next build rebuilds it)', and that next build (no --resume) discarded the finished run and trained
    from step 0 again; the run is kept, and the line says what continues it."""
    from kolectra.core import storage

    root = f"{bucket}/unsure-{force}"
    found: list[list[str]] = []
    if force:
        _pretrain(root, found)

    def trained(out: Path) -> StageOutput:  # the whole training: its last checkpoint saved
        found.append(sorted(p.name for p in (out / "checkpoints").glob("step-*")))
        (out / "checkpoints" / "step-00000600").mkdir(parents=True, exist_ok=True)
        (out / "checkpoints" / "step-00000600" / "model.pt").write_text("w")
        (out / "metrics.json").write_text("{}")
        return StageOutput(stats={})
    with pytest.MonkeyPatch.context() as lost_once, pytest.raises(storage.StoreError) as lost:
        _manifest_lost(lost_once, landed=False)
        open_store(root).build(Request(kind="checkpoint", name="p", stage_version=1, config={"n": 1}), trained,
                               force, resumable=Resumable(family={"kind": "checkpoint"}, scratch=("checkpoints",)))
    notes = "; ".join(lost.value.__notes__)
    again = "--force --resume" if force else "--resume"
    assert "failed as its manifest was written to" in notes, notes
    assert f"; {again} continues it" in notes, notes  # before: no word of the run kept
    # what it says continues the finished run, not training again
    _pretrain(root, found, force=force, resume=True)
    assert found[-1] == ["step-00000600"], found


@pytest.mark.parametrize("machine", ["another", "this"])
def test_a_fresh_run_on_a_bucket_names_the_stores_copy_it_discards(bucket, tmp_path, monkeypatch, capsys, machine):
    """Stopped after its step was mirrored to the bucket, the request built again without --resume discards the
    bucket's copy of the run: on another machine (an empty cache) without a word, where the same run on a disk
    root says 'discarding the interrupted run in ... (--resume would continue it)'; on this one the line named
    this machine's copy alone. Seen with kolectra pretrain --out s3://... (h5): now the bucket's is named too."""
    from kolectra.core import storage

    root = f"{bucket}/elsewhere-{machine}"
    store = open_store(root)
    request = Request(kind="checkpoint", name="p", stage_version=1, config={"n": 1})

    def stopped(out: Path) -> StageOutput:  # step 21 saved and mirrored, as the trainer's hook does, then SIGTERM
        step = out / "checkpoints" / "step-00000021"
        step.mkdir(parents=True)
        for name in ("state.pt", "manifest.json"):
            (step / name).write_text("{}")
        store.checkpoint_saved(step)
        raise Terminated("terminated (SIGTERM) after step 21 of 600, saved as the checkpoint step-00000021")
    with pytest.raises(Terminated):
        store.build(request, stopped, resumable=Resumable(family={"kind": "checkpoint"}, scratch=("checkpoints",)))
    remote = f"{root}/.work/checkpoint-{request.id()}"
    assert "out/checkpoints/step-00000021/manifest.json" in storage.listing(remote)
    if machine == "another":
        monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "another-cache"))
    capsys.readouterr()
    found: list[list[str]] = []
    _pretrain(root, found)  # no --resume: a fresh run
    err = capsys.readouterr().err
    assert found == [[]]
    line = next((x for x in err.splitlines() if "discarding the interrupted run in " in x), "")  # before: none (another)
    assert line.endswith(f"{remote} (--resume would continue it)"), err
    assert (machine == "this") == (str(tmp_path / "cache") in line), line  # this machine's copy, where it has one
