"""``kolectra report REF``: an artifact's lineage, stats and metrics as Markdown with plots.

The report walks the lineage from the raw inputs down to REF and gives each artifact a section
its kind knows how to tell: the corpus filter funnel, the vocabulary's quality figures against
its baseline, the examples' packing, the pretraining curves and compute, the fine-tuning curve
and scores. Plots are PNG files beside ``report.md`` (drawn by :mod:`core.plot`, matplotlib).
Nothing here changes an artifact; the report is derived data.  Given several eval artifacts,
:func:`pipeline.scores.render_table` writes one table of their scores instead: models as rows,
tasks as columns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Iterator

from kolectra.core import folder_uploads, plot, scratch
from kolectra.core.config import flat_dict
from kolectra.core.jsonl import read_lines
from kolectra.finetune.files import scored_file_losses  # torch-free
from kolectra.pipeline import overlap
from kolectra.pipeline.markdown import Md, code, fenced, table, text
from kolectra.pipeline.scores import (
    BY_ARTICLE,
    by_article,
    default_place_hint,
    older_eval_notes,
    report_place,
    score_table,
    test_size,
)
from kolectra.pipeline.store.artifacts import Artifact, Store
from kolectra.pipeline.store.manifest import commit_label
from kolectra.pipeline.study.report import one_seed_note
from kolectra.pipeline.study.stats import floor_verdict
from kolectra.pipeline.verdicts import health_lines, read_json
from kolectra.vocab.table import count_text


def render(store: Store, ref: str | Path, dest: str | Path | None = None, published: bool = False) -> Path | str:
    """Write ``report.md`` (and its PNGs) for ``ref``; return the Markdown file's path (a store URL for a
    report in a store). ``published``: a last section placing an eval's scores in one table with the
    published models' figures. ``dest``: :func:`pipeline.scores.report_place`. A report going to a store
    (``dest`` there, or ROOT/reports/... of a store root) is drawn in a local folder (matplotlib writes
    files) and uploaded; the artifacts' files are read where they are."""
    art = store.resolve(ref)
    where = report_place(store, dest, f"{art.kind}-{art.path.name}", [art])
    if isinstance(where, Path):
        with default_place_hint(dest, where):
            where.mkdir(parents=True, exist_ok=True)
            return _render(store, art, where, published)
    with scratch.temporary_directory("report") as tmp:  # swept if the process is killed
        _render(store, art, Path(tmp), published)
        with default_place_hint(dest, where):
            folder_uploads.upload_folder(tmp, where, last="report.md")
    return f"{where}/report.md"


def _render(store: Store, art: Artifact, dest: Path, published: bool) -> Path:
    m = art.manifest
    prov = m.get("provenance", {})
    lines = [
        f"# kolectra report: {text(art.kind)} {code(art.path.name)}",
        "",
        "| | |",
        "| --- | --- |",
        f"| artifact | {code(art.path, True)} |",
        f"| built | {text(prov.get('started', '?'))} → {text(prov.get('finished', '?'))} on "
        f"{code(prov.get('host', '?'), True)} |",
        f"| kolectra | {text(prov.get('kolectra', '?'))} ({text(commit_label(prov))}) |",
        f"| digest | {code(m['digest'][:16], True)} over {len(m['files'])} files "
        f"({sum(f['bytes'] for f in m['files']):,} bytes) |",
        "",
        "## Lineage",
        "",
        *fenced(store.lineage_lines(art)),
    ]
    problems = store.verify(art)
    if problems:
        lines += ["", "**Verification failed:**", ""] + [f"- {text(p)}" for p in problems]
    family = ancestors(store, art)
    verdicts = health_lines(family)
    if verdicts:
        lines += ["", "## Health", "", *verdicts]
    if art.kind == "eval":  # a score on texts the model pretrained on may be memorisation (pipeline/overlap.py)
        lines += ["", "## Eval texts in the pretraining corpus", "", *overlap.lines(store, art)]
    older = dict(older_eval_notes(family))  # as a score table names them (scores.render_table)
    for a in family:
        section = SECTIONS.get(a.kind)
        if section:
            note = [f"{code(f'eval/{a.path.name}')}{text(older[a.path.name])}.", ""] if a.path.name in older else []
            lines += ["", f"## {text(a.kind)}: {code(a.path.name)}", "", *note] + section(a, dest)
    if published:
        lines += ["", "## Against published models", ""] + published_section(store, art)
    out = dest / "report.md"
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def published_section(store: Store, art: Artifact) -> list[str]:
    """An eval's scores as a row of the published models' table (percent, each row's split); for
    another kind, the published table alone (docs/published.md)."""
    if art.kind != "eval":
        from kolectra.pipeline.published import table  # noqa: PLC0415 - only with --published

        return [*table(), "", "Published figures as their authors report them (docs/published.md)."]
    rows, sources = score_table(store, [art], published=True)
    return [*rows, "", "Scores in percent. A score on fewer rows, another split or a smaller model is not comparable "
                       "with a published figure (docs/published.md).", "", "Sources:", "", *sources]


