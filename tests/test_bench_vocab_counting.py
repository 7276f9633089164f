"""benchmarks/vocab_counting.py's count child: its peak RSS figures are MB of 10^6 bytes, the unit
``corpus/local_memory.py``'s models (``vocab/count.py``'s ``LOCAL_MEMORY``) count in, which the
``--sizes`` fit is compared with; ``ru_maxrss`` is KiB."""

import gzip
import json
import resource
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def vocab_counting(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    for name in ("vocab_counting", "common"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import vocab_counting

    return vocab_counting


def _corpus(root: Path) -> Path:
    from kolectra.corpus import shards

    (root / shards.DATA_DIR).mkdir(parents=True)
    with gzip.open(root / shards.DATA_DIR / "train-00000-of-00001.jsonl.gz", "wt", encoding="utf-8") as f:
        for i in range(3):
            text = "영화 좋다"
            f.write(json.dumps({"id": str(i), "source": "t", "text": text, "sentences": [[0, len(text)]],
                                "morphs": [[0, 2, "NNG"], [3, 4, "VA"], [4, 5, "EF"]]}, ensure_ascii=False) + "\n")
    return root


def test_peak_rss_is_in_mb_of_10_6_bytes(vocab_counting, monkeypatch, tmp_path, capsys):
    real = resource.getrusage

    class Usage:
        def __init__(self, who, maxrss):
            r = real(who)
            self.ru_utime, self.ru_stime, self.ru_maxrss = r.ru_utime, r.ru_stime, maxrss

    # 1,000,000 KiB (1.024 GB) for this process, less for its children
    monkeypatch.setattr(vocab_counting.resource, "getrusage",
                        lambda who: Usage(who, 1_000_000 if who == resource.RUSAGE_SELF else 10))
    vocab_counting.count_once("stream", _corpus(tmp_path / "corpus"), 10**9, 1 / 9)
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["types"] > 0
    assert out["peak_rss_mb"] == 1024  # 1.024e9 bytes; KiB / 1024 gave 977 (MiB)
    # every process's VmHWM summed, in the same unit as by_process()'s launcher figure
    parts = out["launcher_peak_mb"] + sum(out["worker_peaks_mb"])  # each rounded apart
    assert abs(out["peak_rss_all_mb"] - parts) <= 1 + len(out["worker_peaks_mb"])
