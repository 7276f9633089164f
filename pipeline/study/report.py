"""The study's report: ``report.md`` with its tables and verdicts, and the plots beside it.

Reads the ``study.json`` document :mod:`kolectra.pipeline.study.runner` assembled (``floor``, ``points``,
``comparisons``) and the checkpoints' ``metrics.jsonl`` for the training curves. Scores are
accuracies on the held-out rows, shown in percent; intervals are hierarchical bootstrap 95 %
intervals of paired differences and, with two or more pretraining seeds, the seeds' Student-t
interval beside them (:mod:`kolectra.pipeline.study.stats`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kolectra.core import plot
from kolectra.core.config import override
from kolectra.core.jsonl import read_lines
from kolectra.finetune.config import NSMC_PRESETS
from kolectra.model import health
from kolectra.pipeline.markdown import code, text
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.study.plan import readout_recipe
from kolectra.pipeline.study.stats import side

# Each finding of the pretraining verdict (model/health.py ``findings``), by how its sentence opens, its kind and
# the few words a health cell says it in: the report flagged every not-learning point "AT PRIOR", a stuck
# generator or masked LM included (:func:`not_learning_label`).
PROBLEM_KINDS = (("the discriminator sits at the class prior", "disc_at_prior", "discriminator at the class prior"),
                 ("the discriminator has not learned even", "disc_below_prior", "discriminator worse than the class prior"),
                 ("the gradient norm was not finite", "grad_not_finite", "gradient norm not finite"),
                 ("the generator has not left uniform", "gen_uniform", "generator at uniform guessing"),
                 (health.DISC_MLM_STUCK, "disc_mlm_uniform", "discriminator's MLM phase at uniform guessing"),
                 ("the generator reproduces the original", "gen_too_strong", "generator too strong"),
                 ("the all-tokens LM has learned no more", "copy_only", "all-tokens LM no better than copying"),
                 ("the masked LM has not left uniform", "mlm_uniform", "masked LM at uniform guessing"))


def problem_kind(problem: str) -> str:
    """A finding's kind (``disc_at_prior``, ``gen_uniform``, ...; ``other`` for a sentence of no known kind)."""
    return next((kind for opening, kind, _ in PROBLEM_KINDS if problem.startswith(opening)), "other")


def problem_words(kind: str) -> str:
    """A kind in a few words, for a table cell: ``gen_uniform`` -> "generator at uniform guessing"."""
    return next((words for _, k, words in PROBLEM_KINDS if k == kind), "not learning")


READOUT_TEXT = {"probe": "linear probe (frozen encoder)", "lowdata": "low-data fine-tuning",
                "finetune": "fine-tuning"}


def recipe_text(recipe: str, plan: dict) -> str:
    """What a readout recipe does, in words: the probe's layer and pooling, or the fine-tuning's
    optimizer settings as resolved (the preset's layer-wise LR decay included: the study's low-data
    recipe has decay 0.8 from the ``electra`` preset, which the docs once left unsaid)."""
    base, sets = readout_recipe(recipe)
    if base == "probe":
        got = dict(s.split("=", 1) for s in sets)
        layer = got.get("layer", "last")
        where = ("the best layer, chosen on dev rows carved from the probe's train rows" if layer == "best" else
                 "the top layer" if layer == "last" else f"layer {layer} (0 = the embeddings)")
        from kolectra.finetune.probe import ProbeConfig  # noqa: PLC0415 - torch: `kolectra report` stays light

        length = override(ProbeConfig(), sets).max_length
        return f"{READOUT_TEXT[base]}: {where}, {got.get('pooling', 'mean')} pooling, max length {length} tokens"
    cfg = override(NSMC_PRESETS[plan.get("finetune_preset", "electra")](), [*plan.get("finetune_sets", ()), *sets])
    o = cfg.optim
    return (f"{READOUT_TEXT[base]}: preset {plan.get('finetune_preset', 'electra')}, lr {o.lr:g}, layer-wise LR decay "
            f"{o.layerwise_lr_decay:g}, warmup {o.warmup_fraction:g}, weight decay {o.weight_decay:g}, {cfg.epochs} "
            f"epochs, epoch chosen on a dev split of {cfg.dev_fraction:g} of its rows"
            + (f", top {cfg.reinit_top_layers} encoder layer(s) re-initialised" if cfg.reinit_top_layers else "")
            + f", max length {cfg.max_length} tokens")  # a score read from truncated rows says so (study 13)


