"""Fault injection on the publish protocol, a stopped or killed ``--force`` (moved as they were from
tests/test_faults_publish.py): the copy published before, moved aside by --force's first rename, is put back
when the rebuild stops (Ctrl-C, SIGTERM, after a kill -9 between the renames); a stale or damaged copy stands
while it is rebuilt and the stop says it is kept as it was; ``artifacts list``, a ref and ``gc`` name and
publish the copy a kill left unpublished, the newer build a killed resumable --force left in its run.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from kolectra.core.errors import Terminated
from kolectra.core.stage import StageOutput
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.request import Request
from tests.faults_publish_support import _no_half_artifact, _private, _writes, child


@pytest.mark.parametrize("stop", [KeyboardInterrupt, Terminated])
def test_a_stop_as_force_moved_the_old_copy_out_puts_it_back(tmp_path, monkeypatch, capsys, stop):
    """A Ctrl-C (SIGTERM alike) whose handler ran as --force's first rename returned (the copy moved to .tmp,
    the new build not yet in its place): the build was removed as unpublished and the copy left in .tmp, so
    ``artifacts list`` showed nothing, and the next ``--force`` (its sweep deleting that copy) published the
    rebuild under its own --name, the folder's name lost. The copy is put back before the stop goes on."""
    store = Store(tmp_path)
    first = store.build(Request(kind="corpus", name="a", stage_version=1, config={}), _writes("same", []))
    real, seen = os.replace, []

    def replace(src, dst):
        real(src, dst)
        seen.append(dst)
        if Path(src) == first.path:  # the published copy moved out of the way
            raise stop("terminated (SIGTERM)") if stop is Terminated else stop()
    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(stop):
        store.build(Request(kind="corpus", name="b", stage_version=1, config={}), _writes("same", []), force=True)
    monkeypatch.undo()
    assert [a.path for a in _no_half_artifact(store)] == [first.path]  # before: [] (the copy in .tmp)
    assert Store(tmp_path).resolve("a").manifest == first.manifest and store.verify(first) == []
    assert _private(tmp_path)[".tmp"] == []
    forced = Store(tmp_path).build(Request(kind="corpus", name="b", stage_version=1, config={}), _writes("same", []),
                                   force=True)
    assert forced.path == first.path and forced.manifest["name"] == "a"  # before: b-<id>


@pytest.mark.parametrize("stop", ["SIGINT", "SIGTERM"])
def test_a_force_stopped_after_one_killed_between_its_renames_keeps_a_copy(tmp_path, stop):
    """kill -9 between --force's two renames (the copy published moved into .tmp, the new build not yet in
    place), then another --force stopped by Ctrl-C or SIGTERM as it built: its sweep had deleted both complete
    copies in .tmp, so no copy was left anywhere. It now puts the newest back before it builds."""
    root, calls, hold = tmp_path / "root", tmp_path / "calls", tmp_path / "hold"
    assert child("toy", str(root), "none", "--text", "same").returncode == 0
    (first,) = _no_half_artifact(Store(root))
    proc = child("toy", str(root), "old_moved", "--force", "--text", "same")
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert _no_half_artifact(Store(root)) == [] and len(_private(root)[".tmp"]) == 2
    again = child("toy", str(root), "none", "--force", "--text", "same", "--handled", "--calls", str(calls),
                  "--hold", str(hold), wait=False)
    deadline = time.monotonic() + 120
    while not (calls.is_file() and calls.read_text().strip()):  # its stage runs
        assert time.monotonic() < deadline and again.poll() is None, again.communicate()
        time.sleep(0.05)
    again.send_signal(getattr(signal, stop))
    _, err = again.communicate(timeout=120)
    assert again.returncode == {"SIGINT": 130, "SIGTERM": 143}[stop], err
    assert "putting back" in err and "before rebuilding it (--force)" in err, err
    (kept,) = _no_half_artifact(Store(root))  # before: [] (and .tmp empty: no copy at all)
    assert kept.path == first.path and (kept.path / "data" / "a.txt").read_text() == "same"
    assert _private(root)[".tmp"] == []


