"""Benchmark: fine-tuning wall time by CPU thread count, on a machine that may be busy with other work.

Runs the NSMC fine-tuning of ``kolectra run`` (the embedded sample: 1,600 training rows, 500 dev
and 500 test rows, 5 epochs, max length 64) on a tiny random ELECTRA of the ``tiny`` pretraining
preset's shape (hidden 64, 2 layers), each run in a process of its own, for three settings:

- ``cpu_threads=1``: kolectra's default;
- ``cpu_threads=0``: torch's default, one thread per core (what fine-tuning used before);
- ``cpu_threads=0`` with ``OMP_WAIT_POLICY=PASSIVE`` in the environment (waiting OpenMP threads
  sleep instead of spinning; it must be set before torch starts, so only the shell can set it).

The settings take turns, ``--repeats`` rounds; the 1-minute load average is read before every
run.  Value: runs per hour with the default (3600 / median seconds); baseline: torch's default.

    python benchmarks/finetune_threads.py [--quick] [--repeats N]

``--quick``: 400 training rows, 2 epochs, one round (unless ``--repeats``).  Full size: 3 rounds
of the three settings; a few minutes on 2 idle cores, up to about 40 minutes on a busy machine
(spinning threads ran 339-735 s a run at load 8-12).  No data argument: it reads the embedded sample.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import emit, parser

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "pipeline" / "sample"
VARIANTS = {"threads_1": (1, {}), "threads_default": (0, {}),
            "threads_default_passive": (0, {"OMP_WAIT_POLICY": "PASSIVE"})}


def one_run(model: str, out: str, threads: int, sets: list[str]) -> dict:
    """The child process: one fine-tuning run, its wall time."""
    from kolectra.core.config import override
    from kolectra.finetune import nsmc
    from kolectra.finetune.config import sample_nsmc

    cfg = override(sample_nsmc(), sets + [f"cpu_threads={threads}"])
    t0 = time.perf_counter()
    result = nsmc.run(cfg, Path(model), SAMPLE / "nsmc_train.txt", SAMPLE / "nsmc_test.txt", Path(out))
    return {"seconds": time.perf_counter() - t0, "threads": result.compute["torch_threads"],
            "accuracy": result.stats["accuracy"]}


def main() -> None:
    p = parser(__doc__, "a few minutes on 2 idle cores, up to about 40 on a busy machine")
    p.add_argument("--repeats", type=int, default=None, help="rounds (default 3; --quick: 1)")
    p.add_argument("--one", help=argparse.SUPPRESS)  # the child process: one run, a JSON spec
    args = p.parse_args()
    if args.one:
        spec = json.loads(args.one)
        print(json.dumps(one_run(spec["model"], spec["out"], spec["threads"], spec["sets"])))
        return
    sets = ["max_train_examples=1600", "max_eval_examples=500", "epochs=5", "optim.lr=5e-4"]
    repeats = args.repeats or (1 if args.quick else 3)
    if args.quick:
        sets = ["max_train_examples=400", "max_eval_examples=200", "epochs=2", "optim.lr=5e-4"]
    runs: dict[str, list[dict]] = {k: [] for k in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        from tiny_model import build_tiny_model_dir

        from kolectra.finetune.readers.nsmc import read_nsmc

        texts = [r.document for r in read_nsmc(SAMPLE / "nsmc_train.txt").rows]
        model = build_tiny_model_dir(Path(tmp) / "model", texts, hidden=64, layers=2, heads=2, vocab_size=4000)
        for r in range(repeats):
            for name, (threads, env) in VARIANTS.items():
                load = os.getloadavg()[0]
                spec = {"model": str(model), "out": f"{tmp}/{name}-{r}", "threads": threads, "sets": sets}
                proc = subprocess.run([sys.executable, __file__, "--one", json.dumps(spec)], capture_output=True,
                                      text=True, env={**os.environ, **env, "TRANSFORMERS_VERBOSITY": "error"})
                if proc.returncode:
                    sys.exit(proc.stderr[-3000:])
                got = json.loads(proc.stdout.strip().splitlines()[-1]) | {"load_before": load}
                runs[name].append(got)
                print(f"round {r + 1} {name}: {got['seconds']:.1f} s ({got['threads']} threads, "
                      f"load {load:.2f})", file=sys.stderr)
    med = {k: statistics.median(x["seconds"] for x in v) for k, v in runs.items()}
    summary = {k: {"median_s": round(med[k], 2), "min_s": round(min(x["seconds"] for x in v), 2),
                   "max_s": round(max(x["seconds"] for x in v), 2),
                   "load_before": [round(x["load_before"], 2) for x in v], "threads": v[0]["threads"]}
               for k, v in runs.items()}
    emit("finetune_threads", "NSMC sample fine-tunings per hour", round(3600 / med["threads_1"], 2),
         "torch's default threads (one per core)", round(3600 / med["threads_default"], 2),
         config={"sets": sets, "repeats": repeats, "quick": args.quick, "model": "random tiny (hidden 64, 2 layers)",
                 "interleaved": True, "isolated": True, "statistic": "median"},
         runs=summary, ratio_vs_default_passive=round(med["threads_default_passive"] / med["threads_1"], 3))


if __name__ == "__main__":
    main()
