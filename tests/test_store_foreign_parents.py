"""A parent recorded in another root on a store (a child's ``parent_refs`` path ``s3://other/...``) is
followed only where the user named that root (``$KOLECTRA_PARENT_ROOTS``), never on a manifest's word:
a root copied from elsewhere, or a shared bucket, could otherwise make ``show``, ``verify --lineage``
and every stage's checks send requests signed with the user's credentials to any bucket. On moto's
S3 server (tests/s3_support.py), whose recorder lists the requests that reached it.
"""

from __future__ import annotations

import uuid

import pytest

from kolectra.core import storage
from kolectra.core.stage import StageOutput
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import ArtifactError
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.request import Request
from kolectra.pipeline.store.roots import PARENT_ROOTS, unfollowed
from tests.s3_support import answered, bucket, s3_endpoint  # noqa: F401  (fixtures)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(PARENT_ROOTS, raising=False)


def _writes(name: str, text: str):
    def produce(out):
        (out / name).write_text(text)
        return StageOutput(stats={"n": 1})

    return produce


def _other_bucket() -> str:
    name = f"kolectra-other-{uuid.uuid4().hex[:8]}"
    fs, _ = storage.filesystem(f"s3://{name}")
    fs.mkdir(name)
    return f"s3://{name}"


def _child_of_a_parent_elsewhere(root, elsewhere: str):
    """A corpus published in the root ``elsewhere`` and a vocab built from it in ``root``: the
    manifest a copied root with a hostile parent ref holds, and the one a user's own cross-root
    build leaves (a vocab built with ``--corpus s3://other/...``)."""
    parent = open_store(elsewhere).build(
        Request(kind="corpus", name="toy", stage_version=1, config={"t": 1}), _writes("a.txt", "a")
    )
    child = open_store(root).build(
        Request(kind="vocab", name="kid", stage_version=1, config={}, parents=(parent,)), _writes("b.txt", "b")
    )
    assert child.manifest["parent_refs"][0]["path"] == str(parent.path)
    return parent, child


@pytest.mark.parametrize("where", ["local", "bucket"])
def test_a_parent_recorded_in_another_bucket_is_not_fetched_on_the_manifests_word(
    s3_endpoint, bucket, tmp_path, capsys, where
):
    elsewhere = f"{_other_bucket()}/r"
    root = tmp_path / "root" if where == "local" else f"{bucket}/root"
    parent, child = _child_of_a_parent_elsewhere(root, elsewhere)
    other = elsewhere.removeprefix("s3://").split("/")[0]
    store = open_store(root)  # as the CLI opens it: able to follow a parent into a store
    with answered(s3_endpoint) as calls:
        lines = "\n".join(store.lineage_lines(store.resolve(child.id)))
        found, missing = store.ancestors(store.resolve(child.id))
        assert store.verify(child) == []  # a parent not found is no mismatch (as one that is gone)
        with pytest.raises(ArtifactError, match=f"recorded in {elsewhere}, outside the roots") as refused:
            child.parent_of_kind(store, "corpus")
        assert f"{PARENT_ROOTS}={elsewhere}" in str(refused.value)
        capsys.readouterr()
        assert main(["artifacts", "verify", "--lineage", child.id, "--out", str(root)]) == 0
        assert main(["artifacts", "show", child.id, "--out", str(root)]) == 0
    out = capsys.readouterr().out
    assert not [c for c in calls if c.key.startswith(other)], calls  # not one request reached that bucket
    assert f"MISSING parent {parent.id} (recorded in {elsewhere}, outside the roots" in lines, lines
    assert found == [] and len(missing) == 1 and f"{PARENT_ROOTS}={elsewhere}" in missing[0]
    assert f"missing parent {parent.id} of {child.path}: recorded in {elsewhere}" in out, out
    assert f"MISSING parent {parent.id} (recorded in {elsewhere}" in out, out


