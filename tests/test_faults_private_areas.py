"""Fault injection on the store's private areas and layouts: roots sharing a ``.tmp``, private areas
and artifact directories that are symlinks out of the root, builds that lost files their own
records name, and published artifacts missing files their manifest no longer lists."""

from __future__ import annotations

import json
import shutil
import signal
import time
from pathlib import Path

import pytest

from kolectra.core.stage import StageOutput
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import ArtifactError, Store
from kolectra.pipeline.store.manifest import digest, fields_digest, files_digest
from kolectra.pipeline.store.request import Request
from kolectra.pipeline.store.workspace import Resumable
from kolectra.vocab.export import assemble, write_dir
from tests.fault_child import toy_request
from tests.model_support import build_examples, build_tokenizer
from tests.test_faults_publish import _no_half_artifact, _private, _writes, child


def _wait_for(cond, what: str, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while not cond():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.mark.parametrize("sweeper", ["gc", "build"])
def test_a_live_build_in_a_tmp_shared_by_two_roots_survives_the_other_roots_sweep(tmp_path, sweeper, capsys):
    """Root b's .tmp is root a's: a's sweep sees b's live build, whose request lock is in b/.locks."""
    a, b, release = tmp_path / "a", tmp_path / "b", tmp_path / "release"
    (a / ".tmp").mkdir(parents=True)
    b.mkdir()
    (b / ".tmp").symlink_to(a / ".tmp")
    live = child("toy", str(b), "none", "--hold", str(release), "--text", "shared", wait=False)
    _wait_for(lambda: any((a / ".tmp").glob("*/data/a.txt")), "b's build to write its data")
    if sweeper == "gc":
        assert main(["artifacts", "gc", "--out", str(a)]) == 0
    else:  # the same request in root a: its leftovers and its sweep must both leave b's build alone
        Store(a).build(toy_request("shared"), _writes("shared", []))
    assert any((a / ".tmp").glob("*/data/a.txt")), "root a's sweep deleted root b's live build"
    release.touch()
    out, err = live.communicate(timeout=60)
    assert live.returncode == 0, err[-2000:]
    art = _no_half_artifact(Store(b))
    assert len(art) == 1 and (art[0].path / "data" / "a.txt").read_text() == "shared"
    assert not (art[0].path / ".kolectra-build.lock").exists()  # the store's mark is not left in the artifact
    assert _private(a)[".tmp"] == []


def test_a_complete_build_of_a_root_sharing_this_tmp_is_left_to_that_root(tmp_path, capsys):
    """Root b's .tmp is root a's; b's --force killed -9 between its two renames left b's copy (and its new build)
    in the shared .tmp. a's gc, and the sweep of every build in a, published it into a as a complete build a kill
    left unpublished: b's artifact was gone from b ('(no artifacts under b)', no word of the copy) and a held one
    it never built. a now leaves another root's complete build alone (its name marks b's); b's list names it, b's
    gc publishes it in b."""
    a, b, calls = tmp_path / "a", tmp_path / "b", []
    (a / ".tmp").mkdir(parents=True)
    b.mkdir()
    (b / ".tmp").symlink_to(a / ".tmp")
    assert child("toy", str(b), "none", "--text", "same").returncode == 0
    (first,) = _no_half_artifact(Store(b))
    proc = child("toy", str(b), "old_moved", "--force", "--text", "same")
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert main(["artifacts", "gc", "--out", str(a)]) == 0
    Store(a).build(Request(kind="corpus", name="mine", stage_version=1, config={}), _writes("a's own", []))
    assert Store(a).find("corpus", first.id) is None  # before: a published b's copy
    assert len(list((a / ".tmp").iterdir())) == 2
    capsys.readouterr()
    assert main(["artifacts", "list", "--out", str(b)]) == 0
    err = capsys.readouterr().err
    assert f"corpus/toy-{first.id} is not published: its complete copy is in {b / '.tmp'}/corpus-" in err, err
    assert "`kolectra artifacts gc` (or the next build of it) publishes it" in err, err  # before: no word of it
    assert main(["artifacts", "gc", "--out", str(b)]) == 0  # b sweeps what it made in the .tmp it links to
    assert f"published {first.path}" in capsys.readouterr().out
    art = Store(b).build(toy_request("same"), _writes("never built", calls))
    assert calls == [] and art.path == first.path and Store(b).verify(art) == []
    assert list((a / ".tmp").iterdir()) == []


def test_a_root_linking_its_tmp_publishes_its_own_build_a_kill_left_there_at_its_next_build(tmp_path):
    a, b, calls = tmp_path / "a", tmp_path / "b", []
    (a / ".tmp").mkdir(parents=True)
    b.mkdir()
    (b / ".tmp").symlink_to(a / ".tmp")
    assert child("toy", str(b), "none", "--text", "same").returncode == 0
    (first,) = _no_half_artifact(Store(b))
    assert child("toy", str(b), "old_moved", "--force", "--text", "same").returncode == -signal.SIGKILL
    art = Store(b).build(toy_request("same"), _writes("never built", calls))
    assert calls == [] and art.path == first.path and Store(b).verify(art) == []
    assert list((a / ".tmp").iterdir()) == []  # the older copy too (before: left in a's .tmp)


def test_a_build_of_a_root_linking_its_tmp_leaves_the_owning_roots_complete_build_alone(tmp_path):
    """Root b's .tmp is root a's; a's --force killed -9 between its renames left a's copy in a's .tmp (unmarked: a's
    own folder). b's next build of the same request published it into b (leftovers took any unmarked entry), so a's
    artifact was gone from a, and a's gc had nothing to put back. b now builds its own, and a's gc publishes a's."""
    a, b, calls = tmp_path / "a", tmp_path / "b", []
    (a / ".tmp").mkdir(parents=True)
    b.mkdir()
    (b / ".tmp").symlink_to(a / ".tmp")
    assert child("toy", str(a), "none", "--text", "same").returncode == 0
    (first,) = _no_half_artifact(Store(a))
    assert child("toy", str(a), "old_moved", "--force", "--text", "same").returncode == -signal.SIGKILL
    Store(b).build(toy_request("same"), _writes("b's own", calls))
    assert calls, "b published a's complete build as its own"
    assert main(["artifacts", "gc", "--out", str(a)]) == 0
    art = Store(a).find("corpus", first.id)
    assert art is not None and art.path == first.path and Store(a).verify(art) == []


def test_a_sealed_run_of_a_root_sharing_this_work_is_left_to_that_root(tmp_path, capsys):
    """The same for a .work: b's resumable --force killed between its renames left its new build sealed in its run's
    out/ (in a's .work); a's gc published it into a (and removed b's run). It is b's now (its request.json names b),
    and b's next build publishes the newer of it and the copy moved aside."""
    a, b, calls = tmp_path / "a", tmp_path / "b", []
    (a / ".work").mkdir(parents=True)
    b.mkdir()
    (b / ".work").symlink_to(a / ".work")
    assert child("toy", str(b), "none", "--resumable", "--text", "same").returncode == 0
    (first,) = _no_half_artifact(Store(b))
    time.sleep(1.1)  # the new build finishes in a later second
    proc = child("toy", str(b), "old_moved", "--force", "--resumable", "--text", "same")
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    newer = json.loads((a / ".work" / f"corpus-{first.id}" / "out" / "manifest.json").read_text())
    assert main(["artifacts", "gc", "--out", str(a)]) == 0
    assert Store(a).find("corpus", first.id) is None  # before: a published b's build
    art = Store(b).build(toy_request("same"), _writes("never built", calls), resumable=True)
    assert calls == [] and art.path == first.path and art.manifest == newer and Store(b).verify(art) == []


def test_gc_never_deletes_through_a_symlinked_private_area(tmp_path, capsys):
    root, outside = tmp_path / "root", tmp_path / "outside"
    victims = [outside / "tmp" / "corpus-0123456789abcdef-0badcafe", outside / "work" / "checkpoint-0123456789abcdef",
               outside / "locks" / "corpus-0123456789abcdef.lock"]
    for v in victims[:2]:
        (v / "out").mkdir(parents=True)
        (v / "out" / "precious.txt").write_text("not the store's")
    victims[2].parent.mkdir(parents=True)
    victims[2].write_text("{}")
    root.mkdir()
    for area, target in ((".tmp", "tmp"), (".work", "work"), (".locks", "locks")):
        (root / area).symlink_to(outside / target)
    for argv in (["artifacts", "gc"], ["artifacts", "gc", "--interrupted"]):
        assert main([*argv, "--out", str(root)]) == 0
        err = capsys.readouterr().err
        assert err.count("is a symlink") == 3 and "not swept" in err
    Store(root).build(toy_request("a build sweeps too"), _writes("x", []))
    assert all(v.exists() for v in victims)
    assert (victims[0] / "out" / "precious.txt").read_text() == "not the store's"


def test_an_artifact_directory_that_links_out_of_its_root_is_not_an_artifact(tmp_path, capsys):
    elsewhere, root = Store(tmp_path / "elsewhere"), tmp_path / "root"
    art = elsewhere.build(toy_request("linked"), _writes("linked", []))
    (root / "corpus").mkdir(parents=True)
    (root / "corpus" / art.path.name).symlink_to(art.path.resolve())
    # the REF resolves to nothing this root holds: a lookup error, one line on stderr, exit 2
    assert main(["artifacts", "verify", art.id, "--out", str(root)]) == 2
    err = capsys.readouterr().err
    assert "symlink" in err and len(err.strip().splitlines()) == 1
    store = Store(root)
    assert store.list() == [] and "symlink" in store.scan()[1][0]
    rebuilt = store.build(toy_request("linked"), _writes("linked", []))  # the link goes, what it leads to stays
    assert not rebuilt.path.is_symlink() and store.verify(rebuilt) == []
    assert elsewhere.verify(art) == []
    # a kind directory that is a symlink out of the root, likewise
    other = tmp_path / "other"
    shutil.move(str(root / "corpus"), other)
    (root / "corpus").symlink_to(other)
    assert store.list() == [] and any("symlink" in p for p in store.verify(rebuilt.path.name))


# ---- layouts -----------------------------------------------------------------------------------
def _examples_stage(n: int = 40, lose: str | None = None):
    """The examples writer the pretraining tests use, recording its count as the stage does; ``lose``
    deletes one of its files before it returns, as another root's sweep would."""
    def produce(out: Path) -> StageOutput:
        tok = out.parent / f"{out.name}-tokenizer"
        build_tokenizer(tok)
        build_examples(out, tok, n=n, seq_len=16, shard_size=10)
        shutil.rmtree(tok)
        (out / "stats.json").write_text(json.dumps({"examples": n}))
        if lose:
            (out / lose).unlink()
        return StageOutput(stats={"examples": n})
    return produce


def _vocab_stage(lose: str | None = None):
    """The vocab stage's own writer on a small vocabulary, and a report."""
    def produce(out: Path) -> StageOutput:
        write_dir(assemble(2, list("가나다라"), ["##가", "##나"], ["영화", "##는"]), out)
        (out / "report.json").write_text("{}")
        if lose:
            (out / lose).unlink()
        return StageOutput(stats={"vocab_size": 13, "recipe": "wordpiece"})
    return produce


def _forget(art, rel: str) -> None:
    """Delete a file and drop it from the manifest (digest recomputed): the manifest and disk agree."""
    (art.path / rel).unlink()
    m = json.loads((art.path / "manifest.json").read_text())
    m["files"] = [f for f in m["files"] if f["path"] != rel]
    m["digest"] = digest(m["files"])
    m["files_digest"] = files_digest(m["files"])
    m["fields_digest"] = fields_digest(m)
    (art.path / "manifest.json").write_text(json.dumps(m))


@pytest.mark.parametrize("kind,lose", [("examples", "data/shard-00001.arrow"), ("examples", "index.json"),
                                       ("vocab", "tokenizer.json"), ("vocab", "report.json")])
def test_a_build_that_lost_what_its_records_name_is_not_published(tmp_path, kind, lose):
    store = Store(tmp_path)
    stage = _examples_stage(lose=lose) if kind == "examples" else _vocab_stage(lose=lose)
    with pytest.raises(ArtifactError, match=rf"not publishing .*{lose}: missing"):
        store.build(Request(kind=kind, name="x", stage_version=1, config={}), stage)
    assert store.list() == [] and _private(tmp_path)[".tmp"] == []


@pytest.mark.parametrize("kind,lose", [("examples", "data/shard-00002.arrow"), ("examples", "stats.json"),
                                       ("vocab", "vocab.txt"), ("vocab", "special_tokens_map.json")])
def test_verify_checks_the_kind_s_layout_not_only_the_manifest_s_list(tmp_path, kind, lose, capsys):
    store = Store(tmp_path)
    stage = _examples_stage() if kind == "examples" else _vocab_stage()
    art = store.build(Request(kind=kind, name="x", stage_version=1, config={}), stage)
    assert store.verify(art) == []
    _forget(art, lose)
    assert main(["artifacts", "verify", art.id, "--out", str(tmp_path)]) == 1
    assert f"{lose}: missing" in capsys.readouterr().out
    calls = []  # the next build of the request rebuilds it rather than reusing it
    again = store.build(Request(kind=kind, name="x", stage_version=1, config={}),
                        lambda out: (calls.append(1), stage(out))[1])
    assert calls == [1] and store.verify(again) == []


def test_an_index_naming_a_path_out_of_the_artifact_fails_verify(tmp_path):
    store = Store(tmp_path)
    art = store.build(Request(kind="examples", name="x", stage_version=1, config={}), _examples_stage())
    index = json.loads((art.path / "index.json").read_text())
    index["shards"][0]["path"] = "../../outside.arrow"
    (art.path / "index.json").write_text(json.dumps(index))
    problems = store.verify(art)
    assert any("not a file inside the artifact" in p for p in problems)
    assert any("sha256 differs" in p or "size" in p for p in problems)


def test_a_manifest_holding_an_integer_the_parser_refuses_is_one_message(tmp_path, capsys):
    art = Store(tmp_path).build(toy_request("big"), _writes("big", []))
    text = (art.path / "manifest.json").read_text()
    (art.path / "manifest.json").write_text(text.replace('"stage_version": 1', '"stage_version": ' + "9" * 5000))
    assert main(["artifacts", "list", "--out", str(tmp_path)]) == 0
    assert "not a manifest (Exceeds the limit" in capsys.readouterr().err
    assert main(["artifacts", "verify", art.id, "--out", str(tmp_path)]) != 0
    assert "internal error" not in capsys.readouterr().err


def _shared_work(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    (a / ".work").mkdir(parents=True)
    b.mkdir()
    (b / ".work").symlink_to(a / ".work")
    return a, b


def test_a_build_of_the_same_request_leaves_the_sealed_run_of_a_root_sharing_this_work_to_that_root(tmp_path):
    """One run folder .work/<kind>-<id> for a request in every root sharing the .work: b's resumable --force killed
    between its renames left its new build sealed there; a's build of the same request published it into a (and b
    lost it). Now refused in one line naming the folder and the way out; b's next build publishes it."""
    (a, b), calls = _shared_work(tmp_path), []
    assert child("toy", str(b), "none", "--resumable", "--text", "same").returncode == 0
    (first,) = _no_half_artifact(Store(b))
    time.sleep(1.1)
    assert child("toy", str(b), "old_moved", "--force", "--resumable", "--text", "same").returncode == -signal.SIGKILL
    run = a / ".work" / f"corpus-{first.id}"
    newer = json.loads((run / "out" / "manifest.json").read_text())
    with pytest.raises(ArtifactError, match=f"{run} is the run of this request of another root sharing"):
        Store(a).build(toy_request("same"), _writes("a's", calls), resumable=True)
    assert calls == [] and Store(a).find("corpus", first.id) is None  # before: b's build published into a
    art = Store(b).build(toy_request("same"), _writes("never built", calls), resumable=True)
    assert calls == [] and art.path == first.path and art.manifest == newer and Store(b).verify(art) == []


def test_a_plain_build_of_the_same_request_leaves_the_interrupted_run_of_a_root_sharing_this_work(tmp_path, capsys):
    """b's interrupted run (its checkpoint kept for --resume) in the .work b shares with a: a's plain build of the
    same request said 'discarding the interrupted run' and deleted b's checkpoint. Now refused (exit 2);
    b's --resume continues it."""
    a, b = _shared_work(tmp_path)
    resumable = Resumable({"kind": "corpus", "name": "toy"}, scratch=("ckpt",))

    def stops(out: Path) -> StageOutput:
        (out / "ckpt").write_text("step 7")
        raise OSError("stopped")
    with pytest.raises(OSError):
        Store(b).build(toy_request("same"), stops, resumable=resumable)
    (run,) = (a / ".work").iterdir()
    assert (run / "out" / "ckpt").is_file()
    capsys.readouterr()
    assert main(["artifacts", "gc", "--out", str(a)]) == 0
    with pytest.raises(ArtifactError, match="another root sharing"):
        Store(a).build(toy_request("same"), _writes("a's", []), resumable=resumable)
    assert (run / "out" / "ckpt").read_text() == "step 7", "a's build discarded b's interrupted run"
    seen = []

    def resumes(out: Path) -> StageOutput:
        seen.append((out / "ckpt").read_text())
        return _writes("b's", [])(out)
    Store(b).build(toy_request("same"), resumes, resumable=resumable, resume=True)
    assert seen == ["step 7"]
