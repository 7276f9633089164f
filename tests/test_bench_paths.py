"""A benchmark's path arguments (``type=Path``: ``--corpus``, ``--vocab``, ``--out``, ``--data``, ...) take
this machine's files only: a store URL was folded into a local path (``s3://b/k`` is ``s3:/b/k``), so
``vocab_counting.py --corpus s3://...`` counted an empty corpus and ended in 'ZeroDivisionError: division
by zero', and ``local_peak.py --out s3://...`` kept its corpus in a folder named ``s3:`` here. Now
argparse refuses the URL in one line (exit 2)."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_a_url_given_for_a_benchmark_s_path_is_refused_in_one_line(tmp_path):
    run = subprocess.run([sys.executable, str(REPO / "benchmarks" / "vocab_counting.py"), "--corpus",
                          "s3://some-bucket/r/corpus/sample-0123456789abcdef", "--methods", "exact"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert run.returncode == 2, run.stderr[-2000:]
    line = run.stderr.strip().splitlines()[-1]
    assert line == ("vocab_counting.py: error: argument --corpus: s3://some-bucket/r/corpus/sample-0123456789abcdef: "
                    "a URL, and a benchmark reads and writes this machine's disk only: copy it here (or name a "
                    "local folder)"), line
    assert list(tmp_path.iterdir()) == []


def test_every_path_argument_of_the_benchmarks_parser_refuses_a_url(monkeypatch, capsys, tmp_path):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    monkeypatch.delitem(sys.modules, "common", raising=False)
    import common

    p = common.parser("doc", "a minute")
    p.add_argument("--out", type=Path)
    common.add_data_args(p, *list(common.LAYOUT)[:1])
    for argv in (["--out", "gs://b/x"], ["--data", "s3://b/data"], ["--out", "file:/x"]):
        with pytest.raises(SystemExit) as e:
            p.parse_args(argv)
        assert e.value.code == 2 and "a URL, and a benchmark reads and writes this machine's disk" in capsys.readouterr().err
    assert p.parse_args(["--out", str(tmp_path), "--data", "d"]).out == tmp_path
