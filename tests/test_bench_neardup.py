"""The near-dup studies' command line: ``--quick`` without ``--reviews``/``--data`` reads the
embedded sample (``pipeline/sample/reviews.jsonl.gz``), as its help and the missing-data message say."""

import gzip
import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_neardup_bits_quick_runs_on_the_embedded_sample_without_data():
    env = {k: v for k, v in os.environ.items() if k != "KOLECTRA_BENCH_DATA"}
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "neardup_bits.py"), "--quick"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    with gzip.open(REPO / "pipeline" / "sample" / "reviews.jsonl.gz", "rt", encoding="utf-8") as f:
        texts = {unicodedata.normalize("NFC", json.loads(row).get("text") or "").strip() for row in f} - {""}
    assert result["benchmark"] == "neardup_bits" and result["config"]["files"] == 1
    assert result["config"]["documents"] == len(texts)
    assert [row["bits"] for row in result["bits"]] == [32, 16, 8, 4, 2]
