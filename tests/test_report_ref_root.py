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