def ancestors(store: Store, art: Artifact) -> list[Artifact]:
    """``art`` and everything it descends from, parents before children, each once: the store's walk
    (:meth:`Store.ancestors`: parents in ``art``'s own root first, then --out's, where recorded, or in
    ``$KOLECTRA_PARENT_ROOTS``; a REF in another root than --out's had no parents' sections) in that order.
    A parent not found has no section."""
    found = {a.id: a for a in store.ancestors(art)[0]}
    order: list[Artifact] = []
    seen: set[str] = set()

    def visit(a: Artifact) -> None:
        if a.id in seen:
            return
        seen.add(a.id)
        for pid in a.parents:
            if pid in found:
                visit(found[pid])
        order.append(a)

    visit(art)
    return order


# ---- sections ----------------------------------------------------------------------------------
def corpus_section(a: Artifact, dest: Path) -> list[str]:
    s = read_json(a.path / "stats.json") or a.manifest.get("stats", {})
    if "records_in" not in s:
        return ["(no stats.json)"]
    dropped = {k: v for k, v in sorted(s.get("dropped", {}).items(), key=lambda kv: -kv[1]) if v}
    rows = [["records in", s["records_in"], "100.0%"]]
    remaining = s["records_in"]
    # each reject reason as each drop reason (a rejects row of one total hid which; analysis_failed is no
    # malformed input); a stats.json without the reasons, or none rejected, keeps one row
    rejected = {k: v for k, v in sorted(s.get("rejected_reasons", {}).items(), key=lambda kv: -kv[1]) if v}
    steps = ([(f"rejected: {k}", v) for k, v in rejected.items()]
             if rejected and sum(rejected.values()) == s.get("rejected", 0) else [("rejected", s.get("rejected", 0))])
    steps += [(f"dropped: {k}", v) for k, v in dropped.items()]
    for label, n in steps:
        remaining -= n
        rows.append([label, -n, f"{n / max(s['records_in'], 1):.2%}"])
    rows.append([Md("**records out**"), s["records_out"], f"{s['records_out'] / max(s['records_in'], 1):.2%}"])
    png = dest / f"{a.path.name}-funnel.png"
    bars = [("records in", s["records_in"])] + [(label, n) for label, n in steps if n] + [("kept", s["records_out"])]
    colors = [plot.PALETTE[7]] + [plot.PALETTE[3]] * (len(bars) - 2) + [plot.PALETTE[2]]
    plot.bar_chart(png, bars, colors=colors, share_of=max(s["records_in"], 1), xlabel="records",
                   title=f"corpus: {s['records_in']:,} records in, {s['records_out']:,} kept "
                         f"({s['records_out'] / max(s['records_in'], 1):.1%})")
    out = ["Filter funnel (`records_in = records_out + rejected + sum(dropped)`):", ""]
    out += table(["step", "records", "share"], rows)
    out += ["", f"![funnel]({png.name})", ""]
    splits = s.get("splits", {})
    if splits:
        out += table(["split", "documents", "sentences", "morphs", "chars"],
                      [[k, v.get("documents", 0), v.get("sentences", 0), v.get("morphs", 0), v.get("chars", 0)]
                       for k, v in splits.items()])
    return out


def vocab_section(a: Artifact, dest: Path) -> list[str]:
    r = read_json(a.path / "report.json")
    recipes = r.get("recipes", {})
    if not recipes:
        return ["(no report.json)"]
    keys = ["unk_rate", "tokens_per_eojeol", "chars_per_token", "morph_boundary_share", "words_kept_whole"]
    names = list(recipes)
    out = [f"Measured on the {code(r.get('split', 'valid'))} split ({text(count_text(r.get('eojeols', '?')))} eojeols); "
           f"chosen recipe: **{text(r.get('chosen', names[0]))}**.", ""]
    out += table(["figure"] + names, [[k] + [recipes[n].get(k, "") for n in names] for k in keys])
    frag = recipes.get(r.get("chosen", names[0]), {}).get("most_fragmented", [])[:10]
    if frag:
        out += ["", "Most fragmented frequent words:", ""]
        out += table(["word", "count", "pieces"], [[f["word"], f["count"], " ".join(f["pieces"])] for f in frag])
    return out