def _pct(x: float) -> str:
    return f"{100 * x:.2f}"


def _ci(c: dict) -> str:
    """The difference, its bootstrap interval and (with 2+ pretraining seeds) the seeds' t-interval."""
    lo, hi = c["ci95"]
    seeds = f", seeds t [{100 * c['seed_t95'][0]:+.2f}, {100 * c['seed_t95'][1]:+.2f}]" if c.get("seed_t95") else ""
    return f"{100 * c['diff']:+.2f} [{100 * lo:+.2f}, {100 * hi:+.2f}{seeds}]"


def score_table(doc: dict, readout: str) -> list[str]:
    """Mean score per arm and budget with its spread over seeds, its lift over the floor, health."""
    floor = doc["floor"][readout]
    vs_floor = {(c["a"], c["flops"]): c for c in doc["comparisons"] if c["b"] == "floor" and c["readout"] == readout}
    floor_line = f"Floor (untrained model): {_pct(np.mean(floor))} % (runs: {', '.join(_pct(x) for x in floor)})."
    failed, total = learned_nothing(doc.get("floor_points", []), readout)
    if failed:  # a floor that learns nothing makes every arm look good
        floor_line += (f" **The readout learned nothing in {failed} of {total} floor runs** (its own health check): "
                       "being above such a floor says little.")
    lines = [f"### {code(readout)}: {text(recipe_text(readout, doc['plan']))}", "", floor_line, "",
             "| arm | FLOPs | mean % | runs (min-max) | vs floor, points [95 % CI] | disc AUC | replaced | gen acc | health |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    by_key: dict[tuple, list[dict]] = {}
    for p in doc["points"]:
        by_key.setdefault((p["objective"], p["flops"]), []).append(p)
    above = 0  # points above the floor: with none, a sentence says so in words under the table
    for (arm, flops), pts in by_key.items():
        above += side(vs_floor[(arm, flops)]) == 1
        scores = [s for p in pts for s in p["readouts"][readout]]
        health = [p["health"] for p in pts]
        auc = [h["disc_auc"] for h in health if h.get("disc_auc") is not None]
        rep = [h["replaced_share"] for h in health if h.get("replaced_share") is not None]
        gen = [h["gen_acc"] for h in health if h.get("gen_acc") is not None]
        lines.append(f"| {text(arm)} | {flops:.3g} | {_pct(np.mean(scores))} | {_pct(min(scores))}-{_pct(max(scores))} | "
                     f"{_ci(vs_floor[(arm, flops)])}: {VS_FLOOR[side(vs_floor[(arm, flops)])]} | {_mean(auc, 3)} | "
                     f"{_mean(rep, 2)} | {_mean(gen, 3)} | {health_cell(pts, readout)} |")
    if by_key and not above:
        lines += ["", none_above(readout, len(by_key))]
    return lines + [""]


# an arm's standing against the floor in a score table's "vs floor" cell (stats.side of both intervals)
VS_FLOOR = {1: "above the floor", -1: "below the floor", 0: "not separable from the floor"}
NONE_ABOVE = "**No arm is above the untrained floor"


def none_above(readout: str, points: int) -> str:
    """The sentence under a score table where no arm, at any budget, is above the floor: such a readout ranks
    nothing (every verdict between arms then names no winner), which a table of intervals left to be worked out."""
    where = "at its budget" if points == 1 else "at any budget"
    return (f"{NONE_ABOVE} {where} read by {code(readout)}**: by this readout no pretrained checkpoint reads "
            "better than a random initialisation (by its intervals), so it ranks no arm.")


def learned_nothing(points: list[dict], readout: str) -> tuple[int, int]:
    """(runs of ``readout`` whose own health verdict is ``not_learning``, runs) over ``points``."""
    said = [h for p in points for h in p.get("readout_health", {}).get(readout, [])]
    return sum(1 for h in said if h == "not_learning"), len(said)


def not_learning_label(point_health: dict) -> str:
    """What a not-learning point's verdict found, in a few words: ``AT PRIOR`` where its discriminator sits
    at the class prior (the only finding this label ever fitted; a stuck generator or masked LM read so
    too), ``NOT LEARNING: generator at uniform guessing`` and the like for the others."""
    kinds = point_health.get("problem_kinds") or []
    words = [problem_words(k) for k in kinds if k != "disc_at_prior"]
    if "disc_at_prior" in kinds:
        return " + ".join(["AT PRIOR", *words])
    return "NOT LEARNING" + (": " + ", ".join(words) if words else "")


def health_cell(pts: list[dict], readout: str) -> str:
    """``ok``, or what did not pass: pretraining seeds that learned nothing (what their verdict found) or were
    never checked, and why (a run that ended in warm-up, or whose last windows scored too few tokens of a class to
    judge the discriminator: model.health; the cell said 'pretraining unchecked (seed 1)' alone before study 12),
    and readouts that learned nothing."""
    def seeds(ps: list[dict]) -> str:
        return "(seed " + ", ".join(str(p["pretrain_seed"]) for p in ps) + ")"

    flags, stuck = [], {}
    for p in pts:
        if not p["health"]["left_prior"]:
            stuck.setdefault(not_learning_label(p["health"]), []).append(p)
    flags += [f"{label} {seeds(ps)}" for label, ps in stuck.items()]
    unchecked: dict[str, list[dict]] = {}  # by why (health_of's reason; a study.json before version 12 has none)
    for p in pts:
        if p["health"].get("status") == "unchecked":
            unchecked.setdefault(p["health"].get("reason", ""), []).append(p)
    flags += [f"pretraining unchecked{': ' + why if why else ''} {seeds(ps)}" for why, ps in unchecked.items()]
    failed, total = learned_nothing(pts, readout)
    if failed:
        flags.append(f"readout learned nothing in {failed} of {total} runs")
    return "; ".join(flags) or "ok"


def _mean(xs: list[float], digits: int) -> str:
    return f"{np.mean(xs):.{digits}f}" if xs else "–"


def verdicts_by_recipe(doc: dict) -> list[str]:
    """Each pair of arms at each budget, with the verdict of every recipe beside the recipe it rests on:
    recipes can disagree (issue 44), and a verdict means nothing apart from its readout."""
    by_pair: dict[tuple, list[dict]] = {}
    for c in doc["comparisons"]:
        if c["b"] != "floor":
            by_pair.setdefault((c["flops"], c["a"], c["b"]), []).append(c)
    lines = ["## Verdicts, recipe by recipe", ""]
    if not by_pair:  # a study of one arm: the heading stood over nothing
        lines.append(ONE_ARM)
    for (flops, a, b), cs in by_pair.items():
        said = [f"{code(c['readout'])}: {text(c['verdict'])} ({_ci(c)})" for c in cs]
        lines.append(f"- {text(a)} against {text(b)} at {flops:.3g} FLOPs: " + "; ".join(said) + ".")
        split = disagreement(cs)
        if split:
            lines.append(f"  {split}")
    return lines + [""]


def winner(verdict: str) -> str | None:
    """The arm a verdict names as ahead, or None (no winner, or an arm not above the floor)."""
    return verdict.split(" ahead of ", 1)[0] if " ahead of " in verdict else None


def disagreement(cs: list[dict]) -> str | None:
    """A sentence when the recipes reading one pair do not name the same winner (issue 44: at
    ``mini`` the study's low-data recipe put ELECTRA below the floor where a re-initialised top layer
    did not), so the summary never lets one recipe's verdict stand for the pair's. Two recipes
    naming different arms disagree; one naming an arm where another names none is weaker, and is
    said as such."""
    named = {c["readout"]: winner(c["verdict"]) for c in cs}
    if len(set(named.values())) < 2:
        return None
    parts = [f"{code(r)} {'names ' + text(w) if w else 'names no winner'}" for r, w in named.items()]
    arms = {w for w in named.values() if w}
    head = "**The recipes disagree:** " if len(arms) > 1 else "**Not every recipe names a winner:** "
    return head + ", ".join(parts) + "; each verdict holds for its own recipe only."


# under the verdicts and comparisons of a study of one arm, where a table of pairs was empty
ONE_ARM = "One arm: no pair of arms to judge; where it stands against the floor is in each score table's `vs floor` column."


def comparison_table(doc: dict) -> list[str]:
    if not any(c["b"] != "floor" for c in doc["comparisons"]):
        return [ONE_ARM, ""]
    lines = ["| readout recipe | FLOPs | a | b | a - b, points [95 % CI] | verdict |", "| --- | --- | --- | --- | --- | --- |"]
    for c in doc["comparisons"]:
        if c["b"] != "floor":
            lines.append(f"| {text(c['readout'])} | {c['flops']:.3g} | {text(c['a'])} | {text(c['b'])} | {_ci(c)} | "
                         f"{text(c['verdict'])} |")
    return lines + [""]


def plots(store: Store, out: Path, doc: dict) -> list[str]:
    """Score against FLOPs per readout (floor as a flat line), and the discriminators' AUC curves."""
    names = []
    for readout, floor in doc["floor"].items():
        runs: dict[str, dict[float, list[float]]] = {}  # arm -> budget -> every run's score
        for p in doc["points"]:
            runs.setdefault(p["objective"], {}).setdefault(p["flops"], []).extend(p["readouts"][readout])
        # one point per budget: the mean over pretraining and fine-tuning seeds, as in the score table
        series = {arm: [(f, 100 * float(np.mean(v))) for f, v in by_flops.items()] for arm, by_flops in runs.items()}
        flops = sorted({p["flops"] for p in doc["points"]})
        series["floor (untrained)"] = [(f, 100 * float(np.mean(floor))) for f in flops]
        name = f"{readout}_vs_flops.png"
        plot.line_chart(out / name, {k: sorted(v) for k, v in series.items()},
                        title=f"{readout}: held-out accuracy vs pretraining FLOPs",
                        xlabel="pretraining FLOPs (log)", ylabel="accuracy %", logx=True)
        names.append(name)
    curves = {}
    top = max((p["flops"] for p in doc["points"]), default=0)
    for p in doc["points"]:
        if p["flops"] != top or p["pretrain_seed"] != 1:
            continue
        ckpt = store.resolve(p["checkpoint"])
        per_step = p["flops"] / max(p["steps"], 1)
        auc = plot.Thinned()  # read a line at a time, kept bounded: an arm's log is never held whole
        for m in read_lines(ckpt.path / "metrics.jsonl"):
            auc.add(m["step"] * per_step, m.get("disc_auc"))
        if pts := auc.points():
            curves[p["objective"]] = pts
    if curves:
        # one curve has no legend (core.plot): the title names its arm, and the seed every curve is of
        title = (f"discriminator AUC during pretraining{' of ' + next(iter(curves)) if len(curves) == 1 else ''} "
                 f"({top:.3g} FLOPs, pretraining seed 1)")
        plot.line_chart(out / "disc_auc.png", curves, title=title, xlabel="FLOPs", ylabel="AUC")
        names.append("disc_auc.png")
    return names


def split_text(split: dict, plan: dict | None = None) -> str:
    """How the held-out rows were carved by text (``make_splits``' counts), or nothing for a study.json without them."""
    if not split:
        return ""
    said = ("Rows of one text (the same after the corpus's text rules: NFC, width, invisible characters, spaces, "
            f"repeats it shortens) stay on one side: {split['repeated_rows']} of the train file's "
            f"{split['rows']} rows repeat an earlier row's text; {split['dev_rows_repeating_a_dev_text']} held-out rows "
            f"repeat another held-out row's text")
    if split.get("texts_too_frequent_for_dev"):
        said += f"; {split['texts_too_frequent_for_dev']} texts too frequent to fit were left to the training side"
    leaked = split.get("dev_texts_in_training_rows", 0)
    said += ("; no held-out text is among the readouts' training rows. " if not leaked else
             f"; **{leaked} held-out texts are among the readouts' training rows**. ")
    return said + training_rows_text(split, plan or {})


def dev_shortfall(plan: dict, split: dict) -> str:
    """Words for held-out rows fewer than --dev-rows asked: at most half the train file is held out (study 13)."""
    rows, asked = split.get("rows"), plan.get("dev_rows")
    if not split.get("training_rows") or rows is None or asked is None or asked <= rows // 2:
        return ""
    return f" (**of the {asked} asked with --dev-rows: at most half of the file's {rows} rows are held out**)"


def training_rows_text(split: dict, plan: dict) -> str:
    """How many rows each readout trained on, in bold where fewer than asked (the train file had no more left beside
    the held-out rows: every fine-tuning seed then trains on the same rows), or nothing for a study.json without the
    counts (before study version 13, where such a shortfall went unsaid)."""
    trains = split.get("training_rows")
    if not trains:
        return ""
    parts = []
    for readout, n in trains.items():
        asked = plan.get(f"{readout}_rows", n)
        parts.append(f"{code(readout)} {n}" if n >= asked else
                     f"**{code(readout)} {n}, of the {asked} asked (--{readout}-rows): all the rows left, the same for "
                     "every fine-tuning seed**")
    return "Each readout trains on rows of the rest, drawn per fine-tuning seed: " + ", ".join(parts) + ". "


def one_seed_note(plan: dict) -> str | None:
    """A sentence for a study of one pretraining seed: its intervals (:func:`stats.compare`) resample the
    fine-tuning seeds and the held-out rows only, so its verdicts, named as a study of several seeds names
    them, leave out the spread between pretraining runs."""
    if plan.get("pretrain_seeds") != 1:
        return None
    return ("**One pretraining seed:** the intervals cover the fine-tuning seeds and the held-out rows, not the "
            "spread between pretraining runs (initialisation, data order, masking), so a verdict here (a winner, "
            "an arm above or below the floor) may hold for this one run and not for its objective; "
            "--pretrain-seeds 2 or more measures that spread.")


# how held-out texts are looked for in the pretraining corpus (runner.dev_overlap): exact text, not near-duplicates
SAME_TEXT = ("texts compared as kolectra report compares an eval's, through the corpus's text rules (NFC, width, "
             "invisible characters, spaces), a whole line or document; near-duplicates are not looked for")


def write(store: Store, out: Path, doc: dict) -> list[str]:
    """Write ``report.md`` and the plots; returns the lines worth printing (the verdicts)."""
    plan, holdout = doc["plan"], doc["holdout"]
    held = ("Held-out rows were kept out of the pretraining text"
            + (f" ({holdout.get('held_out_documents')} corpus documents dropped)." if holdout.get("held_out_documents")
               is not None else ".")
            if holdout["held_out_from_pretraining"] else
            f"**{holdout['dev_rows_in_pretraining_corpus']} of the {holdout['dev_rows']} held-out rows are in the "
            f"pretraining corpus** (examples given ready-made; build them through the study with --corpus to hold "
            f"them out).")
    if holdout.get("dev_texts_under_other_ids"):
        stock = text(", ".join(repr(t) for t in holdout["dev_texts_under_other_ids_examples"][:3]))
        held += (f" {holdout['dev_texts_under_other_ids']} held-out texts also occur in the pretraining corpus "
                 f"under another id (stock reviews such as {stock}; {SAME_TEXT}).")
    elif "dev_texts_under_other_ids" in holdout:  # the check found none: said, or a reader cannot tell it was made
        held += f" No held-out text occurs in the pretraining corpus under another id ({SAME_TEXT})."
    lines = [f"# kolectra study: {text(', '.join(plan['arms']))} at equal pretraining FLOPs", "",
             f"Preset {code(plan['preset'])}; budgets {', '.join(f'{b:.3g}' for b in sorted({p['flops'] for p in doc['points']}))} "
             f"FLOPs; {plan['pretrain_seeds']} pretraining x {plan['finetune_seeds']} fine-tuning seeds per point; "
             f"scored on {holdout['dev_rows']} held-out NSMC rows carved from the train file (never the test set)"
             + dev_shortfall(plan, doc.get("split") or {}) + ". "
             + split_text(doc.get("split") or {}, plan) + held, "",
             "A winner is named only when the 95 % interval of the paired difference excludes zero (and, with two "
             "or more pretraining seeds, the seeds' own t-interval too: the bootstrap over so few seeds is too "
             "narrow) and both arms are above the untrained floor, both read by the same recipe; every recipe has "
             "its own floor.", ""]
    note = one_seed_note(plan)
    lines += [note, ""] if note else []
    for readout in doc["floor"]:
        lines += score_table(doc, readout)
    lines += verdicts_by_recipe(doc)
    lines += ["## Comparisons", ""] + comparison_table(doc)
    lines += [f"![{n}]({n})" for n in plots(store, out, doc)] + [""]
    (out / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [ln for ln in lines if (ln.startswith("| ") and "---" not in ln) or "recipes disagree" in ln
            or "Not every recipe" in ln or ln == note or ln.startswith(NONE_ABOVE)]
