"""Shared plumbing for ``benchmarks/<stage>.py``: the result line every benchmark prints.

Each benchmark measures kolectra and a baseline side by side in one run and prints, as its last
line, one JSON object (``../shared/CONTRACT.md``): ``benchmark``, ``unit``, ``value``,
``baseline`` (``name``, ``value``), ``ratio`` (value / baseline, higher is better), ``config``
and ``machine``. ``--quick`` selects a reduced size that finishes within about a minute.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any, Callable

SHARED_DATA = Path(os.environ.get("KOLECTRA_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def reviews(limit: int | None, who: str) -> list[tuple[str, str]]:
    """(id, NFC text) of the NSMC review corpus in ``SHARED_DATA``, the first ``limit`` of them."""
    import gzip
    import sys
    import unicodedata

    src = SHARED_DATA / "corpus" / "nsmc-reviews"
    paths = sorted(src.glob("*.jsonl.gz"))
    if not paths:
        sys.exit(f"{who}: no reviews under {src} (set KOLECTRA_SHARED_DATA)")
    out = []
    for path in paths:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                text = unicodedata.normalize("NFC", " ".join(str(r.get("text", "")).split()))
                if text:
                    out.append((str(r.get("id", len(out))), text))
                if limit and len(out) >= limit:
                    return out
    return out


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="reduced size, about a minute on 2 cores")
    return p


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "processor": platform.processor() or platform.machine(),
    }
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return info


def best_of(fn: Callable[[], Any], repeats: int = 3) -> tuple[float, Any]:
    """Smallest wall time of ``repeats`` calls (and the last result)."""
    best, result = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def emit(benchmark: str, unit: str, value: float, baseline_name: str, baseline_value: float,
         config: dict[str, Any], **extra: Any) -> dict[str, Any]:
    result = {
        "benchmark": benchmark,
        "unit": unit,
        "value": value,
        "baseline": {"name": baseline_name, "value": baseline_value},
        "ratio": value / baseline_value if baseline_value else None,
        "config": config,
        "machine": machine(),
        **extra,
    }
    print(json.dumps(result, ensure_ascii=False))
    return result
