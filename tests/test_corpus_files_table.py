"""The corpus job's per-input-file table: every file's row in ``stats/files.jsonl`` (sorted by
name, written like the rejects: grouped, sorted in spilled runs, streamed), stats.json with the
totals, the first ``STATS_SOURCES`` rows and how many it leaves out; what the writer holds does
not grow with the number of input files; the counts reconcile over the rows and the totals."""

import dataclasses
import hashlib
import json
import random
import tracemalloc

from kolectra.corpus import build, outputs
from kolectra.corpus.config import default_config

LINES = ["좋은 영화였어요 정말로 추천합니다", "배우들 연기가 너무 좋았다 또 보고 싶다", "[1, 2]", "ㅋㅋ"]


def test_every_file_has_its_row_and_stats_json_keeps_the_first_ones(tmp_path, monkeypatch):
    root = tmp_path / "in"
    root.mkdir()
    for i in range(5):  # file i: i + 1 lines, a reject (a JSON array) in the odd ones
        lines = [f'{{"text": "{LINES[j % 2]} {i}-{j}"}}' for j in range(i + 1)] + (["[1, 2]"] if i % 2 else [])
        (root / f"f{i}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setattr(outputs, "STATS_SOURCES", 2)
    cfg = dataclasses.replace(default_config(), num_shards=1, max_reject_ratio=0.5)
    out = tmp_path / "out"
    stats = build.build(cfg, [str(root / "*.jsonl")], out, []).stats

    rows = [json.loads(line) for line in (out / outputs.FILES_FILE).read_text(encoding="utf-8").splitlines()]
    expected = [{"source": f"f{i}.jsonl", "records_in": i + 1 + i % 2, "rejected": i % 2,
                 "bytes": (root / f"f{i}.jsonl").stat().st_size,
                 "sha256": hashlib.sha256((root / f"f{i}.jsonl").read_bytes()).hexdigest()} for i in range(5)]
    assert rows == expected  # the old stats.json table's rows, each with its source, in name order
    assert stats == json.loads((out / outputs.STATS_FILE).read_text(encoding="utf-8"))
    assert stats["sources"] == {r["source"]: {k: v for k, v in r.items() if k != "source"} for r in expected[:2]}
    assert (stats["sources_count"], stats["sources_truncated"], stats["sources_file"]) == (5, 3, outputs.FILES_FILE)
    # reconciliation: over the totals, and the rows add up to them
    assert stats["records_in"] == stats["records_out"] + stats["rejected"] + sum(stats["dropped"].values())
    assert stats["records_in"] == sum(r["records_in"] for r in rows) == 17
    assert stats["rejected"] == sum(r["rejected"] for r in rows) == 2
    assert list(outputs.read_file_rows(str(out))) == [(r["source"], {k: v for k, v in r.items() if k != "source"})
                                                       for r in expected]


def _held(n_files: int, tmp_path) -> tuple[int, int]:
    """The tracemalloc peak of writing n_files' rows (arriving in no order, one chunk each, as the
    job's grouped values) and stats.json with the first STATS_SOURCES of them; stats.json's size."""
    names = [f"crawl/part-{i:07d}.jsonl.gz" for i in range(n_files)]
    random.Random(n_files).shuffle(names)
    rows = [(s, {"records_in": 1000, "rejected": 3, "bytes": 123_456, "sha256": hashlib.sha256(s.encode()).hexdigest()})
            for s in names]
    tallies = [(outputs.RECORDS_IN, 1000 * n_files), (outputs.INPUT_FILES, n_files), (("rejected", "invalid_json"), 3 * n_files),
               (("train", "documents"), 997 * n_files)]
    out = tmp_path / str(n_files)
    shown = sorted(rows)[:outputs.STATS_SOURCES]  # what the job's Top.Smallest hands the stats writer
    tracemalloc.start()
    entry = outputs.write_sorted((outputs.FILES_FILE, (outputs.file_item(r)[1] for r in rows)), str(out), run_bytes=256 << 10)
    outputs.write_stats(tallies, str(out), default_config(), shown)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert entry["bytes"] == (out / outputs.FILES_FILE).stat().st_size
    assert [s for s, _ in outputs.read_file_rows(str(out))] == sorted(names)
    return peak, (out / outputs.STATS_FILE).stat().st_size


def test_the_table_writers_hold_the_same_whatever_the_file_count(tmp_path, monkeypatch):
    """stats.json held one row per input file in one element on one worker (221 MB at 100,000
    files); now its table is bounded and the full one streams in runs of run_bytes."""
    monkeypatch.setattr(outputs, "STATS_SOURCES", 100)
    small_peak, small_stats = _held(2_000, tmp_path)
    large_peak, large_stats = _held(20_000, tmp_path)
    assert large_stats - small_stats < 64, "stats.json grew with the number of files"  # a few wider totals
    assert large_peak < 1.3 * small_peak + (256 << 10), f"{small_peak / 1e6:.2f} MB at 2,000 files, {large_peak / 1e6:.2f} at 20,000"
