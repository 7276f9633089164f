"""The artifact store: ids from requests, atomic publishing, reuse, verification, lineage."""

import json
from pathlib import Path

import pytest

from kolectra.core.stage import StageOutput
from kolectra.pipeline.store.artifacts import ArtifactError, Store, fingerprint_inputs, verify_dir
from kolectra.pipeline.store.request import Request


def _produce(text, calls):
    def produce(out: Path) -> StageOutput:
        calls.append(out)
        (out / "data").mkdir()
        (out / "data" / "a.txt").write_text(text)
        (out / "stats.json").write_text(json.dumps({"n": len(text)}))
        return StageOutput(stats={"n": len(text)})
    return produce


def test_build_publishes_complete_artifact_and_reuses_it(tmp_path):
    store = Store(tmp_path)
    calls = []
    req = Request(kind="corpus", name="demo", stage_version=1, config={"a": 1})
    art = store.build(req, _produce("hello", calls))
    assert art.path == tmp_path / "corpus" / f"demo-{art.id}"
    m = art.manifest
    for key in ("schema", "kind", "name", "id", "parents", "config", "files", "digest", "stats", "provenance"):
        assert key in m
    assert {f["path"] for f in m["files"]} == {"data/a.txt", "stats.json"}
    assert store.verify(art) == []
    # same request: found, not recomputed
    again = store.build(req, _produce("other", calls))
    assert again.path == art.path and len(calls) == 1
    # --force rebuilds in place
    forced = store.build(req, _produce("other", calls), force=True)
    assert forced.path == art.path and len(calls) == 2
    assert (forced.path / "data" / "a.txt").read_text() == "other"
    # a different config is a different artifact
    other = store.build(Request(kind="corpus", name="demo", stage_version=1, config={"a": 2}), _produce("x", calls))
    assert other.id != art.id
    assert not list((tmp_path / ".tmp").iterdir())


def test_the_store_knows_what_it_built_from_what_it_reused_within_the_same_second(tmp_path):
    """`kolectra run`'s summary marks a reused stage by the store's own record, not by the manifest's
    start time: to the second, a build and its reuse in the same second looked like two builds
    (a flaky end-to-end test)."""
    req = Request(kind="corpus", name="demo", stage_version=1, config={})
    store = Store(tmp_path)
    art = store.build(req, _produce("a", []))
    assert store.built_here == {art.id}
    again = Store(tmp_path)  # a later command on the same root, within the same second
    assert again.build(req, _produce("b", [])).id == art.id and again.built_here == set()
    assert again.build(req, _produce("b", []), force=True).id in again.built_here


def test_failed_stage_leaves_nothing_that_looks_complete(tmp_path):
    store = Store(tmp_path)

    def boom(out: Path) -> StageOutput:
        (out / "half.txt").write_text("partial")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):  # the stage's own error, not another from the build
        store.build(Request(kind="vocab", name="v", stage_version=1, config={}), boom)
    assert store.list() == []
    assert not (tmp_path / "vocab").exists() or not list((tmp_path / "vocab").iterdir())


def test_verify_names_tampered_missing_and_added_files(tmp_path):
    store = Store(tmp_path)
    art = store.build(Request(kind="corpus", name="c", stage_version=1, config={}), _produce("abc", []))
    (art.path / "data" / "a.txt").write_text("abd")
    (art.path / "extra.bin").write_bytes(b"x")
    (art.path / "stats.json").unlink()
    problems = verify_dir(art.path)
    text = "\n".join(problems)
    assert "a.txt: sha256 differs" in text
    assert "stats.json: missing" in text
    assert "extra.bin: not in manifest" in text
    with pytest.raises(ArtifactError, match="a.txt"):
        store.require(art)


def test_parents_verified_before_a_child_is_built(tmp_path):
    store = Store(tmp_path)
    parent = store.build(Request(kind="corpus", name="c", stage_version=1, config={}), _produce("abc", []))
    (parent.path / "data" / "a.txt").write_text("tampered")
    with pytest.raises(ArtifactError, match=r"(?s)refusing corpus artifact .*a\.txt"):
        store.build(Request(kind="vocab", name="v", stage_version=1, config={}, parents=(parent,)),
                    _produce("v", []))


def test_incomplete_directory_is_not_an_artifact(tmp_path):
    store = Store(tmp_path)
    d = tmp_path / "corpus" / "c-0123456789abcdef"
    d.mkdir(parents=True)
    (d / "stats.json").write_text("{}")
    assert store.list() == []
    with pytest.raises(ArtifactError, match="manifest.json missing"):
        store.resolve(d)


def test_resolve_and_lineage_back_to_raw_inputs(tmp_path):
    raw = tmp_path / "raw.txt"
    raw.write_text("원문\n")
    store = Store(tmp_path / "root")
    inputs = tuple(fingerprint_inputs([raw]))
    corpus = store.build(Request(kind="corpus", name="c", stage_version=1, config={}, inputs=inputs), _produce("a", []))
    vocab = store.build(Request(kind="vocab", name="v", stage_version=1, config={}, parents=(corpus,)), _produce("b", []))
    ex = store.build(Request(kind="examples", name="e", stage_version=1, config={}, parents=(corpus, vocab)), _produce("c", []))
    assert store.resolve(ex.id).path == ex.path
    assert store.resolve(ex.id[:8]).path == ex.path
    assert store.resolve(ex.path.name).path == ex.path
    lines = store.lineage_lines(ex)
    text = "\n".join(lines)
    assert lines[0] == f"examples/{ex.path.name}"
    assert f"corpus/{corpus.path.name}" in text and f"vocab/{vocab.path.name}" in text
    assert "(see above)" in text  # the corpus appears twice: directly and under the vocab
    assert str(raw.resolve()) in text
    # the raw input's content is part of the request: a changed input is a new corpus
    raw.write_text("바뀐 원문\n")
    changed = Request(kind="corpus", name="c", stage_version=1, config={}, inputs=tuple(fingerprint_inputs([raw])))
    assert changed.id() != corpus.id