def test_a_stale_copy_a_kill_left_aside_stands_while_it_is_rebuilt(tmp_path, capsys):
    """The same for a plain build of a copy built from another build of its parent (rebuilt, not reused): the
    copy a kill left in .tmp, the only one, was deleted as the rebuild began, and the rebuild then stopped."""
    def vocab_of(parent):
        return Request(kind="vocab", name="v", stage_version=1, config={}, parents=(parent,))

    corpus = Request(kind="corpus", name="c", stage_version=1, config={})
    store = Store(tmp_path)
    vocab = store.build(vocab_of(store.build(corpus, _writes("c", []))), _writes("v", []))
    rebuilt = Store(tmp_path).build(corpus, _writes("other bytes", []), force=True)
    aside = tmp_path / ".tmp" / f"vocab-{vocab.id}-0badc0de"  # where --force's first rename puts it
    os.replace(vocab.path, aside)

    def stopped(out: Path) -> StageOutput:
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        Store(tmp_path).build(vocab_of(rebuilt), stopped)
    assert "putting back" in capsys.readouterr().err
    kept = Store(tmp_path).find("vocab", vocab.id)  # before: None, .tmp empty
    assert kept is not None and kept.path == vocab.path and kept.manifest == vocab.manifest
    assert _private(tmp_path)[".tmp"] == []


def test_a_stale_copy_put_back_then_a_stopped_rebuild_says_it_is_kept_as_it_was(tmp_path, capsys):
    """The stale copy a kill left aside, put back before its rebuild, then the rebuild stopped: the stop said 'the
    copy published there before, ROOT/vocab/v-<id>, is kept', the words of a sound copy (under -q nothing else
    said it was built from another build of its parent), where a stale copy found in its folder is said 'kept as it
    was, built from another build of its parent ...; the next build rebuilds it'. The put-back one is said so too."""
    def vocab_of(parent):
        return Request(kind="vocab", name="v", stage_version=1, config={}, parents=(parent,))

    def stopped(out: Path) -> StageOutput:
        raise KeyboardInterrupt

    corpus = Request(kind="corpus", name="c", stage_version=1, config={})
    store = Store(tmp_path)
    vocab = store.build(vocab_of(store.build(corpus, _writes("c", []))), _writes("v", []))
    rebuilt = Store(tmp_path).build(corpus, _writes("other bytes", []), force=True)
    os.replace(vocab.path, tmp_path / ".tmp" / f"vocab-{vocab.id}-0badc0de")  # where --force's first rename puts it
    with pytest.raises(KeyboardInterrupt) as e:
        Store(tmp_path).build(vocab_of(rebuilt), stopped)
    notes = "; ".join(e.value.__notes__)
    assert f"the copy published there before, {vocab.path}, is kept as it was, built from another build of its " \
           "parent corpus/" in notes, notes  # before: '... is kept' and no more
    assert "the next build rebuilds it" in notes, notes
    assert "putting back" in capsys.readouterr().err and Store(tmp_path).find("vocab", vocab.id) is not None


