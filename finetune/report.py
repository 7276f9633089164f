"""What a person reads from a fine-tuning run: a results table and the learning-curve PNG.

Used by the tasks (``finetune.nsmc``, ``korquad``, ``classify``, ``regress``, ``ner``; last stage of
the chain) at the end of a run and by ``finetune.seeds`` for summaries over seeds.  Pure formatting
over the run's metrics; the PNG comes from :mod:`core.plot` (matplotlib, saved without metadata),
so it is reproducible bytes like the rest of the eval artifact.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from kolectra.core.plot import Panel, chart

# a percentage in metrics.json (NSMC's accuracy_pct, a --seeds summary of it): 4 decimals drop the binary noise
# of 100.0 * a fraction (100.0 * 0.528 is 52.800000000000004) and keep a 50,000-row test's resolution (0.002 %)
PERCENT_DECIMALS = 4


def percent(fraction: float) -> float:
    """``fraction`` in percent as metrics.json holds it: ``percent(0.528)`` is 52.8."""
    return round(100.0 * fraction, PERCENT_DECIMALS)


def format_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Plain-text table: first column left-aligned, the others right-aligned."""
    cells = [[str(h) for h in header]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[k]) for r in cells) for k in range(len(header))]

    def line(r: list[str]) -> str:
        return "  ".join(c.ljust(w) if k == 0 else c.rjust(w) for k, (c, w) in enumerate(zip(r, widths))).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule] + [line(r) for r in cells[1:]])


def _cell(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.2f}"
    return "-" if v is None else str(v)


def nsmc_table(metrics: dict) -> str:
    """Per-epoch train loss / dev accuracy, the chosen epoch marked, then the test score."""
    rows = [(e["epoch"], e["train_loss"], 100 * e["dev_accuracy"], "*" if e["epoch"] == metrics["best_epoch"] else "")
            for e in metrics["epochs"]]
    table = format_table(("epoch", "train loss", "dev acc %", "chosen"), [(a, f"{b:.4f}", c, d) for a, b, c, d in rows])
    if metrics.get("eval_set"):  # rows that are not NSMC's test set (a study's held-out rows) are not called so
        return (f"{table}\nNSMC accuracy {metrics['accuracy_pct']:.2f}% on {metrics['test_examples']} "
                f"{metrics['eval_set']}; epoch {metrics['best_epoch']}, chosen on {metrics['dev_examples']} dev rows")
    return (f"{table}\nNSMC test accuracy {metrics['accuracy_pct']:.2f}% on {metrics['test_examples']} rows "
            f"(epoch {metrics['best_epoch']}, chosen on {metrics['dev_examples']} dev rows)")


def korquad_table(metrics: dict) -> str:
    rows = [(e["epoch"], f"{e['train_loss']:.4f}", e.get("dev_exact_match"), e.get("dev_f1")) for e in metrics["epochs"]]
    table = format_table(("epoch", "train loss", "EM", "F1"), rows)
    return (f"{table}\nKorQuAD EM {metrics['exact_match']:.2f} F1 {metrics['f1']:.2f} on "
            f"{metrics['questions']} questions of {metrics['eval_set']} (last epoch; no selection on it)")


LABELS = {"accuracy": "accuracy", "macro_f1": "macro-F1", "spearman": "Spearman", "pearson": "Pearson",
          "f1": "F1", "precision": "precision", "recall": "recall"}


def file_task_table(task: str, metrics: dict, figures: Sequence[str]) -> str:
    """classify / regress / ner: per-epoch train loss and dev figures (in percent), the chosen epoch
    marked, then the test figures."""
    header = ("epoch", "train loss", *(f"dev {LABELS.get(f, f)} %" for f in figures), "chosen")
    rows = [(e["epoch"], f"{e['train_loss']:.4f}", *(100 * e[f"dev_{f}"] for f in figures),
             "*" if e["epoch"] == metrics["best_epoch"] else "") for e in metrics["epochs"]]
    test = ", ".join(f"{LABELS.get(f, f)} {100 * metrics[f]:.2f}%" for f in figures)
    return (f"{format_table(header, rows)}\n{task} test {test} on {metrics['test_examples']} rows (epoch "
            f"{metrics['best_epoch']}, chosen on dev {LABELS.get(metrics['selection'], metrics['selection'])} "
            f"over {metrics['dev_examples']} rows)")


def write_learning_curve(out_dir: Path, task: str, metrics: dict, log) -> None:
    """``learning_curve.png`` and the numbers behind it, ``learning_curve.json``."""
    from kolectra.finetune.files import write_json  # noqa: PLC0415

    write_json(Path(out_dir) / "learning_curve.json",
               {"task": task, "log_every_steps": log.log_every, "steps_per_epoch": log.steps_per_epoch,
                "train_loss": log.curve, "epochs": metrics["epochs"]})
    learning_curve(Path(out_dir) / "learning_curve.png", task, metrics, log.curve)


def learning_curve(path: Path, task: str, metrics: dict, curve: list[dict]) -> Path:
    """Two panels over epochs, each on its own axis: train loss (logged windows and epoch means)
    above, the dev metric below with the test score as a star at the epoch it was taken from."""
    loss = {"train loss (window)": [(p["epoch"], p["train_loss"]) for p in curve],
            "train loss (epoch mean)": [(e["epoch"], e["train_loss"]) for e in metrics["epochs"]]}
    if task == "nsmc" and metrics.get("eval_set"):  # not NSMC's test set: a study's held-out rows
        dev = {"dev accuracy %": [(e["epoch"], 100 * e["dev_accuracy"]) for e in metrics["epochs"]],
               "held-out accuracy % (chosen epoch)": [(metrics["best_epoch"], metrics["accuracy_pct"])]}
        title = f"NSMC: held-out accuracy {metrics['accuracy_pct']:.2f}% (not NSMC's test set)"
    elif task == "nsmc":
        dev = {"dev accuracy %": [(e["epoch"], 100 * e["dev_accuracy"]) for e in metrics["epochs"]],
               "test accuracy % (chosen epoch)": [(metrics["best_epoch"], metrics["accuracy_pct"])]}
        title = f"NSMC: test accuracy {metrics['accuracy_pct']:.2f}%"
    elif "selection" in metrics:  # classify / regress / ner: the figure the epoch was chosen by
        key, label = metrics["selection"], LABELS.get(metrics["selection"], metrics["selection"])
        dev = {f"dev {label} %": [(e["epoch"], 100 * e[f"dev_{key}"]) for e in metrics["epochs"]],
               f"test {label} % (chosen epoch)": [(metrics["best_epoch"], 100 * metrics[key])]}
        title = f"{task}: test {label} {100 * metrics[key]:.2f}%"
    else:
        per_epoch = [e for e in metrics["epochs"] if "dev_f1" in e]
        last = metrics["epochs"][-1]["epoch"]
        dev = {"EM": [(e["epoch"], e["dev_exact_match"]) for e in per_epoch] or [(last, metrics["exact_match"])],
               "F1": [(e["epoch"], e["dev_f1"]) for e in per_epoch] or [(last, metrics["f1"])]}
        title = f"KorQuAD: EM {metrics['exact_match']:.2f} F1 {metrics['f1']:.2f}"
        if str(metrics.get("eval_set", "")).startswith("by-article split"):  # korquad.eval_set_label's words
            title += " (by-article split, not the official dev set)"
    return chart(path, [Panel(loss, title, "epoch", "train loss"),
                        Panel(dev, "", "epoch", "EM / F1 (%)" if task == "korquad" else "dev metric", markers=True)],
                 width=640, panel_height=300)
