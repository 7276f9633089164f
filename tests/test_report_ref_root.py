"""``kolectra report REF`` where REF is an artifact's folder in a root other than ``--out``'s (moto's S3 server,
tests/s3_support.py, and a disk root): without ``--dest`` the report was drawn in ./artifacts/reports (the
default root's), away from the artifact, and without its parents' sections (they were looked up in the default
root only). Now it goes to the reports/ of the root the (first) REF lies in, with the whole lineage drawn."""

from __future__ import annotations

import json

import pytest

from kolectra.core import storage
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.factory import open_store
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)
from tests.test_report_store_root import _build, _lineage


def _printed(capsys) -> str:
    return capsys.readouterr().out.strip().splitlines()[-1]


def test_a_ref_in_another_root_is_reported_in_that_roots_reports(bucket, tmp_path, monkeypatch, capsys):  # noqa: F811
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KOLECTRA_HOME", raising=False)
    root = f"{bucket}/k"
    store = open_store(root)
    ev = _lineage(store)
    ckpt = store.resolve(ev.parents[0])
    kq = _build(store, "eval", "toy-korquad", {"metrics.json": json.dumps(
        {"task": "korquad", "exact_match": 10.0, "f1": 20.0}).encode()}, [ckpt])
    disk = open_store(str(tmp_path / "disk"))
    mine = _build(disk, "eval", "mine-nsmc", {"metrics.json": json.dumps({"task": "nsmc", "accuracy": 0.7}).encode()},
                  [_build(disk, "checkpoint", "mine", {"metrics.jsonl": b""})])

    # one REF, a bucket's artifact URL, no --out: beside it, with its parents' plots
    assert main(["report", f"{root}/eval/{ev.path.name}"]) == 0
    where = f"{root}/reports/eval-{ev.path.name}"
    assert _printed(capsys) == f"{where}/report.md"
    names = sorted(k.rsplit("/", 1)[-1] for k in storage.listing(where))
    assert names == sorted(["report.md", f"{ckpt.path.name}-training.png",
                            f"{store.resolve(ckpt.parents[0]).path.name}-funnel.png", f"{ev.path.name}-curve.png"])
    text = storage.read_bytes(f"{where}/report.md").decode()
    assert "## corpus" in text and "## checkpoint" in text and "## eval" in text
    # a disk root's artifact folder, --out naming the bucket: the disk root's reports/
    assert main(["report", str(mine.path), "--out", root]) == 0
    assert _printed(capsys) == str(tmp_path / "disk" / "reports" / f"eval-{mine.path.name}" / "report.md")
    # a table of the bucket's two: its reports/; of two roots: the first REF's
    assert main(["report", f"{root}/eval/{ev.path.name}", f"{root}/eval/{kq.path.name}"]) == 0
    assert _printed(capsys).startswith(f"{root}/reports/table-")
    assert main(["report", f"{root}/eval/{ev.path.name}", str(mine.path)]) == 0
    first_bucket = _printed(capsys)
    assert first_bucket.startswith(f"{root}/reports/table-") and storage.exists(first_bucket)
    assert main(["report", str(mine.path), f"{root}/eval/{ev.path.name}"]) == 0
    first_disk = _printed(capsys)
    assert first_disk.startswith(str(tmp_path / "disk" / "reports" / "table-"))
    assert first_disk.rsplit("/", 2)[1] == first_bucket.rsplit("/", 2)[1]  # the same table, in each root
    assert not (tmp_path / "artifacts").exists()  # nothing in the default root
    # a --dest in the REF's root, elsewhere than its reports/, is refused as one in --out's root is
    assert main(["report", f"{root}/eval/{ev.path.name}", "--dest", f"{root}/notes"]) != 0
    err = capsys.readouterr().err
    assert f"inside {root}" in err and f"{root}/reports" in err and not storage.listing(f"{root}/notes")


@pytest.mark.parametrize("how", ["name", "id"])
def test_a_name_or_id_is_still_reported_in_the_out_root(tmp_path, monkeypatch, capsys, how):
    monkeypatch.chdir(tmp_path)
    store = open_store(str(tmp_path / "root"))
    ev = _build(store, "eval", "x-nsmc", {"metrics.json": json.dumps({"task": "nsmc", "accuracy": 0.5}).encode()})
    assert main(["report", ev.name if how == "name" else ev.id, "--out", str(tmp_path / "root")]) == 0
    assert _printed(capsys) == str(tmp_path / "root" / "reports" / f"eval-{ev.path.name}" / "report.md")


