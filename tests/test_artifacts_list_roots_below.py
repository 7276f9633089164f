"""``kolectra artifacts list --out PARENT`` over a folder or bucket whose roots are one level below: it said
``(no artifacts under s3://bucket/)`` alone, where the artifacts were under ``s3://bucket/k`` (seen by a user who
gave the bucket for the root). It now names the roots below and the ``--out`` to give."""

from __future__ import annotations

from kolectra.core.stage import StageOutput
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.request import Request
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)


def _one_artifact(root: str) -> None:
    def produce(out):
        (out / "a.txt").write_text("가", encoding="utf-8")
        return StageOutput(stats={})
    open_store(root).build(Request(kind="corpus", name="toy", stage_version=1, config={}), produce)


def _listed(capsys, root: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["artifacts", "list", "--out", root])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_folder_above_a_root_names_the_root_below(tmp_path, capsys):
    _one_artifact(str(tmp_path / "k"))
    (tmp_path / "notes").mkdir()  # another folder, no root: not named
    code, out, err = _listed(capsys, str(tmp_path))
    assert code == 0 and out == ""
    assert f"(no artifacts under {tmp_path}; a root one level below: {tmp_path / 'k'} (--out {tmp_path / 'k'}))" in err
    code, out, err = _listed(capsys, str(tmp_path / "notes"))  # nothing below either: the line as it was
    assert f"(no artifacts under {tmp_path / 'notes'})" in err


def test_a_bucket_above_a_root_names_the_root_below(bucket, capsys):  # noqa: F811
    _one_artifact(f"{bucket}/k")
    code, out, err = _listed(capsys, bucket)
    assert code == 0 and out == ""
    assert f"; a root one level below: {bucket}/k (--out {bucket}/k))" in err
