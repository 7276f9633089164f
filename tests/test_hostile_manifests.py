"""Manifests from a root from elsewhere that no kolectra wrote, refused as one problem naming the
manifest rather than failing inside whoever reads them: a lone surrogate (JSON's ``"\\ud800"``,
which no UTF-8 text holds: the digests and a terminal fail on it) and a file name longer than any
file system holds (``stat`` fails with "File name too long")."""

import json
from pathlib import Path

import pytest

from kolectra.core import storage
from kolectra.core.stage import StageOutput
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import Store, verify_dir
from kolectra.pipeline.store.manifest import digest, fields_digest, files_digest
from kolectra.pipeline.store.request import Request


def _build(root: Path):
    def produce(out: Path) -> StageOutput:
        (out / "a.txt").write_text("hello")
        return StageOutput(stats={"n": 1})

    return Store(root).build(Request(kind="corpus", name="demo", stage_version=1, config={"a": 1}), produce)


def _edit(art, change) -> None:
    """The manifest changed and resealed (digests recomputed where they can be), as a hostile root's."""
    mp = art.path / "manifest.json"
    m = json.loads(mp.read_text(encoding="utf-8"))
    change(m)
    try:
        m.update(digest=digest(m["files"]), files_digest=files_digest(m["files"]))
        m["fields_digest"] = fields_digest(m)
    except UnicodeEncodeError:  # a lone surrogate: no digest can be taken, the manifest is written as it is
        pass
    mp.write_text(json.dumps(m), encoding="utf-8")  # ensure_ascii: the surrogate is written "\ud800"


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda m: m["stats"].update(note="\ud800"), "lone surrogate"),
        (lambda m: m["files"].append({"path": "data/a\udcffb", "bytes": 1, "sha256": "0" * 64}), "lone surrogate"),
        (lambda m: m["files"].append({"path": "x" * 300, "bytes": 1, "sha256": "0" * 64}), "longer than 255 bytes"),
        (
            lambda m: m["files"].append({"path": "데" * 90 + "/a", "bytes": 1, "sha256": "0" * 64}),
            "longer than 255 bytes",
        ),
    ],
    ids=["surrogate in stats", "surrogate in a path", "long name", "long Korean folder"],
)
def test_a_manifest_no_kolectra_wrote_is_one_problem_not_a_crash(tmp_path, capsys, change, said):
    art = _build(tmp_path / "root")
    _edit(art, change)
    problems = verify_dir(art.path)
    assert len(problems) == 1 and said in problems[0] and "manifest.json" in problems[0]
    assert main(["artifacts", "verify", str(art.path), "--out", str(tmp_path / "root")]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and said in err and "internal error" not in err and len(err) < 1000


def test_a_store_key_with_a_name_over_255_bytes_is_not_written_locally(tmp_path):
    with pytest.raises(storage.StoreError, match="longer than 255 bytes"):
        storage.local_target(tmp_path, "a/" + "b" * 256, "s3://bucket/root")
    assert storage.local_target(tmp_path, "a/" + "b" * 255) == tmp_path / "a" / ("b" * 255)


INDEX = {
    "format": 2,
    "max_seq_length": 16,
    "dtype": "uint16",
    "vocab_size": 100,
    "pad_id": 0,
    "cls_id": 2,
    "sep_id": 3,
    "mask_id": 4,
    "examples": 3,
    "packing": "isolated",
    "shards": [{"path": "data/shard-00000-0000.arrow", "examples": 3}],
}


@pytest.mark.parametrize(
    "index",
    [
        {**INDEX, "shards": 5},
        {**INDEX, "shards": [{"path": "data/shard-00000-0000.arrow", "examples": "three"}]},
        {**INDEX, "max_seq_length": None},
        {**INDEX, "dtype": ["uint16"]},
        7,
        "[" * 100_000 + "]" * 100_000,
    ],
    ids=["shards a number", "examples a word", "length null", "dtype a list", "a number", "nested too deep"],
)
def test_an_examples_index_of_other_types_is_an_examples_error(tmp_path, index):
    """What pretraining reads of an examples artifact whose index.json (and manifest, to match) was
    rewritten: the store's layout check reads only the shard paths, the rest is checked here."""
    from kolectra.model.data import ExamplesError, read_index

    (tmp_path / "index.json").write_text(index if isinstance(index, str) else json.dumps(index), encoding="utf-8")
    with pytest.raises(ExamplesError, match="index.json"):
        read_index(tmp_path)


def test_gc_never_publishes_a_leftover_build_outside_the_root(tmp_path):
    """A complete build left in ``.tmp`` is published by gc under its manifest's name: a name that is
    a path ("../../elsewhere/corpus/demo") moved the build over a directory outside the root (another
    root's artifact of that id), deleting what was there."""
    art = _build(tmp_path / "root")
    root, aid = tmp_path / "root", art.id
    victim = tmp_path / "elsewhere" / "corpus" / f"demo-{aid}"
    victim.mkdir(parents=True)
    (victim / "precious.txt").write_text("keep me")
    leftover = root / ".tmp" / f"corpus-demo-{aid}-0123abcd"
    art.path.rename(leftover)
    _edit(type(art)(path=leftover, manifest=art.manifest), lambda m: m.update(name="../../elsewhere/corpus/demo"))
    Store(root).collect()
    assert sorted(p.name for p in victim.iterdir()) == ["precious.txt"]
    assert not (root / "corpus").exists() or not any((root / "corpus").iterdir())


def test_a_run_whose_scratch_names_lead_out_sets_nothing_aside(tmp_path):
    """``.work/<kind>-<id>/request.json`` of a run in a root from elsewhere names its working state;
    resumed, set_aside removed ``kept/NAME`` and moved ``out/NAME``: "../../../../x" is outside the root."""
    from kolectra.pipeline.store import workspace

    victim = tmp_path / "elsewhere"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me")
    run = workspace.Run(tmp_path / "root" / ".work" / "checkpoint-0123456789abcdef")
    run.out.mkdir(parents=True)
    (run.path / workspace.REQUEST).write_text(json.dumps({"scratch": ["../../../../elsewhere", "steps"]}))
    assert "scratch" not in run.request
    run.set_aside()
    assert sorted(p.name for p in victim.iterdir()) == ["precious.txt"]
