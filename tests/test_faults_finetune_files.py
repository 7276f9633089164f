"""A fine-tuning data file that is a FIFO or a folder is named for what it is, in one line, before
anything reads it (issue 43: a FIFO was "not found"; reading one blocks until a writer comes)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kolectra.pipeline.cli import main


@pytest.mark.parametrize("command, kind, expected", [
    (["finetune", "nsmc"], "fifo", "data file is not a regular file (a pipe"),
    (["finetune", "classify"], "fifo", "data file is not a regular file (a pipe"),
    (["finetune", "nsmc"], "folder", "data file is a folder, not a file"),
    (["finetune", "nsmc"], "missing", "data file not found"),
])
def test_a_data_file_that_is_no_file_is_one_line(tmp_path, capsys, command, kind, expected):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}", encoding="utf-8")
    data = tmp_path / "train.txt"
    if kind == "fifo":
        os.mkfifo(data)
    elif kind == "folder":
        data.mkdir()
    argv = [*command, "--model", str(model), "--train", str(data), "--test", str(data), "--out", str(tmp_path / "r")]
    assert main(argv) == 2
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if ln]
    assert len(err) == 1 and expected in err[0] and str(data) in err[0], err


def test_the_probe_refuses_a_fifo_the_same_way(tmp_path):
    from kolectra.pipeline import stages
    from kolectra.pipeline.store.artifacts import ArtifactError, Store

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}", encoding="utf-8")
    os.mkfifo(tmp_path / "train.txt")
    with pytest.raises(ArtifactError, match="probe: data file is not a regular file"):
        stages.probe(Store(tmp_path / "r"), str(model), tmp_path / "train.txt", tmp_path / "train.txt")


def test_a_bucket_url_as_a_data_file_says_the_files_are_read_from_disk(tmp_path):
    """--train s3://bucket/train.txt was "not found: s3:/bucket/train.txt" (argparse's Path folds the //),
    as if the object were missing; the task's files are read from this machine's disk."""
    from kolectra.pipeline import stages
    from kolectra.pipeline.store.artifacts import ArtifactError, Store

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}", encoding="utf-8")
    (tmp_path / "test.txt").write_text("id\tdocument\tlabel\n", encoding="utf-8")
    for url in ("s3://bucket/ratings_train.txt", "gs://bucket/ratings_train.txt"):
        with pytest.raises(ArtifactError, match="is a URL, and a task's data files are read from this machine's disk") as e:
            stages.probe(Store(tmp_path / "r"), str(model), Path(url), tmp_path / "test.txt")
        assert str(e.value).endswith(f": {url}"), e.value  # as typed, not folded to s3:/bucket/...


def test_a_hangul_file_name_the_locale_misspells_says_so(tmp_path):
    """Under ko_KR.EUC-KR (Python's UTF-8 mode off) a UTF-8 다른이름.tsv given as --train was "not found" and
    nothing more: Python decodes the argument with the C library, the file system's names with its codec."""
    built = subprocess.run(["localedef", "-i", "ko_KR", "-f", "EUC-KR", str(tmp_path / "ko_KR.euckr")],
                           capture_output=True) if shutil.which("localedef") else None
    if built is None or built.returncode != 0:
        pytest.skip("no localedef with ko_KR and EUC-KR here")
    data = tmp_path / "다른이름.tsv"
    data.write_text("id\tdocument\tlabel\n", encoding="utf-8")
    code = "import sys; from pathlib import Path; from kolectra.finetune.files import data_file_problem as p; print(p(Path(sys.argv[1])))"
    env = {**os.environ, "LOCPATH": str(tmp_path), "LC_ALL": "ko_KR.euckr", "LANG": "ko_KR.euckr", "PYTHONUTF8": "0"}
    run = subprocess.run([sys.executable, "-c", code, os.fsencode(data)], env=env, capture_output=True, check=True)
    assert run.stdout.startswith(b"not found; Python reads file names and arguments as euc_kr"), run.stdout
    run = subprocess.run([sys.executable, "-c", code, os.fsencode(data)], env={**env, "PYTHONUTF8": "1"},
                         capture_output=True, check=True)
    assert run.stdout == b"None\n"  # in UTF-8 mode it is found
