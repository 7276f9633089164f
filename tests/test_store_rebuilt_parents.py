"""A request whose published artifact was built from another build of a parent is rebuilt, not reused.

A parent rebuilt under the same id (``kolectra corpus --force``: the same bytes, a new provenance,
so a new ``fields_digest``; pretraining: new timings, so a new ``digest`` too) makes its children's
recorded ``parent_refs`` differ from it. Every stage reading such a child refuses it ("rebuild it with
--force"), so reusing it made the next ``kolectra run`` after ``kolectra corpus --force`` end at the
examples stage, refusing the vocab it had just reused. Now the store rebuilds exactly the artifacts
downstream of the rebuilt one and reuses the others; on a bucket as on a disk.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kolectra.core.stage import StageOutput
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.manifest import fields_digest, read_manifest
from kolectra.pipeline.store.request import Request
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))


def _build(store, kind: str, name: str, parents: tuple = (), files: dict | None = None, force: bool = False):
    def produce(out: Path) -> StageOutput:
        for rel, text in (files or {f"{name}.txt": name}).items():
            (out / rel).write_text(text)
        # a rebuild's manifest differs at least in its provenance (timed to the second, a test's two
        # builds often share one); here in its stats
        return StageOutput(stats={"forced": True} if force else {})
    return store.build(Request(kind=kind, name=name, stage_version=1, config={"n": name}, parents=parents),
                       produce, force)


def _chain(store, force_corpus: bool = False, corpus_text: str = "c"):
    """corpus -> vocab -> examples, plus a second vocab-like child of the corpus's sibling (an
    artifact not downstream of the corpus: reused whatever happens to it)."""
    other = _build(store, "corpus", "other")
    corpus = _build(store, "corpus", "c", files={"stats.json": corpus_text}, force=force_corpus)
    vocab = _build(store, "vocab", "v", (corpus,))
    examples = _build(store, "examples", "e", (corpus, vocab), {"index.json": '{"format": 2, "shards": []}'})
    side = _build(store, "vocab", "side", (other,))
    return {"corpus": corpus, "vocab": vocab, "examples": examples, "side": side}


def _finished(arts: dict) -> dict:
    return {k: a.manifest["provenance"]["finished"] + a.manifest["provenance"]["started"] + str(a.path)
            + a.manifest["fields_digest"] for k, a in arts.items()}


@pytest.mark.parametrize("where", ["disk", "bucket"])
def test_a_parent_rebuilt_under_the_same_id_rebuilds_exactly_what_is_downstream(where, tmp_path, request, capsys):
    root = tmp_path / "root" if where == "disk" else f"{request.getfixturevalue('bucket')}/r"
    store = open_store(root)
    first = _chain(store)
    # the same bytes rebuilt (--force): its fields (provenance, stats) differ, its id and files do not
    again = _chain(open_store(root), force_corpus=True)
    assert again["corpus"].id == first["corpus"].id
    assert again["corpus"].manifest["digest"] == first["corpus"].manifest["digest"]
    assert again["corpus"].manifest["fields_digest"] != first["corpus"].manifest["fields_digest"]
    err = capsys.readouterr().err
    assert "was built from another build of its parent corpus/c-" in err
    # the vocab and the examples were rebuilt, under their ids; the side branch was reused
    for kind in ("vocab", "examples"):
        assert again[kind].id == first[kind].id
        assert again[kind].manifest["fields_digest"] != first[kind].manifest["fields_digest"], kind
    assert again["side"].manifest == first["side"].manifest
    store = open_store(root)
    for art in again.values():
        assert store.verify(art) == [], art.path
    # and now everything is current: a third run reuses all of it
    third = _chain(open_store(root))
    assert _finished(third) == _finished(again)


def test_other_bytes_under_the_same_id_rebuild_the_children(tmp_path, capsys):
    store = Store(tmp_path)
    first = _chain(store)
    again = _chain(Store(tmp_path), force_corpus=True, corpus_text="other bytes")  # a nondeterministic stage
    assert again["corpus"].manifest["digest"] != first["corpus"].manifest["digest"]
    ref = {r["id"]: r for r in again["vocab"].manifest["parent_refs"]}[again["corpus"].id]
    assert ref["digest"] == again["corpus"].manifest["digest"]
    assert Store(tmp_path).verify(again["examples"]) == []


def test_a_rank_after_the_first_does_not_take_a_stale_artifact(tmp_path):
    """Rank 0 rebuilds a stale artifact; a follower that returned it at once would not train beside it."""
    store = Store(tmp_path)
    first = _chain(store)
    corpus = _build(store, "corpus", "c", files={"stats.json": "c"}, force=True)
    req = Request(kind="vocab", name="v", stage_version=1, config={"n": "v"}, parents=(corpus,))
    assert store._current(req) is None  # noqa: SLF001
    fresh = Request(kind="vocab", name="side", stage_version=1, config={"n": "side"},
                    parents=(store.resolve(first["side"].parents[0]),))
    assert store._current(fresh).path == first["side"].path  # noqa: SLF001


@pytest.mark.parametrize("where", ["disk", "bucket"])
def test_a_forced_rebuild_under_another_name_keeps_its_folders_name_and_rebuilds_its_children(
        where, tmp_path, request, capsys):
    """``kolectra corpus --name s3c --force`` on a request published as ``c-<id>`` rebuilt it in that folder
    with ``"name": "s3c"`` in its manifest: the folder and the manifest disagreed, ``artifacts show s3c``
    found nothing and the command named the name nowhere. The rebuild keeps the folder's name, says so,
    and is found by it; its children are rebuilt by the next run, as for any parent rebuilt under its id."""
    root = tmp_path / "root" if where == "disk" else f"{request.getfixturevalue('bucket')}/r"
    first = _chain(open_store(root))
    capsys.readouterr()
    store = open_store(root)
    renamed = Request(kind="corpus", name="s3c", stage_version=1, config={"n": "c"})
    assert store.name_for(renamed) == "c"  # what pretraining's model cards name (pipeline/stages.py)
    forced = store.build(renamed, lambda out: (out / "stats.json").write_text("c") and StageOutput(stats={"forced": True}),
                         True)
    err = capsys.readouterr().err
    assert forced.id == first["corpus"].id
    assert str(forced.path) == str(first["corpus"].path)  # rebuilt in place
    assert forced.manifest["name"] == "c" == forced.name  # the folder's name, not s3c's
    assert "under its name c (the id is the identity: the name s3c (--name" in err, err
    assert "`kolectra artifacts show c` finds it" in err
    store = open_store(root)
    assert store.resolve("c").manifest == forced.manifest
    with pytest.raises(Exception, match="no artifact 's3c'"):
        store.resolve("s3c")
    assert store.verify(forced) == []
    # the children: rebuilt by the next run (under their own ids and names), current after it
    again = _chain(open_store(root))
    for kind in ("vocab", "examples"):
        assert str(again[kind].path) == str(first[kind].path)
        assert again[kind].manifest["fields_digest"] != first[kind].manifest["fields_digest"], kind
        assert open_store(root).verify(again[kind]) == [], kind
    # a stale child rebuilt under another name keeps its folder's name too
    store = open_store(root)
    _build(store, "corpus", "c", files={"stats.json": "c"}, force=True)
    vocab = store.build(Request(kind="vocab", name="v2", stage_version=1, config={"n": "v"},
                                parents=(store.resolve("corpus/c-" + forced.id),)),
                        lambda out: (out / "v.txt").write_text("v") and StageOutput(stats={}))
    assert str(vocab.path) == str(first["vocab"].path) and vocab.manifest["name"] == "v"
    assert open_store(root).verify(vocab) == []


def test_a_sealed_build_left_by_a_kill_is_published_under_its_manifests_name(tmp_path, monkeypatch, capsys):
    """A build killed between sealing and publishing (manifest ``"name": "first"``) was published by the next
    run of the request under that run's ``--name``: folder ``second-<id>``, manifest ``first``."""
    store = Store(tmp_path / "root")

    def killed(*args, **kwargs):  # a kill right after sealing: no rename, no clean-up
        raise KeyboardInterrupt
    monkeypatch.setattr(Store, "_publish_as", killed)
    monkeypatch.setattr(Store, "_abandon", lambda *args: None)

    def build(store, name):  # one request under two names
        return store.build(Request(kind="corpus", name=name, stage_version=1, config={}),
                           lambda out: (out / "c.txt").write_text("c") and StageOutput(stats={}))
    with pytest.raises(KeyboardInterrupt):
        build(store, "first")
    monkeypatch.undo()
    again = build(Store(tmp_path / "root"), "second")
    assert "a complete build of this request whose run was stopped" in capsys.readouterr().err
    assert again.path.name == f"first-{again.id}" and again.manifest["name"] == "first"
    assert Store(tmp_path / "root").resolve("first").manifest == again.manifest