def test_resumable_stage_keeps_its_work_directory_until_resumed(tmp_path):
    store = Store(tmp_path)
    req = Request(kind="checkpoint", name="p", stage_version=1, config={})
    seen = []

    def crashes(out: Path) -> StageOutput:
        (out / "checkpoints").mkdir()
        (out / "checkpoints" / "step-5").write_text("state")
        raise KeyboardInterrupt  # a kill

    def continues(out: Path) -> StageOutput:
        seen.append(sorted(p.name for p in (out / "checkpoints").iterdir()) if (out / "checkpoints").exists() else [])
        (out / "final.txt").write_text("done")
        return StageOutput(stats={})

    with pytest.raises(KeyboardInterrupt):
        store.build(req, crashes, resumable=True)
    assert store.list() == []  # nothing that looks complete
    art = store.build(req, continues, resumable=True, resume=True)
    assert seen == [["step-5"]]
    assert store.verify(art) == [] and (art.path / "final.txt").is_file()
    # without --resume a new attempt starts from an empty directory
    with pytest.raises(KeyboardInterrupt):
        store.build(Request(kind="checkpoint", name="q", stage_version=1, config={"other": 1}), crashes, resumable=True)
    store.build(Request(kind="checkpoint", name="q", stage_version=1, config={"other": 1}), continues, resumable=True)
    assert seen[-1] == []


def test_operational_keys_do_not_change_the_id():
    base = dict(kind="checkpoint", name="p", stage_version=1, operational=("train.log_every",))
    a = Request(config={"train": {"lr": 1.0, "log_every": 10}}, **base)
    b = Request(config={"train": {"lr": 1.0, "log_every": 50}}, **base)
    c = Request(config={"train": {"lr": 2.0, "log_every": 10}}, **base)
    assert a.id() == b.id() != c.id()


def test_lineage_calls_a_corrupt_parent_unreadable_not_missing(tmp_path):
    # issue 43 (low): a parent whose manifest is corrupt was shown as "MISSING parent", sending the
    # user to look for something that is there
    store = Store(tmp_path)
    corpus = store.build(Request(kind="corpus", name="c", stage_version=1, config={}), _produce("a", []))
    vocab = store.build(Request(kind="vocab", name="v", stage_version=1, config={}, parents=(corpus,)), _produce("b", []))
    (corpus.path / "manifest.json").write_text("{not json")
    text = "\n".join(store.lineage_lines(vocab))
    assert "MISSING" not in text
    assert f"UNREADABLE parent {corpus.id} of {vocab.path} is unreadable" in text and "not valid JSON" in text
    # a parent that is really gone is still missing
    import shutil
    shutil.rmtree(corpus.path)
    assert f"MISSING parent {corpus.id}" in "\n".join(store.lineage_lines(vocab))


def test_a_parents_id_is_part_of_the_id(tmp_path):
    # two vocabularies of the same config from different corpora are different artifacts: the id
    # holds each parent's id, not only its kind (or a vocab of one corpus is reused for another)
    store = Store(tmp_path)
    one = store.build(Request(kind="corpus", name="c", stage_version=1, config={"a": 1}), _produce("a", []))
    two = store.build(Request(kind="corpus", name="c", stage_version=1, config={"a": 2}), _produce("b", []))
    assert one.id != two.id
    of = [Request(kind="vocab", name="v", stage_version=1, config={}, parents=(p,)) for p in (one, two)]
    assert of[0].id() != of[1].id()
    assert of[0].id() == Request(kind="vocab", name="v", stage_version=1, config={}, parents=(one,)).id()


def test_show_and_report_name_an_installed_kolectra_s_build_without_python_s_none(tmp_path, monkeypatch, capsys):
    """Built by a kolectra installed from a wheel (no git checkout: ``git_commit`` null), ``artifacts show``
    said ``(kolectra 0.1.0, git None)`` and the report ``(git `None`)``; both say there was no checkout."""
    from kolectra.pipeline.cli import main
    from kolectra.pipeline.store import manifest

    monkeypatch.setattr(manifest, "_git_commit", lambda: None)  # what an install in site-packages records
    store = Store(tmp_path / "root")
    art = store.build(Request(kind="corpus", name="demo", stage_version=1, config={"a": 1}), _produce("hi", []))
    assert art.manifest["provenance"]["git_commit"] is None
    assert main(["artifacts", "show", art.id, "--out", str(store.root)]) == 0
    built = next(line for line in capsys.readouterr().out.splitlines() if line.lstrip().startswith("built"))
    assert "None" not in built and built.endswith(", no git checkout)"), built
    assert main(["report", art.id, "--out", str(store.root), "--dest", str(tmp_path / "rep")]) == 0
    row = next(line for line in (tmp_path / "rep" / "report.md").read_text(encoding="utf-8").splitlines()
               if line.startswith("| kolectra |"))
    assert "None" not in row and "(no git checkout)" in row, row
    assert manifest.commit_label({"git_commit": "0123456789abcdef0123"}) == "git 0123456789ab"
