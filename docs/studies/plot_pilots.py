"""Plot the RTD-family pilots on the embedded sample (docs/studies.md, "Pilots on the sample").

    python docs/studies/plot_pilots.py ROOT [OUT_DIR]

ROOT is the artifact root the pilots were trained into (``--out``); every ``checkpoint/pilot-<arm>-<id>``
there is read (its metrics.jsonl and manifest), and two figures are written to OUT_DIR (default
docs/studies): the discriminator's AUC against tokens seen and against training FLOPs, and the
generator's accuracy against tokens seen. Tokens seen = steps x batch x sequence length.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kolectra.core import plot


def pilots(root: Path) -> dict[str, dict]:
    out = {}
    for d in sorted((root / "checkpoint").glob("pilot-*")):
        manifest = json.loads((d / "manifest.json").read_text(encoding="utf-8"))
        cfg, stats = manifest["config"], manifest["stats"]
        arm = d.name[len("pilot-"):].rsplit("-", 1)[0]
        per_step = manifest["compute"]["flops"] / stats["steps"]
        tokens = cfg["train"]["batch_size"] * stats["max_seq_length"]
        lines = [json.loads(x) for x in (d / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
        out[arm] = {"lines": lines, "flops_per_step": per_step, "tokens_per_step": tokens,
                    "final_auc": stats["final"].get("disc_auc"), "health": stats["health"]["status"]}
    return out


def main() -> None:
    root = Path(sys.argv[1])
    dest = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).resolve().parent
    runs = pilots(root)

    def series(key, x):
        return {arm: [(x(r, ln), ln[key]) for ln in r["lines"] if ln.get(key) is not None] for arm, r in runs.items()}

    by_tokens = lambda r, ln: ln["step"] * r["tokens_per_step"] / 1e6  # noqa: E731
    by_flops = lambda r, ln: ln["step"] * r["flops_per_step"]  # noqa: E731
    plot.chart(dest / "pilots_sample_disc_auc.png", [
        plot.Panel(series("disc_auc", by_tokens), "disc AUC against tokens seen (pilots on the sample, mini)",
                   "tokens seen (millions)", "disc AUC", hlines={"health's 0.65": 0.65}),
        plot.Panel(series("disc_auc", by_flops), "disc AUC against training FLOPs", "training FLOPs", "disc AUC",
                   hlines={"health's 0.65": 0.65}),
    ], width=720, panel_height=360)
    plot.line_chart(dest / "pilots_sample_gen_acc.png", series("gen_acc", by_tokens),
                    title="generator accuracy at the masked slots (pilots on the sample)",
                    xlabel="tokens seen (millions)", ylabel="generator accuracy")
    for arm, r in runs.items():
        print(f"{arm}: final disc AUC {r['final_auc']}, health {r['health']}, {r['flops_per_step']:.3e} FLOPs/step")


if __name__ == "__main__":
    main()