def test_of_two_copies_of_one_id_the_one_named_as_asked_is_reused_and_rebuilt(tmp_path, capsys):
    """Two copies of one id under two names (``a-<id>``, ``b-<id>``: older versions left them): ``--name b
    --force`` rebuilt ``a-<id>`` and said the name b "names only new builds", ``b-<id>`` standing there as
    it was; ``--name b`` reused ``a-<id>`` with the same words. The copy named as asked is the one now."""
    store = Store(tmp_path / "root")
    a = _build(store, "corpus", "a")
    b_dir = a.path.parent / f"b-{a.id}"
    shutil.copytree(a.path, b_dir)
    manifest = json.loads((b_dir / "manifest.json").read_text())
    manifest["name"] = "b"
    manifest["fields_digest"] = fields_digest(manifest)
    (b_dir / "manifest.json").write_text(json.dumps(manifest))
    assert Store(tmp_path / "root").verify(Store(tmp_path / "root").resolve("b")) == []
    capsys.readouterr()

    def as_b(force):
        return Store(tmp_path / "root").build(
            Request(kind="corpus", name="b", stage_version=1, config={"n": "a"}),
            lambda out: (out / "a.txt").write_text("a") and StageOutput(stats={"forced": force}), force)
    reused = as_b(False)
    assert reused.path == b_dir and "names only new builds" not in capsys.readouterr().err
    assert Store(tmp_path / "root").name_for(Request(kind="corpus", name="b", stage_version=1, config={"n": "a"})) == "b"
    forced = as_b(True)
    assert "names only new builds" not in capsys.readouterr().err
    assert forced.path == b_dir and forced.manifest["name"] == "b" and forced.manifest["stats"] == {"forced": True}
    assert read_manifest(a.path) == a.manifest  # a-<id> untouched
    store = Store(tmp_path / "root")
    assert store.verify(store.resolve("b")) == [] and store.verify(store.resolve("a")) == []


@pytest.mark.parametrize("where", ["disk", "bucket"])
def test_a_request_reused_under_another_name_says_the_name_was_not_used(where, tmp_path, request, capsys):
    """``kolectra corpus --name c`` of a request published as ``a-<id>`` reuses it; on a disk the line said the
    name c 'names only new builds', on a bucket only '(same request; --force rebuilds)', so that ``artifacts
    show c`` then found nothing with no word of why. Both say it now."""
    root = tmp_path / "root" if where == "disk" else f"{request.getfixturevalue('bucket')}/reused"
    first = _build(open_store(root), "corpus", "a")
    capsys.readouterr()
    again = open_store(root).build(Request(kind="corpus", name="c", stage_version=1, config={"n": "a"}),
                                   lambda out: StageOutput(stats={}))
    err = capsys.readouterr().err
    assert str(again.path) == str(first.path)
    assert (f"corpus: reusing {first.path} (same request; the id is the identity: the name c (--name, else the "
            "stage's default) names only new builds; --force rebuilds)") in err, err
    _build(open_store(root), "corpus", "a")
    assert f"corpus: reusing {first.path} (same request; --force rebuilds)" in capsys.readouterr().err
