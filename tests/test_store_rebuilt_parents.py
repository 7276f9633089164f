"""A request whose published artifact was built from another build of a parent is rebuilt, not reused.

A parent rebuilt under the same id (``kolectra corpus --force``: the same bytes, a new provenance,
so a new ``fields_digest``; pretraining: new timings, so a new ``digest`` too) makes its children's
recorded ``parent_refs`` differ from it. Every stage reading such a child refuses it ("rebuild it with
--force"), so reusing it made the next ``kolectra run`` after ``kolectra corpus --force`` end at the
examples stage, refusing the vocab it had just reused. Now the store rebuilds exactly the artifacts
downstream of the rebuilt one and reuses the others; on a bucket as on a disk.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kolectra.core.stage import StageOutput
from kolectra.pipeline.store.artifacts import Request, Store
from kolectra.pipeline.store.factory import open_store
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
