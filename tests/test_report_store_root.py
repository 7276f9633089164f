"""``kolectra report REF`` on a store root (moto's S3 server, tests/s3_support.py): the command
`kolectra run --out s3://...` prints as its next step ended in an internal error (TypeError: the
plots and the copied learning curve took the artifact's s3:// path for a local one), with or without
``--dest``. Now the report is drawn locally and uploaded to ``ROOT/reports/...``, or written to
``--dest``, reading the artifacts' files where they are."""

from __future__ import annotations

import json

from kolectra.core import storage
from kolectra.core.stage import StageOutput
from kolectra.pipeline.cli import main
from kolectra.pipeline.report import render
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.request import Request
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)


def _build(store, kind, name, files, parents=()):
    def produce(out):
        for rel, data in files.items():
            (out / rel).write_bytes(data)
        return StageOutput(stats={})
    return store.build(Request(kind=kind, name=name, stage_version=1, config={"n": name}, parents=tuple(parents)),
                       produce)


def _lineage(store):
    stats = {"records_in": 10, "records_out": 8, "rejected": 1, "dropped": {"too_short": 1}}
    corpus = _build(store, "corpus", "toy", {"stats.json": json.dumps(stats).encode()})
    log = "".join(json.dumps({"step": s, "loss": 20.0 - s, "disc_auc": 0.5 + s / 100}) + "\n" for s in (1, 2, 3))
    ckpt = _build(store, "checkpoint", "toy", {"metrics.jsonl": log.encode()}, [corpus])
    return _build(store, "eval", "toy-nsmc", {"metrics.json": json.dumps({"task": "nsmc", "accuracy": 0.6}).encode(),
                                              "learning_curve.png": b"\x89PNG curve"}, [ckpt])


def test_the_report_of_an_artifact_in_a_bucket_is_uploaded_beside_the_artifacts(bucket, tmp_path, capsys):  # noqa: F811
    root = f"{bucket}/k"
    store = open_store(root)
    ev = _lineage(store)
    out = render(store, ev.id)
    where = f"{root}/reports/eval-{ev.path.name}"
    assert str(out) == f"{where}/report.md"
    ckpt = store.resolve(ev.parents[0])
    corpus = store.resolve(ckpt.parents[0])
    names = sorted(k.rsplit("/", 1)[-1] for k in storage.listing(where))
    assert names == sorted(["report.md", f"{ckpt.path.name}-training.png", f"{corpus.path.name}-funnel.png",
                            f"{ev.path.name}-curve.png"])
    text = storage.read_bytes(f"{where}/report.md").decode()
    assert "## corpus" in text and "## checkpoint" in text and "## eval" in text
    assert storage.read_bytes(f"{where}/{ev.path.name}-curve.png") == b"\x89PNG curve"
    # the command the run summary prints, and --dest, a local folder
    assert main(["report", ev.id, "--out", root]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"{where}/report.md"
    assert main(["report", ev.id, "--out", root, "--dest", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r" / "report.md").is_file() and (tmp_path / "r" / f"{ev.path.name}-curve.png").is_file()
    assert len(list((tmp_path / "r").glob("*.png"))) == 3


def test_a_dest_in_a_bucket_is_where_the_report_goes_not_a_local_folder_named_s3(bucket, tmp_path, monkeypatch,  # noqa: F811
                                                                                 capsys):
    """``--dest s3://...`` was made a local path by the command line ('s3:/bucket/...'): report.md and its PNGs
    went to ./s3:/bucket/... in the working folder, that path was printed and nothing reached the bucket, from a
    disk root as from a store root, for one artifact and for a score table. Now they go to the bucket; a bucket
    that does not exist is refused in one line before anything is drawn."""
    monkeypatch.chdir(tmp_path)
    for root in (str(tmp_path / "root"), f"{bucket}/k"):
        store = open_store(root)
        ev = _lineage(store)
        ckpt = store.resolve(ev.parents[0])
        other = _build(store, "eval", "toy-korquad", {"metrics.json": json.dumps(
            {"task": "korquad", "exact_match": 10.0, "f1": 20.0}).encode()}, [ckpt])
        mine = f"{bucket}/mine/{'disk' if root.startswith('/') else 'store'}"
        assert main(["report", ev.id, "--out", root, "--dest", f"{mine}/one"]) == 0
        assert capsys.readouterr().out.strip().splitlines()[-1] == f"{mine}/one/report.md"
        names = sorted(k.rsplit("/", 1)[-1] for k in storage.listing(f"{mine}/one"))
        assert "report.md" in names and f"{ev.path.name}-curve.png" in names and len(names) == 4
        assert "## eval" in storage.read_bytes(f"{mine}/one/report.md").decode()
        assert main(["report", ev.id, other.id, "--out", root, "--dest", f"{mine}/table/"]) == 0
        assert capsys.readouterr().out.strip().splitlines()[-1] == f"{mine}/table/report.md"
        assert "2 evaluations" in storage.read_bytes(f"{mine}/table/report.md").decode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root"]  # no ./s3: folder
    for refs in ([ev.id], [ev.id, other.id]):
        assert main(["report", *refs, "--out", f"{bucket}/k", "--dest", "s3://kolectra-no-such-bucket-m6/r"]) != 0
        err = capsys.readouterr().err
        assert "kolectra-no-such-bucket-m6" in err and "does not exist" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root"]
