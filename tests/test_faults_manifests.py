"""Corrupt manifests of every kind, beyond unreadable JSON: fields of the wrong type, an unknown
schema, a manifest that disagrees with the directory it sits in, a parent that is there but no
longer loads. Each is refused as one message naming the manifest; ``artifacts list`` skips it,
``show`` and ``verify`` exit non-zero without a traceback, and a child built from it is refused.
The store's other JSON files (a run's ``request.json``, a lock's holder) damaged alike are read
as unknown."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kolectra.core import filehash
from kolectra.core.stage import StageOutput
from kolectra.model import checkpoint
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import ArtifactError, Resumable, Store, load
from kolectra.pipeline.store.request import Request


def _writes(out: Path) -> StageOutput:
    (out / "a.txt").write_text("x")
    return StageOutput(stats={"n": 1})


def _chain(store: Store):
    corpus = store.build(Request(kind="corpus", name="c", stage_version=1, config={}), _writes)
    vocab = store.build(Request(kind="vocab", name="v", stage_version=1, config={}, parents=(corpus,)), _writes)
    return corpus, vocab


def _edit(path: Path, change) -> None:
    m = json.loads((path / "manifest.json").read_text())
    change(m)
    (path / "manifest.json").write_text(json.dumps(m))


# (which artifact, how its manifest is damaged); every one made `artifacts list`, `show` or `verify`
# end in an internal error (a traceback in a log) before
DAMAGE = {
    "id not a string": ("corpus", lambda m: m.update(id=5)),
    "id a list": ("corpus", lambda m: m.update(id=[1])),
    "kind a number": ("corpus", lambda m: m.update(kind=3)),
    "digest null": ("corpus", lambda m: m.update(digest=None)),
    "schema of another program": ("corpus", lambda m: m.update(schema="other/9")),
    "name a number": ("corpus", lambda m: m.update(name=5)),
    "stats a list": ("corpus", lambda m: m.update(stats=[1])),
    "provenance a string": ("corpus", lambda m: m.update(provenance="x")),
    "config a string": ("corpus", lambda m: m.update(config="x")),
    "inputs a string": ("corpus", lambda m: m.update(inputs="x")),
    "an input without bytes": ("corpus", lambda m: m.update(inputs=[{"path": "a", "sha256": "0" * 64}])),
    "file bytes true": ("corpus", lambda m: m["files"][0].update(bytes=True)),
    "a file listed twice": ("corpus", lambda m: m.update(files=m["files"] * 2)),
    "parents a string": ("vocab", lambda m: m.update(parents="abc")),
    "parents of numbers": ("vocab", lambda m: m.update(parents=[1])),
    "parents a glob, not an id": ("vocab", lambda m: m.update(parents=["*"])),
    "a parent ref's id a glob": ("vocab", lambda m: m["parent_refs"][0].update(id="*")),
    "parent_refs a string": ("vocab", lambda m: m.update(parent_refs="x")),
    "parent_refs of strings": ("vocab", lambda m: m.update(parent_refs=["x"])),
    "a parent digest a number": ("vocab", lambda m: m["parent_refs"][0].update(digest=5)),
    "a parent path a number": ("vocab", lambda m: m["parent_refs"][0].update(path=5)),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_malformed_manifest_is_refused_by_name_everywhere(tmp_path, capsys, damage):
    store = Store(tmp_path)
    corpus, vocab = _chain(store)
    which, change = DAMAGE[damage]
    victim, other = (corpus, vocab) if which == "corpus" else (vocab, corpus)
    _edit(victim.path, change)
    with pytest.raises(ArtifactError, match="manifest.json"):
        load(victim.path)
    arts, broken = store.scan()
    assert [a.path for a in arts] == [other.path] and len(broken) == 1 and victim.path.name in broken[0]
    for argv in (["artifacts", "list"], ["artifacts", "show", str(victim.path)],
                 ["artifacts", "verify", str(victim.path)], ["artifacts", "show", str(other.path)],
                 ["artifacts", "verify", str(other.path)]):
        code = main([*argv, "--out", str(tmp_path)])
        err = capsys.readouterr().err
        assert "internal error" not in err and "Traceback" not in err, (argv, err)
        assert code in (0, 1, 2)
    assert main(["artifacts", "verify", str(victim.path), "--out", str(tmp_path)]) != 0
    capsys.readouterr()
    if victim is corpus:  # the child of an unreadable parent is refused too
        assert main(["artifacts", "verify", str(vocab.path), "--out", str(tmp_path)]) == 1
        assert "unreadable" in capsys.readouterr().out
        with pytest.raises(ArtifactError, match="unreadable"):
            store.require(vocab.path)


def test_a_manifest_that_disagrees_with_its_place_is_refused_and_rebuilt(tmp_path):
    store = Store(tmp_path)
    corpus, _ = _chain(store)
    _edit(corpus.path, lambda m: m.update(kind="vocab"))  # verifies as files, but says it is a vocab
    with pytest.raises(ArtifactError, match="edited, moved or renamed"):
        load(corpus.path)
    assert any("edited, moved or renamed" in p for p in store.verify(corpus.path))
    # a directory moved under another id is not that id's artifact either
    _edit(corpus.path, lambda m: m.update(kind="corpus"))
    moved = corpus.path.with_name("c-0123456789abcdef")
    shutil.copytree(corpus.path, moved)
    assert store.find("corpus", "0123456789abcdef") is None
    with pytest.raises(ArtifactError, match="edited, moved or renamed"):
        store.resolve(str(moved))
    # the same request again rebuilds the misplaced copy in place instead of joining it
    _edit(corpus.path, lambda m: m.update(kind="vocab"))
    again = store.build(Request(kind="corpus", name="c", stage_version=1, config={}), _writes)
    assert again.path == corpus.path and store.verify(again) == []


def test_a_manifest_nested_too_deep_is_one_message(tmp_path):
    store = Store(tmp_path)
    corpus, _ = _chain(store)
    (corpus.path / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ArtifactError, match="manifest.json"):
        load(corpus.path)
    assert main(["artifacts", "list", "--out", str(tmp_path)]) == 0


@pytest.mark.parametrize("damaged", ["[1]", "null", '{"id": 5, "kind": ["a"], "scratch": "ckpts", "family": 3}',
                                     '{"scratch": [1, 2]}', "{" * 5000, "\udcff"])
def test_a_damaged_run_record_or_lock_file_is_read_as_unknown(tmp_path, capsys, damaged):
    """The store's other small JSON files (a run's request.json, a lock's holder) damaged the same
    ways: gc and a resumable build carry on, as for a run of an older kolectra."""
    run = tmp_path / ".work" / "checkpoint-0123456789abcdef"
    (run / "out" / "ckpts").mkdir(parents=True)
    (run / "out" / "ckpts" / "a").write_text("x")
    for f in (run / "request.json", tmp_path / ".locks" / "checkpoint-0123456789abcdef.lock"):
        f.parent.mkdir(exist_ok=True)
        f.write_bytes(damaged.encode("utf-8", "surrogateescape"))
    assert main(["artifacts", "gc", "--dry-run", "--out", str(tmp_path)]) == 0
    assert "internal error" not in capsys.readouterr().err
    art = Store(tmp_path).build(Request(kind="checkpoint", name="n", stage_version=1, config={}), _writes,
                                resumable=Resumable(family={"k": 1}, scratch=("ckpts",)), resume=True)
    assert Store(tmp_path).verify(art) == []


@pytest.mark.parametrize("damaged", ['{"files": [1]}', '{"files": {}}', '{"files": {"a": 3}}', "[", "\udcff",
                                     '{"files": {"../../outside": {"bytes": 1, "sha256": "0"}}}', '{"files":' * 3000])
def test_a_damaged_checkpoint_manifest_is_skipped_for_the_previous_one(tmp_path, damaged):
    def step(n: int, manifest: str | None) -> Path:
        d = checkpoint.checkpoints_dir(tmp_path) / f"step-{n:08d}"
        d.mkdir(parents=True)
        files = {}
        for name in checkpoint.REQUIRED:
            (d / name).write_bytes(name.encode())
            files[name] = {"bytes": len(name), "sha256": filehash.sha256(d / name)}
        text = manifest if manifest is not None else json.dumps({"format": 2, "step": n, "files": files})
        (d / checkpoint.MANIFEST).write_bytes(text.encode("utf-8", "surrogateescape"))
        return d

    good, bad = step(4, None), step(8, damaged)
    assert checkpoint.problems(bad) and all("manifest.json" in p for p in checkpoint.problems(bad))
    assert checkpoint.latest(tmp_path) == good