def test_list_and_a_ref_name_the_copy_a_kill_left_unpublished(tmp_path, capsys):
    """kill -9 between --force's two renames: `artifacts list` said '(no artifacts under ROOT)' and `artifacts
    show toy` 'no artifact', as if the copy were lost; both now say where its complete copy is, and what
    publishes it (gc, which then does)."""
    assert child("toy", str(tmp_path), "none", "--text", "same").returncode == 0
    (first,) = _no_half_artifact(Store(tmp_path))
    assert child("toy", str(tmp_path), "old_moved", "--force", "--text", "same").returncode == -signal.SIGKILL
    capsys.readouterr()
    said = f"corpus/toy-{first.id} is not published: its complete copy is in {tmp_path / '.tmp'}/corpus-{first.id}-"
    assert main(["artifacts", "list", "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert said in err and "`kolectra artifacts gc` (or the next build of it) publishes it" in err, err
    for verb in ("show", "verify"):
        assert main(["artifacts", verb, "toy", "--out", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert f"error: no artifact 'toy' under {tmp_path}; {said}" in err, err
    assert main(["artifacts", "list", "--kind", "vocab", "--out", str(tmp_path)]) == 0
    assert "not published" not in capsys.readouterr().err  # of another kind
    assert main(["artifacts", "gc", "--out", str(tmp_path)]) == 0
    assert [a.path for a in _no_half_artifact(Store(tmp_path))] == [first.path]
    assert main(["artifacts", "list", "--out", str(tmp_path)]) == 0
    assert "not published" not in capsys.readouterr().err


@pytest.mark.parametrize("stop", [KeyboardInterrupt, Terminated])
def test_a_stopped_force_on_a_disk_says_the_copy_published_there_is_kept(tmp_path, stop):
    """A --force rebuild stopped as it built: on a bucket the line said 'nothing published under ...; the copy
    published there before is kept', on a disk only 'nothing published; its partial build in ... was removed',
    which left the user to wonder whether the copy it rebuilt was gone. A first build still says only that."""
    def stopped(out: Path) -> StageOutput:
        raise stop("terminated (SIGTERM)") if stop is Terminated else stop()
    req = Request(kind="corpus", name="a", stage_version=1, config={})
    with pytest.raises(stop) as first:
        Store(tmp_path).build(req, stopped)
    assert "the copy published there before" not in "; ".join(first.value.__notes__)
    art = Store(tmp_path).build(req, _writes("same", []))
    with pytest.raises(stop) as e:
        Store(tmp_path).build(req, stopped, force=True)
    notes = "; ".join(e.value.__notes__)
    assert f"was removed; the copy published there before, {art.path}, is kept" in notes, notes
    assert Store(tmp_path).verify(art) == []


@pytest.mark.parametrize("why", ["damaged", "stale"])
def test_a_stopped_rebuild_of_a_damaged_or_stale_copy_does_not_call_it_simply_kept(tmp_path, why):
    """A plain build rebuilding a damaged copy (or one built from another build of its parent), stopped as it
    built, ended '...; the copy published there before, ROOT/..., is kept', the words of a stopped --force over
    a sound copy: under -q (no 'existing ... is damaged; rebuilding' line) it read as if that copy were fine.
    It now says the copy is kept as it was, and why the next build rebuilds it."""
    def stopped(out: Path) -> StageOutput:
        raise KeyboardInterrupt

    def vocab_of(parent):
        return Request(kind="vocab", name="v", stage_version=1, config={}, parents=(parent,))

    corpus = Store(tmp_path).build(Request(kind="corpus", name="c", stage_version=1, config={}), _writes("c", []))
    vocab = Store(tmp_path).build(vocab_of(corpus), _writes("v", []))
    if why == "damaged":
        (vocab.path / "data" / "a.txt").write_text("w")
    else:
        corpus = Store(tmp_path).build(Request(kind="corpus", name="c", stage_version=1, config={}),
                                       _writes("other", []), force=True)
    with pytest.raises(KeyboardInterrupt) as e:
        Store(tmp_path).build(vocab_of(corpus), stopped)
    notes = "; ".join(e.value.__notes__)
    assert f"the copy published there before, {vocab.path}, is kept as it was" in notes, notes  # before: 'is kept'
    said = "damaged (" if why == "damaged" else "built from another build of its parent"
    assert f"is kept as it was, {said}" in notes, notes
    assert "the next build rebuilds it" in notes, notes


def test_gc_and_list_take_the_newer_build_a_killed_resumable_force_left_in_its_run(tmp_path, capsys):
    """`pretrain --force` (a run under .work) killed -9 between its two renames: the old copy went to .tmp, the
    new sealed build stayed in the run's out/. A plain build published the newer one, but `artifacts list` named
    the old copy, `artifacts gc` published it and kept the newer build as an interrupted run ('--force --resume
    continues it'); and `-q artifacts gc` said nothing of publishing. Both now take the newer build, and say so."""
    assert child("toy", str(tmp_path), "none", "--resumable", "--text", "same").returncode == 0
    (first,) = _no_half_artifact(Store(tmp_path))
    time.sleep(1.1)  # the new build finishes in a later second
    proc = child("toy", str(tmp_path), "old_moved", "--force", "--resumable", "--text", "same")
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    run_out = tmp_path / ".work" / f"corpus-{first.id}" / "out"
    newer = json.loads((run_out / "manifest.json").read_text())["provenance"]["finished"]
    assert newer > first.manifest["provenance"]["finished"] and len(_private(tmp_path)[".tmp"]) == 1
    capsys.readouterr()
    assert main(["artifacts", "list", "--out", str(tmp_path)]) == 0
    assert f"its complete copy is in {run_out}, " in capsys.readouterr().err
    assert main(["-q", "artifacts", "gc", "--dry-run", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"would publish {run_out}\n" in out and "kept interrupted run" not in out, out
    assert main(["-q", "artifacts", "gc", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"published {tmp_path / 'corpus' / f'toy-{first.id}'}\n" in out and "kept interrupted run" not in out, out
    (published,) = _no_half_artifact(Store(tmp_path))
    assert published.manifest["provenance"]["finished"] == newer
    assert _private(tmp_path)[".tmp"] == [] and _private(tmp_path)[".work"] == []
