"""``datasets.load_dataset(<corpus dir>)`` through the corpus artifact's dataset card: the card as
corpus stage version 8 writes it (``morphs`` one ``json`` value a document, kept fields declared by
kind) against the card before it (``morphs`` a ``json`` value a morpheme, kept fields ``json``), on
the same shards, each loaded in a fresh process with an empty cache. Unit: documents loaded per CPU
second of that process. Also checks that both load the same rows.

    python benchmarks/corpus_load.py --quick              # the embedded 4,000 reviews
    python benchmarks/corpus_load.py --reviews 'data/corpus/nsmc-reviews/reviews-00000-*.jsonl.gz'
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import add_data_args, emit, parser, reviews_source

CARD_BEFORE = ("  - name: morphs\n    dtype: json\n", "  - name: morphs\n    list:\n      list: json\n")
LOAD = """
import json, resource, sys
import datasets
datasets.disable_progress_bars()
d = datasets.load_dataset(sys.argv[1], cache_dir=sys.argv[2])
r = resource.getrusage(resource.RUSAGE_SELF)
rows = sorted((row for split in d.values() for row in split), key=lambda x: (x["source"], x["id"], x["text"]))
print(json.dumps({"cpu_s": r.ru_utime + r.ru_stime, "peak_rss_mb": r.ru_maxrss // 1024, "rows": len(rows),
                  "digest": __import__("hashlib").sha256(json.dumps(rows, ensure_ascii=False).encode()).hexdigest()}))
"""


def old_card(corpus: Path, dest: Path, keep: tuple[str, ...]) -> Path:
    """A copy of ``corpus`` whose card declares what corpus stage version 7 declared."""
    shutil.copytree(corpus, dest)
    card = (dest / "README.md").read_text(encoding="utf-8").replace(*CARD_BEFORE)
    for field in keep:
        for dtype in ("string", "int64", "float64", "bool"):
            card = card.replace(f'- name: "{field}"\n    dtype: {dtype}\n', f'- name: "{field}"\n    dtype: json\n')
    (dest / "README.md").write_text(card, encoding="utf-8")
    return dest


def load(corpus: Path, cache: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", LOAD, str(corpus), str(cache)], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = parser(__doc__, "one 82,801-review shard: about 3 minutes")
    add_data_args(p, "reviews")
    args = p.parse_args()
    from kolectra.pipeline import stages
    from kolectra.pipeline.store.artifacts import Store

    source = reviews_source(args, "benchmarks/corpus_load.py")
    keep = ("rating", "movie_id", "date")
    with tempfile.TemporaryDirectory(prefix="kolectra-load-") as tmp:
        tmp = Path(tmp)
        art = stages.corpus(Store(tmp / "root"), [source], sets=[f"keep_fields={json.dumps(list(keep))}"])
        before = old_card(art.path, tmp / "before", keep)
        new, old = load(art.path, tmp / "cache-new"), load(before, tmp / "cache-old")
    if (new["rows"], new["digest"]) != (old["rows"], old["digest"]):
        raise SystemExit("benchmarks/corpus_load.py: the two cards loaded different rows")
    docs = new["rows"]
    emit("corpus_load_dataset", "documents per CPU second", docs / new["cpu_s"], "card of corpus stage 7",
         docs / old["cpu_s"], {"source": source, "documents": docs, "keep_fields": list(keep)},
         cpu_s={"card 8": round(new["cpu_s"], 2), "card 7": round(old["cpu_s"], 2)},
         peak_rss_mb={"card 8": new["peak_rss_mb"], "card 7": old["peak_rss_mb"]})


if __name__ == "__main__":
    main()
