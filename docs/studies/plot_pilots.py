"""Plot the RTD-family pilots (docs/studies.md, "Pilots on the sample" and "Pilots on the review corpus").

    python docs/studies/plot_pilots.py ROOT [OUT_DIR] [PREFIX] [TAG]

ROOT is the artifact root the pilots were trained into (``--out``); every ``checkpoint/<PREFIX><arm>-<id>``
there is read (its metrics.jsonl and manifest): PREFIX ``pilot-`` (the default) for ``kolectra pretrain
--name pilot-<arm>``, ``study-`` for the points of a ``kolectra study`` (its untrained floor is skipped).
Figures go to OUT_DIR (default docs/studies), named ``pilots_<TAG>_*.png`` (TAG default ``sample``):
the discriminator's AUC against tokens seen and against training FLOPs, and the generator's accuracy
(with the accuracy of MLM's or the discriminator's own vocabulary head, where an arm has one) against
tokens seen. Tokens seen = steps x batch x sequence length. With PREFIX ``study-``, the newest
study under ROOT also gives the probe accuracy of each arm: a figure of it against the tokens each arm
saw (the untrained floor as a line), and a Markdown table on stdout.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kolectra.core import plot
from kolectra.model import health


def pilots(root: Path, prefix: str = "pilot-") -> dict[str, dict]:
    out = {}
    for d in sorted((root / "checkpoint").glob(f"{prefix}*")):
        arm = d.name[len(prefix):].rsplit("-", 1)[0]
        if arm == "floor" or not (d / "metrics.jsonl").is_file():
            continue
        manifest = json.loads((d / "manifest.json").read_text(encoding="utf-8"))
        cfg, stats = manifest["config"], manifest["stats"]
        per_step = manifest["compute"]["flops"] / stats["steps"]
        tokens = cfg["train"]["batch_size"] * stats["max_seq_length"]
        lines = [json.loads(x) for x in (d / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
        # the verdict again with this checkout's model/health.py (the recorded one is the trainer's at the time)
        ctx = health.Context(objective=cfg["objective"]["objective"], vocab_size=stats["vocab_size"],
                             warmup_steps=cfg["train"]["warmup_steps"], total_steps=stats["steps"], lr=cfg["train"]["lr"],
                             nonpad_tokens=stats["nonpad_tokens_seen"], dropout=cfg["model"].get("dropout", 0.0))
        out[arm] = {"lines": lines, "flops_per_step": per_step, "tokens_per_step": tokens, "steps": stats["steps"],
                    "final": stats["final"], "health": stats["health"]["status"], "now": health.verdict(lines, ctx),
                    "warmup": ctx.warmup_steps, "wall_s": manifest["compute"].get("wall_seconds"), "id": d.name}
    return out


def newest_study(root: Path) -> dict | None:
    found = sorted((root / "study").glob("*/study.json"), key=lambda p: p.stat().st_mtime)
    return json.loads(found[-1].read_text(encoding="utf-8")) if found else None


def cell(v: float | None) -> str:
    return "—" if v is None else f"{v:.3f}"


def table(runs: dict[str, dict], study: dict) -> list[str]:
    """One row per arm: budget, what it saw, where its AUC ended, its probe, the trainer's health."""
    probe = {p["objective"]: p["readouts"].get("probe", [None])[0] for p in study["points"]}
    floor = study["floor"].get("probe", [None])[0]
    rows = [("| arm | steps | tokens seen | pretraining wall time | disc AUC at the end | highest | "
             "generator accuracy | probe % | health as recorded | health now |"), "| --- " * 10 + "|"]
    rows.append(f"| floor (untrained) | 0 | 0 | — | — | — | — | {100 * floor:.2f} | — | — |")
    for arm, r in runs.items():
        # past warm-up: the spike while the generator is still poor (fakes easy to spot) is not the highest learned
        aucs = [ln["disc_auc"] for ln in r["lines"] if ln.get("disc_auc") is not None and ln["step"] > r["warmup"]]
        fig = r["now"]["figures"]  # the last two windows, weighted by their steps
        score = probe.get(arm)
        rows.append(f"| {arm} | {r['steps']:,} | {r['steps'] * r['tokens_per_step'] / 1e6:.2f} M | "
                    f"{r['wall_s'] / 60:.1f} min | {cell(fig.get('disc_auc'))} | {cell(max(aucs) if aucs else None)} | "
                    f"{cell(fig.get('gen_acc'))} | {'—' if score is None else f'{100 * score:.2f}'} | {r['health']} | "
                    f"{r['now']['status']} |")
    return rows


def main() -> None:
    root = Path(sys.argv[1])
    dest = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).resolve().parent
    prefix = sys.argv[3] if len(sys.argv) > 3 else "pilot-"
    tag = sys.argv[4] if len(sys.argv) > 4 else "sample"
    where = "the sample" if tag == "sample" else f"the {tag} corpus"
    runs = pilots(root, prefix)

    def series(key, x):
        return {arm: [(x(r, ln), ln[key]) for ln in r["lines"] if ln.get(key) is not None] for arm, r in runs.items()}

    def by_tokens(r, ln):
        return ln["step"] * r["tokens_per_step"] / 1e6

    def by_flops(r, ln):
        return ln["step"] * r["flops_per_step"]

    plot.chart(dest / f"pilots_{tag}_disc_auc.png", [
        plot.Panel(series("disc_auc", by_tokens), f"disc AUC against tokens seen (pilots on {where}, mini)",
                   "tokens seen (millions)", "disc AUC", hlines={"health's 0.65": 0.65}),
        plot.Panel(series("disc_auc", by_flops), "disc AUC against training FLOPs", "training FLOPs", "disc AUC",
                   hlines={"health's 0.65": 0.65}),
    ], width=720, panel_height=360)
    # the encoder's own vocabulary head: MLM's, or the discriminator's (hybrid, corrective, mlm_then_rtd)
    head = {**{a: p for a, p in series("mlm_acc", by_tokens).items() if p and a.startswith("mlm") and "rtd" not in a},
            **{a: p for a, p in series("disc_mlm_acc", by_tokens).items() if p}}
    plot.chart(dest / f"pilots_{tag}_gen_acc.png", [
        plot.Panel({a: p for a, p in series("gen_acc", by_tokens).items() if p},
                   f"generator accuracy at the masked slots (pilots on {where})", "tokens seen (millions)",
                   "generator accuracy"),
        *([plot.Panel(head, "the encoder's own vocabulary head: accuracy at the masked slots",
                      "tokens seen (millions)", "accuracy")] if head else []),
    ], width=720, panel_height=360)
    for arm, r in runs.items():
        print(f"{arm}: final disc AUC {r['final'].get('disc_auc')}, health {r['health']}, "
              f"{r['flops_per_step']:.3e} FLOPs/step")
    study = newest_study(root) if prefix == "study-" else None
    if study is not None:
        seen = {p["objective"]: p["steps"] for p in study["points"]}
        points = {arm: [(seen[arm] * r["tokens_per_step"] / 1e6, 100 * p["readouts"]["probe"][0])]
                  for arm, r in runs.items() for p in study["points"] if p["objective"] == arm and arm in seen}
        plot.chart(dest / f"pilots_{tag}_probe.png", [plot.Panel(
            points, f"probe accuracy against tokens seen at equal FLOPs (pilots on {where})",
            "tokens seen (millions)", "probe accuracy %",
            hlines={"untrained floor": 100 * study["floor"]["probe"][0]})], width=720, panel_height=400)
        print("\n".join(table(runs, study)))


if __name__ == "__main__":
    main()
