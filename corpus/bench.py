"""Throughput benchmark of the corpus stage against raw Kiwi, for ``benchmarks/corpus.py``.

value: MB/s of document text (UTF-8 bytes of the input texts) through the whole Beam pipeline
(read, clean, filter, dedup, Kiwi, shard, write; start-up included). baseline: MB/s of a bare
single-threaded ``Kiwi.split_into_sents(text, return_tokens=True)`` loop over the same texts,
measured in the same run. ratio = value / baseline: the share of Kiwi's raw speed the pipeline
keeps (Kiwi dominates; 1.0 would mean the pipeline costs nothing on top, >1 needs more workers).

Inputs are ``--input`` paths/globs (any format the stage reads). Without one, a deterministic
synthetic Korean corpus is generated from templates, so the benchmark runs anywhere offline.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

_SUBJECTS = ["이 영화", "주인공", "감독의 연출", "배우들 연기", "스토리", "음악", "결말", "영상미", "이 드라마", "대사"]
_PREDICATES = [
    "정말 재밌었어요", "너무 지루했다", "기대 이상이었습니다", "별로였음 ㅠㅠ", "최고였다 ㅋㅋ",
    "다시 보고 싶네요", "이해가 안 된다", "감동적이었어요", "시간이 아깝다", "꼭 보세요",
]


def synthetic_corpus(path: Path, lines: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(lines):
            sents = [f"{rng.choice(_SUBJECTS)}{rng.choice(['은', '는', '이', '가', '도'])} {rng.choice(_PREDICATES)}." for _ in range(rng.randint(1, 4))]
            f.write(json.dumps({"id": str(i), "text": " ".join(sents) + f" #{i}"}, ensure_ascii=False) + "\n")


def _texts(files: list[str], cfg) -> list[str]:
    from corpus import reader

    out = []
    for path in files:
        for rec in reader.read_file(path, path, cfg.format, cfg.text_field, cfg.id_field, cfg.max_line_bytes):
            if "text" in rec:
                out.append(rec["text"])
    return out


def raw_kiwi_mb_s(texts: list[str]) -> float:
    from corpus.segment import Segmenter
    from corpus.text import normalize

    kiwi = Segmenter().kiwi
    clean = [normalize(t) for t in texts]
    kiwi.split_into_sents(clean[0] or "워밍업", return_tokens=True)
    start = time.perf_counter()
    for t in clean:
        if t:
            kiwi.split_into_sents(t, return_tokens=True, return_sub_sents=False)
    seconds = time.perf_counter() - start
    return sum(len(t.encode("utf-8")) for t in texts) / 1e6 / seconds


def main(argv: list[str] | None = None) -> dict:
    from corpus.config import default_config
    from corpus.pipeline import build
    from corpus.reader import expand_inputs

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2,000 lines instead of 20,000")
    ap.add_argument("--input", action="append", default=[], help="path or glob (repeatable)")
    ap.add_argument("--lines", type=int, default=None, help="synthetic corpus size")
    args, beam_args = ap.parse_known_args(argv)
    cfg = default_config()
    with tempfile.TemporaryDirectory(prefix="kolectra-bench-") as tmp:
        inputs = args.input
        if not inputs:
            lines = args.lines or (2_000 if args.quick else 20_000)
            synthetic = Path(tmp, "synthetic.jsonl")
            synthetic_corpus(synthetic, lines)
            inputs = [str(synthetic)]
        texts = _texts(expand_inputs(inputs), cfg)
        text_mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
        out = Path(tmp, "out")
        out.mkdir()
        start = time.perf_counter()
        result = build(cfg, inputs, out, beam_args)
        seconds = time.perf_counter() - start
        baseline = raw_kiwi_mb_s(texts)
    value = text_mb / seconds
    report = {
        "benchmark": "corpus_pipeline_throughput",
        "unit": "MB/s of text",
        "value": round(value, 4),
        "baseline": {"name": "raw kiwipiepy split_into_sents, 1 thread", "value": round(baseline, 4)},
        "ratio": round(value / baseline, 4),
        "config": {"records": len(texts), "text_mb": round(text_mb, 3), "seconds": round(seconds, 2),
                   "documents": result.stats["records_out"], "beam_args": beam_args,
                   "inputs": "synthetic" if not args.input else args.input, "quick": args.quick},
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
    }
    print(json.dumps(report, ensure_ascii=False))
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