def examples_section(a: Artifact, dest: Path) -> list[str]:
    s = read_json(a.path / "stats.json")
    return table(["figure", "value"], [[k, v] for k, v in s.items() if isinstance(v, (int, float))])


# the pretraining curves a person checks: (metric -> legend label, title, y label, Panel options), each
# loss on its own axis (the total is generator + 50 x discriminator: on one axis the weighted total
# hides both terms)
CURVES = [
    ({"loss": "total"}, "total loss (generator + disc_weight x discriminator)", "loss", {}),
    ({"gen_loss": "generator (MLM at masked slots)"}, "generator loss", "loss", {}),
    ({"disc_loss": "discriminator (per token)"}, "discriminator loss", "loss", {}),
    ({"mlm_loss": "MLM"}, "MLM loss", "loss", {}),
    # a run that learned nothing shows here: AUC at 0.5, recall or precision at 0
    ({"disc_auc": "AUC", "disc_precision": "precision (replaced)", "disc_recall": "recall (replaced)",
      "disc_acc": "accuracy", "replaced_token_share": "replaced share of tokens (precision at chance)"},
     "discriminator: replaced-token detection", "share",
     {"hlines": {"chance AUC": 0.5}, "ylim": (0, 1.02), "legend": "below"}),
    ({"gen_acc": "generator accuracy", "replaced_share": "replaced share of masked", "mlm_acc": "MLM accuracy"},
     "generator", "share", {"ylim": (0, 1.02), "legend": "below"}),
    ({"lr": "learning rate"}, "learning rate", "lr", {}),
    ({"tokens_per_s": "tokens/s"}, "throughput", "tokens/s", {}),
]


def training_panels(rows: Iterable[dict]) -> list[plot.Panel]:
    """The panels of :data:`CURVES` that have data, ``rows`` (metrics lines) read once. Each series is
    thinned as it comes (:class:`core.plot.Thinned`): a run of any length is drawn from at most a few
    thousand points a series, its spikes kept; one of up to :data:`core.plot.COLUMNS` lines from all."""
    series = {k: plot.Thinned() for keys, *_ in CURVES for k in keys}
    for r in rows:
        step = r.get("step")
        for k, thinned in series.items():
            if (v := r.get(k)) is not None:
                thinned.add(step, v)
    # mlm (BERT) has no generator: its lines log gen_loss 0 for the term it lacks, drawn as a flat "generator loss"
    # at 0, and its MLM accuracy alone stood under the title "generator" (one series: no legend names it)
    generator = bool(series["gen_acc"].points() or series["replaced_share"].points())
    panels = []
    for keys, title, ylabel, kw in CURVES:
        drawn = {label: pts for k, label in keys.items() if (pts := series[k].points())}
        if not drawn or (not generator and set(keys) == {"gen_loss"}):
            continue
        if not generator and "gen_acc" in keys:
            title = "masked LM"
        elif not generator and "loss" in keys:  # the total is the MLM's loss alone
            title = "total loss"
        panels.append(plot.Panel(drawn, title, "step", ylabel, **kw))
    return panels


def checkpoint_section(a: Artifact, dest: Path) -> list[str]:
    path = a.path / "metrics.jsonl"
    last: list[dict] = []

    def keeping_the_last(rows: Iterator[dict]) -> Iterator[dict]:
        for r in rows:
            last[:] = [r]
            yield r

    panels = training_panels(keeping_the_last(read_lines(path))) if path.is_file() else []
    out = recipe_table(a)
    compute = a.manifest.get("compute", {})
    if compute:
        # compute.step is how the step ran (eager or compiled), not a step number beside "last logged step"
        out += table(["compute", "value"], [["step (eager or compiled)" if k == "step" else k, v]
                                            for k, v in compute.items() if isinstance(v, (int, float, str))])
        out.append("")
    if last:
        png = dest / f"{a.path.name}-training.png"
        plot.chart(png, panels, width=960, panel_height=300, columns=2)
        out += [f"![training curves]({png.name})", ""]
        out += table(["last logged step", "value"], [[k, v] for k, v in last[0].items() if isinstance(v, (int, float))])
    return out


# what two checkpoints compared differ in, from the resolved config (the manifest's): the report showed the compute
# and the last logged line alone before 2026-12-02, so a 150-step run of seed 2 read as the demo's 600 steps of 42
RECIPE = (("preset", "preset"), ("objective", "objective.objective"), ("steps", "train.steps"),
          ("batch size", "train.batch_size"), ("lr", "train.lr"), ("warm-up steps", "train.warmup_steps"),
          ("seed", "seed"), ("dropout", "model.dropout"), ("embedding sharing", "model.embedding_sharing"))


