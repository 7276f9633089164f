"""Attacks on published artifacts: tampered parents, hostile manifests, symlinks, corrupt
manifests in a root, refs into another root."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from kolectra.core.stage import StageOutput
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import ArtifactError, Store, load, verify_dir
from kolectra.pipeline.store.manifest import digest, fields_digest, files_digest, sha256_file
from kolectra.pipeline.store.request import Request


def _writes(name: str, text: str):
    def produce(out: Path) -> StageOutput:
        (out / name).write_text(text)
        return StageOutput(stats={})
    return produce


def _chain(store: Store):
    corpus = store.build(Request(kind="corpus", name="c", stage_version=1, config={}), _writes("stats.json", "{}"))
    vocab = store.build(Request(kind="vocab", name="v", stage_version=1, config={}, parents=(corpus,)),
                        _writes("vocab.txt", "[PAD]\n"))
    return corpus, vocab


def _rewrite_consistently(art, name: str, text: str) -> None:
    """Change a file and re-hash it into the manifest, digest included: the artifact verifies."""
    (art.path / name).write_text(text)
    m = json.loads((art.path / "manifest.json").read_text())
    for f in m["files"]:
        if f["path"] == name:
            f["bytes"], f["sha256"] = (art.path / name).stat().st_size, sha256_file(art.path / name)
    m["digest"] = digest(m["files"])
    m["files_digest"] = files_digest(m["files"])
    m["fields_digest"] = fields_digest(m)
    (art.path / "manifest.json").write_text(json.dumps(m))


def test_a_parent_rewritten_consistently_is_refused_by_its_children(tmp_path, capsys):
    store = Store(tmp_path)
    corpus, vocab = _chain(store)
    _rewrite_consistently(corpus, "stats.json", '{"records_out": 999}')
    assert store.verify(corpus) == []  # the parent alone looks fine ...
    problems = store.verify(vocab)  # ... its child recorded another digest
    assert len(problems) == 1 and "digest" in problems[0] and "recorded when" in problems[0]
    with pytest.raises(ArtifactError, match="altered or rebuilt since"):
        store.build(Request(kind="examples", name="e", stage_version=1, config={}, parents=(corpus, vocab)),
                    _writes("index.json", "{}"))
    with pytest.raises(ArtifactError, match="altered or rebuilt since"):
        vocab.parent_of_kind(store, "corpus")
    assert "(CHANGED since this was built from it)" in "\n".join(store.lineage_lines(vocab))
    assert main(["artifacts", "verify", vocab.id, "--out", str(tmp_path)]) == 1
    assert "recorded when" in capsys.readouterr().out


def test_a_directory_ref_carries_its_own_root(tmp_path):
    elsewhere = Store(tmp_path / "elsewhere")
    corpus, vocab = _chain(elsewhere)
    here = Store(tmp_path / "here")
    ref = here.resolve(str(vocab.path))  # a directory in another root
    assert ref.parent_of_kind(here, "corpus").path == corpus.path
    child = here.build(Request(kind="examples", name="e", stage_version=1, config={}, parents=(ref,)),
                       _writes("index.json", "{}"))
    lines = "\n".join(here.lineage_lines(child))
    assert f"vocab/{vocab.path.name}" in lines and f"corpus/{corpus.path.name}" in lines and "MISSING" not in lines
    assert here.verify(child) == []


@pytest.mark.parametrize("hostile", ["../outside.txt", "/etc/hostname", "data/../../outside.txt", "./a", ""])
def test_manifest_paths_are_confined_to_the_artifact(tmp_path, hostile, capsys):
    store = Store(tmp_path / "root")
    good, victim = _chain(store)
    (tmp_path / "root" / "outside.txt").write_text("secret")
    m = json.loads((victim.path / "manifest.json").read_text())
    m["files"].append({"path": hostile, "bytes": 6, "sha256": "0" * 64})
    m["digest"] = digest(m["files"])
    (victim.path / "manifest.json").write_text(json.dumps(m))
    problems = verify_dir(victim.path)
    assert len(problems) == 1 and "refusing the whole manifest" in problems[0]  # nothing outside was opened
    with pytest.raises(ArtifactError, match="refusing the whole manifest"):
        store.require(str(victim.path))
    # one hostile manifest does not break listing the root
    assert [a.path for a in store.list()] == [good.path]
    assert main(["artifacts", "list", "--out", str(tmp_path / "root")]) == 0
    captured = capsys.readouterr()
    assert good.path.name in captured.out and "skipped:" in captured.err and victim.path.name in captured.err


def test_symlinks_never_lead_out_of_an_artifact(tmp_path):
    store = Store(tmp_path / "root")
    (tmp_path / "secret.txt").write_text("secret")

    def links_out(out: Path) -> StageOutput:
        (out / "a.txt").write_text("a")
        os.symlink(tmp_path / "secret.txt", out / "b.txt")
        return StageOutput(stats={})

    with pytest.raises(ArtifactError, match="symlink"):
        store.build(Request(kind="corpus", name="c", stage_version=1, config={}), links_out)
    assert store.list() == [] and not any((tmp_path / "root" / ".tmp").iterdir())
    art = store.build(Request(kind="corpus", name="c", stage_version=1, config={}), _writes("a.txt", "a"))
    os.symlink(tmp_path / "secret.txt", art.path / "b.txt")  # added after publishing
    assert any("symlink" in p for p in verify_dir(art.path))
    (art.path / "b.txt").unlink()
    (art.path / "a.txt").unlink()
    os.symlink(tmp_path / "secret.txt", art.path / "a.txt")  # a listed file replaced by a link out
    assert any("leads out of the artifact" in p for p in verify_dir(art.path))


@pytest.mark.parametrize("garbage", ["{not json", "[]", '{"schema": 1}', '{"schema":1,"kind":"corpus","id":"x",'
                                     '"digest":"d","files":[{"path":"a","bytes":"1","sha256":"z"}]}', "\udcff"])
def test_a_corrupt_manifest_is_skipped_reported_and_rebuilt(tmp_path, garbage):
    store = Store(tmp_path)
    good, broken = _chain(store)
    (broken.path / "manifest.json").write_bytes(garbage.encode("utf-8", "surrogateescape"))
    arts, problems = store.scan()
    assert [a.path for a in arts] == [good.path] and len(problems) == 1 and broken.path.name in problems[0]
    with pytest.raises(ArtifactError, match="manifest.json"):
        load(broken.path)
    # the same request again: the damaged directory is rebuilt in place, not joined
    again = store.build(Request(kind="vocab", name="v", stage_version=1, config={}, parents=(good,)),
                        _writes("vocab.txt", "[PAD]\n"))
    assert again.path == broken.path and store.verify(again) == []


def test_an_incomplete_directory_in_a_root_is_reported_not_listed(tmp_path, capsys):
    store = Store(tmp_path)
    good, _ = _chain(store)
    half = tmp_path / "corpus" / "half-0123456789abcdef"
    half.mkdir()
    shutil.copy(good.path / "stats.json", half / "stats.json")
    assert half not in [a.path for a in store.list()]
    assert main(["artifacts", "list", "--out", str(tmp_path)]) == 0
    assert "half-0123456789abcdef" in capsys.readouterr().err