def test_a_parent_in_a_root_the_user_names_is_followed(bucket, tmp_path, monkeypatch):
    """The cross-root flow kept: a local root's vocab built from a corpus in a bucket is checked and
    followed once the user names the bucket's root (or the whole bucket); another root of that
    bucket is still not."""
    elsewhere = f"{_other_bucket()}/r"
    parent, child = _child_of_a_parent_elsewhere(tmp_path / "root", elsewhere)
    for named in (elsewhere, elsewhere.rsplit("/", 1)[0], f"s3://x/y , {elsewhere}/"):
        monkeypatch.setenv(PARENT_ROOTS, named)
        store = open_store(tmp_path / "root")
        assert child.parent_of_kind(store, "corpus").path == parent.path
        assert f"corpus/{parent.path.name}" in "\n".join(store.lineage_lines(child))
        assert store.verify(child) == [] and [a.id for a in store.ancestors(child)[0]] == [parent.id]
    monkeypatch.setenv(PARENT_ROOTS, f"{elsewhere}2,{elsewhere}/sub")
    assert "MISSING parent" in "\n".join(open_store(tmp_path / "root").lineage_lines(child))


@pytest.mark.parametrize(
    "recorded, own, named, followed",
    [
        ("/data/root/corpus/c-0123456789abcdef", [], "", True),  # a local path: read on this machine
        ("s3://mine/root/corpus/c-0123456789abcdef", ["s3://mine/root"], "", True),
        ("s3://mine/root/corpus/c-0123456789abcdef", ["s3a://mine/root/"], "", True),
        ("gcs://mine/root/corpus/c-0123456789abcdef", ["gs://mine/root"], "", True),
        ("s3://mine/root/corpus/c-0123456789abcdef", ["gs://mine/root"], "", False),  # another store
        ("s3://mine/root2/corpus/c-0123456789abcdef", ["s3://mine/root"], "", False),  # another root of the bucket
        ("s3://mine/root/../x/corpus/c-0123456789abcdef", ["s3://mine/root"], "", False),
        ("s3://other/r/corpus/c-0123456789abcdef", ["s3://mine/root"], "", False),
        ("s3://other/r/corpus/c-0123456789abcdef", ["s3://mine/root"], "s3://other", True),
        ("s3://other/r/corpus/c-0123456789abcdef", ["s3://mine/root"], "s3://other/r", True),
        ("s3://other/r/corpus/c-0123456789abcdef", ["s3://mine/root"], "s3://other/r/deeper", False),
        ("http://127.0.0.1:9/r/corpus/c-0123456789abcdef", [], "http://127.0.0.1:9", False),  # never another protocol
    ],
)
def test_which_recorded_parents_are_followed(monkeypatch, recorded, own, named, followed):
    monkeypatch.setenv(PARENT_ROOTS, named)
    assert (unfollowed(recorded, own) is None) == followed


def test_a_parent_one_child_cannot_find_is_found_through_another(tmp_path, capsys):
    """A lineage is walked once (Store.ancestors: ``verify --lineage`` and a report's sections): a parent
    that one child recorded where it is no longer (a copied root since deleted) is looked for again from
    the next child naming it, here in that child's own root. verify listed it missing before, and the
    report reached it only by its own second walk; now both have it, a report's order parents first."""
    import shutil  # noqa: PLC0415

    from kolectra.pipeline.report import ancestors  # noqa: PLC0415

    corpus = open_store(tmp_path / "a").build(
        Request(kind="corpus", name="toy", stage_version=1, config={"t": 1}), _writes("a.txt", "a"))
    vocab = open_store(tmp_path / "a").build(
        Request(kind="vocab", name="v", stage_version=1, config={}, parents=(corpus,)), _writes("b.txt", "b"))
    shutil.copytree(tmp_path / "a", tmp_path / "copy")
    copied = open_store(tmp_path / "copy").resolve(corpus.id)
    examples = open_store(tmp_path / "b").build(
        Request(kind="examples", name="e", stage_version=1, config={}, parents=(copied, vocab)),
        _writes("c.txt", "c"))
    shutil.rmtree(tmp_path / "copy")  # where the examples recorded their corpus
    store = open_store(tmp_path / "b")
    found, missing = store.ancestors(store.resolve(examples.id))
    assert [a.id for a in found] == [vocab.id, corpus.id] and missing == []
    assert [a.path for a in found] == [vocab.path, corpus.path]
    assert [a.id for a in ancestors(store, examples)] == [corpus.id, vocab.id, examples.id]
    capsys.readouterr()
    assert main(["artifacts", "verify", "--lineage", examples.id, "--out", str(tmp_path / "b")]) == 0
    out = capsys.readouterr()
    assert "missing" not in out.out and "3 artifact(s) verified, 0 parent(s) not found" in out.err, out