def recipe_table(a: Artifact) -> list[str]:
    """A checkpoint's pretraining recipe, the keys a comparison of two turns on, and the tokens it saw."""
    config, stats = flat_dict(a.manifest.get("config") or {}), a.manifest.get("stats") or {}
    rows = [[label, f"{v:g}" if isinstance(v, float) else v]  # lr 1e-05 is not 0.0000
            for label, key in RECIPE if (v := config.get(key)) is not None]
    rows += [[label, stats[key]] for label, key in (("sequence length", "max_seq_length"),
                                                    ("tokens seen (non-padding)", "nonpad_tokens_seen"))
             if isinstance(stats.get(key), (int, float))]
    return [*table(["recipe", "value"], rows), ""] if rows else []


def eval_section(a: Artifact, dest: Path) -> list[str]:
    m = read_json(a.path / "metrics.json")
    headline = [[k, m[k]] for k in ("accuracy", "macro_f1", "spearman", "pearson", "exact_match", "f1", "precision",
                                    "recall", "dev_accuracy", "best_epoch") if k in m]
    out = [f"Task: **{text(m.get('task', a.manifest.get('config', {}).get('task', '?')))}**", ""]
    if by_article(m):  # one file split by article (kolectra finetune korquad --split-dev-by-article)
        out += [f"Scored on a **{BY_ARTICLE}**: {text(m['eval_set'])}.", ""]
    lost = scored_file_losses(m)  # a test file short of bad rows: no score on the whole file either
    if test_size(m):  # 128 of 50,000 test rows (max_eval_examples) is no score on the file
        out += [f"Scored on {text(test_size(m))}" + (f" (**{text(lost)}**)." if lost else "."), ""]
    elif lost:
        out += [f"**{text(lost)}**.", ""]
    if "seeds" in m:  # a --seeds summary: each figure is a median, its runs are its parents
        out += [f"Each figure is the median over {len(m['seeds'])} seeds ({text(', '.join(map(str, m['seeds'])))}; "
                "`*_spread`: max - min); each seed's run is its own eval artifact.", ""]
        headline += [[k, m[k]] for k in sorted(m) if k.endswith("_spread") and isinstance(m[k], (int, float))]
    out += table(["metric", "value"], headline)
    curve = a.path / "learning_curve.png"  # drawn by the fine-tuning stage: loss and dev metric, test score
    if curve.is_file():
        png = dest / f"{a.path.name}-curve.png"
        png.write_bytes(curve.read_bytes())  # the artifact may be in a store (a.path an s3:// or gs:// path)
        out += ["", f"![learning curve]({png.name})"]
    return out


def study_section(a: Artifact, dest: Path) -> list[str]:
    doc = read_json(a.path / "study.json")
    out = [f"Equal-FLOPs study; its own report with plots: {code(a.path / 'report.md')}.", ""]
    note = one_seed_note(doc.get("plan") or {})  # the intervals leave out the pretraining runs' spread
    out += [note, ""] if note else []
    if (doc.get("holdout") or {}).get("dev_rows"):  # else read as NSMC test figures, which they are not
        out += [f"Accuracies on the study's {doc['holdout']['dev_rows']} held-out rows, carved from the NSMC train "
                "file (not NSMC's test set).", ""]
    out += table(["readout", "FLOPs", "a", "b", "a - b (points)", "95 % CI", "verdict"],
                  [[c["readout"], f"{c['flops']:.3g}", c["a"], c["b"], f"{100 * c['diff']:+.2f}",
                    f"[{100 * c['ci95'][0]:+.2f}, {100 * c['ci95'][1]:+.2f}]"
                    + (f"; seeds t [{100 * c['seed_t95'][0]:+.2f}, {100 * c['seed_t95'][1]:+.2f}]"
                       if c.get("seed_t95") else ""), _study_verdict(c)]
                   for c in doc.get("comparisons", [])])
    return out


def _study_verdict(c: dict) -> str:
    """A comparison's verdict; an arm's against the floor in words where its study.json (before study version 13)
    recorded none: the column said "vs floor" beside the interval."""
    if c.get("verdict"):
        return c["verdict"]
    return floor_verdict(c["a"], c) if c.get("b") == "floor" else "vs floor"


# ---- several eval artifacts: one table across tasks -------------------------------------------------
SECTIONS: dict[str, Callable[[Artifact, Path], list[str]]] = {
    "corpus": corpus_section,
    "vocab": vocab_section,
    "examples": examples_section,
    "checkpoint": checkpoint_section,
    "eval": eval_section,
    "study": study_section,
}
