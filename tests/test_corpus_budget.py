"""What a corpus step counts against its chunk budget (``corpus/chunks.py``) and how many dedup
groups an input is given (``corpus/outputs.py``): per-worker memory follows a setting, not the
corpus's records or its files' format."""

import dataclasses
import json
import tracemalloc

from kolectra.corpus import build, chunks, outputs, steps
from kolectra.corpus.config import default_config


def _held(step, listed) -> int:
    """What ``ReadAndClean`` held beyond its output while reading a file (tracemalloc)."""
    step.setup()
    tracemalloc.start()
    out = [o for o in step.process((0, [(listed, "meta")])) if not hasattr(o, "tag")]
    kept, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert out
    return peak - kept


def test_kept_fields_count_against_the_read_steps_budget(tmp_path, monkeypatch):
    """10 kB of kept metadata a record beside a 100-byte review: the read step's waiting chunks
    counted only the text and id, so they held the whole file (25 MB at a 256 kB budget)."""
    path = tmp_path / "meta.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for i in range(600):
            meta = {"tags": [f"태그{i}-{j}" for j in range(400)], "note": "설명 " * 200}
            f.write(json.dumps({"id": f"m-{i}", "text": f"정말 재미있는 영화였다 배우 연기 최고 {i}번째 리뷰",
                                "meta": meta}, ensure_ascii=False) + "\n")
    [listed] = build.inputs.list_inputs([str(path)])
    budget = 256 << 10
    monkeypatch.setattr(chunks, "BUDGET", budget)
    cfg = dataclasses.replace(default_config(), keep_fields=("meta",))
    held = _held(steps.ReadAndClean(cfg, 8192, None), listed)
    assert held < 6 * budget, held  # 1.3 MB: the budget and the reader's working memory (25 MB uncounted)


def test_value_size_counts_what_a_json_value_holds():
    value = {"a": ["x" * 1000, {"b": "y" * 2000}], "n": 3}
    assert chunks.value_size(value) > 3000 + chunks.value_size({})
    assert chunks.value_size(("z" * 500,)) > 500


def test_parquet_input_expands_like_its_jsonl_for_the_dedup_groups_and_the_shards():
    """A Parquet file is compressed (snappy): the NSMC reviews' 24 MB of Parquet were 57 MB of JSONL,
    so counting it at its stored size gave groups 2.4 times dedup_group_bytes, and shards 2.4 times
    shard_bytes (corpus 12: 84 shards here where its JSONL gets 200)."""
    jsonl, parquet = [("a.jsonl", 57 << 20)], [("a.parquet", 24 << 20)]
    assert outputs.expected_input_bytes(parquet) > 0.95 * outputs.expected_input_bytes(jsonl)
    groups = build.dedup_buckets(outputs.expected_input_bytes(parquet), 1 << 20)
    assert groups == build.dedup_buckets(outputs.expected_input_bytes(jsonl), 1 << 20) == 64
    shards, jsonl_shards = outputs.shards_for(parquet, 1 << 20), outputs.shards_for(jsonl, 1 << 20)
    assert abs(shards - jsonl_shards) <= 0.05 * jsonl_shards, (shards, jsonl_shards)
