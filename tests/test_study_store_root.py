"""``kolectra study --out s3://...`` (moto's S3 server, tests/s3_support.py): a study runs on a disk root.
Its NSMC splits and held-out ids are files under the root that its examples and readouts name by path,
and it reads the corpus and its runs' files from disk; given a bucket root it ended in an internal error
(``TypeError: ... S3Path``) where it first wrote a split. Now it is refused in one line before anything
is built."""

from __future__ import annotations

from kolectra.core import storage
from kolectra.pipeline.cli import main
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)


def test_a_study_on_a_bucket_root_is_refused_in_one_line_before_anything_is_built(bucket, tmp_path, capsys,  # noqa: F811
                                                                                  monkeypatch):
    monkeypatch.chdir(tmp_path)
    nsmc = tmp_path / "ratings.txt"
    nsmc.write_text("id\tdocument\tlabel\n" + "".join(f"{i}\t리뷰 {i} 정말 좋다\t{i % 2}\n" for i in range(40)),
                    encoding="utf-8")
    args = ["study", "--corpus", "sample", "--nsmc-train", str(nsmc), "--flops", "1e9", "--dev-rows", "10",
            "--probe-rows", "10", "--lowdata-rows", "5", "--finetune-rows", "10"]
    for given, env in ((["--out", f"{bucket}/k"], {}), ([], {"KOLECTRA_HOME": f"{bucket}/k"})):
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        assert main([*args, *given]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and "internal error" not in err, err
        line = err.strip().splitlines()[-1]
        assert line.startswith(f"kolectra study: error: study: {'--out ' if given else 'the root '}{bucket}/k"), line
        assert "a study runs on a disk root" in line and "give --out a local directory" in line, line
        assert storage.listing(bucket) == {}  # nothing written to the bucket
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ratings.txt"]  # nor here


def test_a_bucket_url_as_nsmc_train_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    """--nsmc-train s3://bucket/ratings.txt was read as the local path s3:/bucket/ratings.txt (argparse's
    Path folds the //): 'No such file or directory', as if the object were missing."""
    monkeypatch.chdir(tmp_path)
    args = ["study", "--corpus", "sample", "--nsmc-train", "s3://bucket/ratings.txt", "--flops", "1e9",
            "--out", str(tmp_path / "r")]
    assert main(args) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--nsmc-train is a URL, and a task's data files are read from this machine's disk" in line, line
    assert line.endswith(": s3://bucket/ratings.txt"), line  # as typed, not folded to s3:/bucket/...
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing built