def test_a_ref_in_a_bucket_keeps_its_overlap_result_in_that_roots_cache(bucket, tmp_path, monkeypatch, capsys):  # noqa: F811
    """The report's eval-in-corpus result (pipeline/overlap.py) of a bucket's eval reported by its URL was kept in
    ./artifacts/.cache/overlap (--out's root, made for it); now in that root's cache, as an --out report keeps it."""
    import gzip  # noqa: PLC0415

    from kolectra.pipeline.store.manifest import fingerprint_inputs  # noqa: PLC0415
    from kolectra.pipeline.store.request import Request  # noqa: PLC0415
    from tests.test_eval_overlap import nsmc  # noqa: PLC0415
    from tests.test_eval_overlap_lineage import files  # noqa: PLC0415

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KOLECTRA_HOME", raising=False)
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))
    root = f"{bucket}/k"
    store = open_store(root)
    shard = gzip.compress("".join(json.dumps({"id": f"d{i}", "source": "s", "text": t, "sentences": [], "morphs": []},
                                             ensure_ascii=False) + "\n" for i, t in enumerate(["배우가 좋다"])).encode())

    corpus = store.build(Request(kind="corpus", name="toy", stage_version=1, config={}),
                         files(**{"data/train-00000-of-00001.jsonl.gz": shard}))
    examples = store.build(Request(kind="examples", name="toy", stage_version=1, config={"split": "train"},
                                   parents=(corpus,)), files())
    ckpt = store.build(Request(kind="checkpoint", name="toy", stage_version=1, config={}, parents=(examples,)), files())
    train, test = nsmc(tmp_path / "train.txt", ["좋다", "싫다"]), nsmc(tmp_path / "test.txt", ["배우가 좋다", "별로"])
    ev = store.build(Request(kind="eval", name="toy-nsmc", stage_version=1, config={"task": "nsmc"}, parents=(ckpt,),
                             inputs=tuple(fingerprint_inputs([train, test]))),
                     files(**{"metrics.json": json.dumps({"task": "nsmc", "accuracy": 0.5}).encode()}))
    assert main(["report", f"{root}/eval/{ev.path.name}"]) == 0
    md = storage.read_bytes(_printed(capsys)).decode()
    assert "**1 of 3 rows (33.3%)** appear verbatim" in md
    assert not (tmp_path / "artifacts").exists()
    assert len(list((tmp_path / "cache" / "roots").glob("*/.cache/overlap/*.json"))) == 1
    assert main(["report", f"{root}/eval/{ev.path.name}"]) == 0  # read back from there
    assert "overlap: reading" not in capsys.readouterr().err


@pytest.mark.parametrize("refs", [1, 2])
def test_a_default_place_that_cannot_be_written_says_where_it_came_from(tmp_path, monkeypatch, capsys, refs):
    """Since the report of a REF in another root goes to that root's reports/, a root this user cannot write (a
    colleague's) fails there; the error says that place was the default and how to choose another (--dest).
    Here its reports/ is a file: the same OSError path as a read-only folder (this suite may run as root)."""
    monkeypatch.chdir(tmp_path)
    other = open_store(str(tmp_path / "theirs"))
    evs = [_build(other, "eval", f"x{i}-nsmc", {"metrics.json": json.dumps({"task": "nsmc", "accuracy": 0.5}).encode()})
           for i in range(refs)]
    (tmp_path / "theirs" / "reports").write_text("not a folder", encoding="utf-8")
    assert main(["report", *(str(e.path) for e in evs)]) != 0
    err = capsys.readouterr().err
    assert "give --dest DIR to write it elsewhere" in err and str(tmp_path / "theirs") in err, err
    assert main(["report", *(str(e.path) for e in evs), "--dest", str(tmp_path / "mine")]) == 0
    assert (tmp_path / "mine" / "report.md").is_file()
    assert main(["report", *(str(e.path) for e in evs), "--dest", str(tmp_path / "theirs" / "reports" / "x")]) != 0
    assert "give --dest" not in capsys.readouterr().err  # a --dest given: its error alone
