"""``kolectra report REF``: an artifact's lineage, stats and metrics as Markdown with plots.

The report walks the lineage from the raw inputs down to REF and gives each artifact a section
its kind knows how to tell: the corpus filter funnel, the vocabulary's quality figures against
its baseline, the examples' packing, the pretraining curves and compute, the fine-tuning curve
and scores. Plots are PNG files beside ``report.md`` (drawn by :mod:`core.plot`, matplotlib).
Nothing here changes an artifact; the report is derived data.  Given several eval artifacts,
:func:`render_table` writes one table of their scores instead: models as rows, tasks as columns.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Callable

from kolectra.core import plot
from kolectra.pipeline.markdown import Md, code, fenced, text
from kolectra.pipeline.store.artifacts import Artifact, ArtifactError, Store
from kolectra.pipeline.store.catalog import article


def render(store: Store, ref: str | Path, dest: Path | None = None, published: bool = False) -> Path:
    """Write ``report.md`` (and its PNGs) for ``ref``; return the Markdown file's path. ``published``:
    a last section placing an eval's scores in one table with the published models' figures."""
    art = store.resolve(ref)
    dest = Path(dest) if dest else store.root / "reports" / f"{art.kind}-{art.path.name}"
    dest.mkdir(parents=True, exist_ok=True)
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
        f"| kolectra | {text(prov.get('kolectra', '?'))} (git {code(str(prov.get('git_commit'))[:12], True)}) |",
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
    verdicts = health_lines(ancestors(store, art))
    if verdicts:
        lines += ["", "## Health", "", *verdicts]
    for a in ancestors(store, art):
        section = SECTIONS.get(a.kind)
        if section:
            lines += ["", f"## {text(a.kind)}: {code(a.path.name)}", ""] + section(a, dest)
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
    """``art`` and everything it descends from, parents before children, each once."""
    order: list[Artifact] = []
    seen: set[str] = set()

    def visit(a: Artifact) -> None:
        if a.id in seen:
            return
        seen.add(a.id)
        for pid in a.parents:
            try:
                visit(store.resolve(pid))
            except ArtifactError:
                continue
        order.append(a)

    visit(art)
    return order


# ---- health -------------------------------------------------------------------------------------
def health_of(a: Artifact) -> dict | None:
    """The verdict a checkpoint (pretraining) or an eval (fine-tuning) recorded, None if it has none."""
    health = (a.manifest.get("stats") or {}).get("health")
    if health is None and a.kind == "eval":
        health = _read_json(a.path / "metrics.json").get("health")
    return health if isinstance(health, dict) and "status" in health else None


def verdict_text(health: dict) -> str:
    """``ok``, ``learned nothing``, ``unchecked: <why>``: a verdict as the report's readers see it."""
    from kolectra.model.health import status_text  # noqa: PLC0415 - torch-free

    return "learned nothing" if health["status"] == "not_learning" else status_text(health)


def health_lines(arts: list[Artifact]) -> list[str]:
    """One bullet per verdict in the lineage (pretraining's, then each fine-tuning's) with its problems,
    and the warnings an eval recorded (rows of the scored file also in the training file ...)."""
    out = []
    for a in arts:
        health = health_of(a)
        stage = {"checkpoint": "pretraining", "eval": "fine-tuning"}.get(a.kind)
        if health is None or stage is None:
            continue
        why = "; ".join(health.get("problems", []))
        out.append(f"- {stage} ({code(a.path.name)}): **{text(verdict_text(health))}**" + (f": {text(why)}" if why else ""))
        out += [f"  - WARNING: {text(w)}" for w in (a.manifest.get("stats") or {}).get("warnings", [])]
    return out


# ---- sections ----------------------------------------------------------------------------------
def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _table(header: list[str], rows: list[list]) -> list[str]:
    """A Markdown table; string cells (and headers) are escaped unless they are :class:`Md`."""
    def cell(v) -> str:
        if isinstance(v, bool):
            return str(v)
        if isinstance(v, float):
            return f"{v:,.4f}" if abs(v) < 100 else f"{v:,.1f}"
        if isinstance(v, int):
            return f"{v:,}"
        return v if isinstance(v, Md) else text(v)

    out = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + " --- |" * len(header)]
    out += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return out


def corpus_section(a: Artifact, dest: Path) -> list[str]:
    s = _read_json(a.path / "stats.json") or a.manifest.get("stats", {})
    if "records_in" not in s:
        return ["(no stats.json)"]
    dropped = {k: v for k, v in sorted(s.get("dropped", {}).items(), key=lambda kv: -kv[1]) if v}
    rows = [["records in", s["records_in"], "100.0%"]]
    remaining = s["records_in"]
    steps = [("rejected (malformed input)", s.get("rejected", 0))] + [(f"dropped: {k}", v) for k, v in dropped.items()]
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
    out += _table(["step", "records", "share"], rows)
    out += ["", f"![funnel]({png.name})", ""]
    splits = s.get("splits", {})
    if splits:
        out += _table(["split", "documents", "sentences", "morphs", "chars"],
                      [[k, v.get("documents", 0), v.get("sentences", 0), v.get("morphs", 0), v.get("chars", 0)]
                       for k, v in splits.items()])
    return out


def vocab_section(a: Artifact, dest: Path) -> list[str]:
    r = _read_json(a.path / "report.json")
    recipes = r.get("recipes", {})
    if not recipes:
        return ["(no report.json)"]
    keys = ["unk_rate", "tokens_per_eojeol", "chars_per_token", "morph_boundary_share", "words_kept_whole"]
    names = list(recipes)
    out = [f"Measured on the {code(r.get('split', 'valid'))} split ({text(r.get('eojeols', '?'))} eojeols); "
           f"chosen recipe: **{text(r.get('chosen', names[0]))}**.", ""]
    out += _table(["figure"] + names, [[k] + [recipes[n].get(k, "") for n in names] for k in keys])
    frag = recipes.get(r.get("chosen", names[0]), {}).get("most_fragmented", [])[:10]
    if frag:
        out += ["", "Most fragmented frequent words:", ""]
        out += _table(["word", "count", "pieces"], [[f["word"], f["count"], " ".join(f["pieces"])] for f in frag])
    return out


def examples_section(a: Artifact, dest: Path) -> list[str]:
    s = _read_json(a.path / "stats.json")
    return _table(["figure", "value"], [[k, v] for k, v in s.items() if isinstance(v, (int, float))])


def _series(rows: list[dict], key: str) -> list[tuple[float, float]]:
    return [(r["step"], r[key]) for r in rows if r.get(key) is not None]


def training_panels(rows: list[dict]) -> list[plot.Panel]:
    """The pretraining curves a person checks, each loss on its own axis (the total is
    generator + 50 x discriminator: on one axis the weighted total hides both terms)."""
    def panel(keys: dict[str, str], title: str, ylabel: str, **kw) -> plot.Panel | None:
        series = {label: _series(rows, k) for k, label in keys.items()}
        series = {label: pts for label, pts in series.items() if pts}
        return plot.Panel(series, title, "step", ylabel, **kw) if series else None

    panels = [
        panel({"loss": "total"}, "total loss (generator + disc_weight x discriminator)", "loss"),
        panel({"gen_loss": "generator (MLM at masked slots)"}, "generator loss", "loss"),
        panel({"disc_loss": "discriminator (per token)"}, "discriminator loss", "loss"),
        panel({"mlm_loss": "MLM"}, "MLM loss", "loss"),
        # a run that learned nothing shows here: AUC at 0.5, recall or precision at 0
        panel({"disc_auc": "AUC", "disc_precision": "precision (replaced)", "disc_recall": "recall (replaced)",
               "disc_acc": "accuracy", "replaced_token_share": "replaced share of tokens (precision at chance)"},
              "discriminator: replaced-token detection", "share",
              hlines={"chance AUC": 0.5}, ylim=(0, 1.02), legend="below"),
        panel({"gen_acc": "generator accuracy", "replaced_share": "replaced share of masked", "mlm_acc": "MLM accuracy"},
              "generator", "share", ylim=(0, 1.02), legend="below"),
        panel({"lr": "learning rate"}, "learning rate", "lr"),
        panel({"tokens_per_s": "tokens/s"}, "throughput", "tokens/s"),
    ]
    return [p for p in panels if p is not None]


def checkpoint_section(a: Artifact, dest: Path) -> list[str]:
    path = a.path / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()] \
        if path.is_file() else []
    out = []
    compute = a.manifest.get("compute", {})
    if compute:
        out += _table(["compute", "value"], [[k, v] for k, v in compute.items() if isinstance(v, (int, float, str))])
        out.append("")
    if rows:
        png = dest / f"{a.path.name}-training.png"
        panels = training_panels(rows)
        plot.chart(png, panels, width=960, panel_height=300, columns=2)
        out += [f"![training curves]({png.name})", ""]
        last = rows[-1]
        out += _table(["last logged step", "value"], [[k, v] for k, v in last.items() if isinstance(v, (int, float))])
    return out


def eval_section(a: Artifact, dest: Path) -> list[str]:
    m = _read_json(a.path / "metrics.json")
    headline = [[k, m[k]] for k in ("accuracy", "macro_f1", "spearman", "pearson", "exact_match", "f1", "precision",
                                    "recall", "dev_accuracy", "best_epoch") if k in m]
    out = [f"Task: **{text(m.get('task', a.manifest.get('config', {}).get('task', '?')))}**", ""]
    if by_article(m):  # one file split by article (kolectra finetune korquad --split-dev-by-article)
        out += [f"Scored on a **{BY_ARTICLE}**: {text(m['eval_set'])}.", ""]
    out += _table(["metric", "value"], headline)
    curve = a.path / "learning_curve.png"  # drawn by the fine-tuning stage: loss and dev metric, test score
    if curve.is_file():
        png = dest / f"{a.path.name}-curve.png"
        shutil.copyfile(curve, png)
        out += ["", f"![learning curve]({png.name})"]
    return out


def study_section(a: Artifact, dest: Path) -> list[str]:
    doc = _read_json(a.path / "study.json")
    out = [f"Equal-FLOPs study; its own report with plots: {code(a.path / 'report.md')}.", ""]
    out += _table(["readout", "FLOPs", "a", "b", "a - b (points)", "95 % CI", "verdict"],
                  [[c["readout"], f"{c['flops']:.3g}", c["a"], c["b"], f"{100 * c['diff']:+.2f}",
                    f"[{100 * c['ci95'][0]:+.2f}, {100 * c['ci95'][1]:+.2f}]", c.get("verdict", "vs floor")]
                   for c in doc.get("comparisons", [])])
    return out


# ---- several eval artifacts: one table across tasks -------------------------------------------------
METRIC_LABELS = {"accuracy": "acc", "exact_match": "EM", "f1": "F1", "macro_f1": "macro-F1", "spearman": "Spearman",
                 "pearson": "Pearson", "precision": "P", "recall": "R"}


def render_table(store: Store, refs: list[str], dest: Path | None = None,
                 published: bool = False) -> tuple[Path, str]:
    """``kolectra report REF REF ...``: the eval artifacts' headline scores in one Markdown table,
    a row per model (the checkpoint, or the HF directory fine-tuned) and a column per task (the
    artifact's name: ``--name kornli``), as KoELECTRA's README shows its results.  Writes
    ``report.md`` (the table and where each cell comes from); returns its path and the table.
    ``published``: the published models' figures as rows of the same table, with a split column."""
    arts = evals(store, refs)
    table, sources = score_table(store, arts, published)
    ids = hashlib.sha256(" ".join(sorted(a.id for a in arts)).encode()).hexdigest()[:12]
    dest = Path(dest) if dest else store.root / "reports" / f"table-{ids}"
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / "report.md"
    out.write_text("\n".join([f"# kolectra report: {len(arts)} evaluations", "", *table, "", TABLE_NOTE, "",
                              "Sources:", "", *sources]) + "\n", encoding="utf-8")
    return out, "\n".join(table)


TABLE_NOTE = ("Scores in percent; a `--seeds` summary shows the median over its seeds. "
              "Beside each score: the rows (questions, for KorQuAD) it was measured on, as "
              "`N of M` when `max_eval_examples` kept only the first N of the file's M (such a "
              "score is not comparable with a full-test figure), and `learned nothing` when the "
              "run's health check failed (docs/finetune.md), `N% of test rows in training` when "
              "that share of the scored rows is also in the training file; beside a model, its "
              "pretraining verdict when it did not pass. Published models' figures to place "
              "these against: docs/published.md (`kolectra report --published`).")


def score_table(store: Store, arts: list[Artifact], published: bool = False) -> tuple[list[str], list[str]]:
    """The score table of ``arts`` (models as rows, tasks as columns) and its sources' lines; with
    ``published``, the published models' rows below in the same units and a split column saying
    what each row's figures were measured on (docs/published.md's rows, :mod:`pipeline.published`)."""
    cells: dict[tuple[str, str], tuple[str, Artifact]] = {}
    headers: dict[str, str] = {}
    tasks: dict[str, str] = {}  # column -> task
    splits: dict[str, list[str]] = {}  # model identity -> what each of its scores was measured on
    model_names: dict[str, str] = {}  # model identity -> its name
    for a in arts:
        m = _read_json(a.path / "metrics.json")
        task = m.get("task") or a.manifest.get("config", {}).get("task", "?")
        names, scale = _headline(task)
        column, (model, name) = _column(a, task), model_of(store, a)
        if (model, column) in cells:
            raise ArtifactError(f"report: {a.path} and {cells[model, column][1].path} both score {name} on "
                                f"{column}; give one of them (or tell them apart with --name)")
        headers.setdefault(column, f"{column} ({' / '.join(METRIC_LABELS.get(n, n) for n in names)})")
        tasks.setdefault(column, task)
        cells[model, column] = (_cell(m, names, scale) + _cell_note(store, a, m), a)
        splits.setdefault(model, []).append(f"{column}: {split_of(m) or '?'}")
        model_names.setdefault(model, name + _pretraining_note(store, a))
    label = row_labels(model_names)
    rows = [[label[model], *(cells.get((model, c), ("-",))[0] for c in headers)] for model in model_names]
    sources = [f"- {text(column)}, {text(label[model])}: {code(a.path)}" for (model, column), (_, a) in cells.items()]
    if not published:
        return _table(["model", *headers.values()], rows), sources
    from kolectra.pipeline.published import rows_for  # noqa: PLC0415 - only with --published

    rows = [[*row, "; ".join(splits[model])] for row, model in zip(rows, model_names)]
    theirs = rows_for([tasks[c] for c in headers])
    rows += [[f"{r.model} (published)", *figures, r.splits] for r, figures in theirs]
    sources += [f"- {text(r.model)} (published): {text(r.source)}" for r, _ in theirs]
    return _table(["model", *headers.values(), "split"], rows), sources


BY_ARTICLE = "by-article split, not the official dev set"


def by_article(m: dict) -> bool:
    """Whether a KorQuAD score is on a by-article split of one file (finetune/korquad.py eval_set_label)."""
    return str(m.get("eval_set", "")).startswith("by-article split")


def split_of(m: dict) -> str:
    """What a kolectra score was measured on, in the published table's terms: its rows, and the file."""
    size = test_size(m)
    if by_article(m):
        return f"{size}, {BY_ARTICLE}"
    facts = (m.get("dev_file") if isinstance(m.get("questions"), int) else m.get("test_file")) or {}
    path = facts.get("path") if isinstance(facts, dict) else None
    return size + (f" of {Path(path).name}" if size and isinstance(path, str) else "")


def evals(store: Store, refs: list[str]) -> list[Artifact]:
    """The eval artifacts ``refs`` name; another kind, or one artifact named twice, is refused by name."""
    arts: list[Artifact] = []
    for ref in refs:
        try:
            art = store.require(ref, "eval")
        except ArtifactError:
            other = _any_kind(store, ref)  # a corpus or checkpoint named here: say so, not "no eval artifact"
            if other is None or other.kind == "eval":
                raise
            raise ArtifactError(f"report: {other.path} is {article(other.kind)} artifact; a table of several "
                                "takes eval artifacts only (kolectra report REF reports one of any kind)") from None
        same = next((a for a in arts if a.id == art.id), None)
        if same is not None:
            raise ArtifactError(f"report: {art.path} is named twice ({refs[arts.index(same)]!r} and {ref!r})")
        arts.append(art)
    return arts


def _any_kind(store: Store, ref: str) -> Artifact | None:
    try:
        return store.resolve(ref)
    except ArtifactError:
        return None


def _headline(task: str) -> tuple[tuple[str, ...], dict[str, float]]:
    """The metrics a task shows in the table and the factor that puts each in percent."""
    from kolectra.finetune.tasks import TASKS  # noqa: PLC0415 - torch-free table of tasks

    entry = TASKS.get(task)
    if entry is None:  # e.g. a linear probe: an accuracy as a fraction
        return ("accuracy",), {"accuracy": 100.0}
    return entry.headline or entry.metrics[:1], {n: 100.0 for n in entry.fractions}


def _cell(m: dict, names: tuple[str, ...], scale: dict[str, float]) -> str:
    values = " / ".join(f"{m[n] * scale.get(n, 1.0):.2f}" if isinstance(m.get(n), (int, float)) else "?"
                        for n in names)
    if "seeds" in m:  # a --seeds summary: medians, and how far the seeds spread
        spread = m.get(f"{names[0]}_spread")
        values += f" (median of {len(m['seeds'])} seeds" + (
            f", spread {spread * scale.get(names[0], 1.0):.2f})" if isinstance(spread, (int, float)) else ")")
    return values


def test_size(m: dict) -> str:
    """What a score was measured on: ``500 test rows``, ``5,000 of 50,000 test rows`` when
    ``max_eval_examples`` cut the file, ``12 dev questions`` for KorQuAD; "" when not recorded."""
    if isinstance(m.get("questions"), int):  # KorQuAD: the dev file is the scored one
        scored, whole, unit = m["questions"], (m.get("dev_file") or {}).get("questions"), "dev questions"
    elif isinstance(m.get("test_examples"), int):
        scored, whole, unit = m["test_examples"], (m.get("test_file") or {}).get("rows"), "test rows"
    elif isinstance(m.get("eval_examples"), int):  # a linear probe
        scored, whole, unit = m["eval_examples"], None, "test rows"
    else:
        return ""
    if isinstance(whole, int) and whole > scored:
        return f"{scored:,} of {whole:,} {unit}"
    return f"{scored:,} {unit}"


def _cell_note(store: Store, a: Artifact, m: dict) -> str:
    """`` (N of M test rows; learned nothing)``: the test size and the health flag beside a score;
    a ``--seeds`` summary takes both from its runs."""
    runs = [m]
    if "seeds" in m:
        runs = [_read_json(p.path / "metrics.json") for p in (store.parent(a, pid) for pid in a.parents) if p]
    sizes = {test_size(r) for r in runs} - {""}
    failed = sum(1 for r in runs if (r.get("health") or {}).get("status") == "not_learning")
    notes = [" / ".join(sorted(sizes))] if sizes else []
    if any(by_article(r) for r in runs):
        notes.append(BY_ARTICLE)
    if failed:
        notes.append("learned nothing" if len(runs) == 1 else f"learned nothing in {failed} of {len(runs)} seeds")
    notes += sorted({f"{share} of test rows in training" for w in (a.manifest.get("stats") or {}).get("warnings", [])
                     for share in OVERLAP.findall(w)})
    return f" ({'; '.join(notes)})" if notes else ""


# finetune/skeleton.py warn_overlap's words: "N of M scored rows (P%) of FILE also appear in the training file"
OVERLAP = re.compile(r"\d+ of \d+ scored rows \(([\d.]+%)\) of .* also appear in the training file")


def _pretraining_note(store: Store, a: Artifact) -> str:
    """`` (pretraining: learned nothing)`` beside a model whose checkpoint's own verdict did not pass."""
    parent = _checkpoint_of(store, a)
    health = health_of(parent) if parent is not None else None
    return "" if health is None or health["status"] == "ok" else f" (pretraining: {verdict_text(health)})"


def _checkpoint_of(store: Store, a: Artifact) -> Artifact | None:
    for pid in a.parents:
        parent = store.parent(a, pid)
        if parent is not None and parent.kind == "checkpoint":
            return parent
        if parent is not None and parent.kind == "eval":  # a --seeds summary: its runs' model
            return _checkpoint_of(store, parent)
    return None


def _column(a: Artifact, task: str) -> str:
    """The artifact's name (``--name kornli``), without the ``-seeds`` a summary adds."""
    name = a.name[:-len("-seeds")] if a.name.endswith("-seeds") else a.name
    return name or task


def model_of(store: Store, a: Artifact) -> tuple[str, str]:
    """What an eval fine-tuned, as (identity, label): its checkpoint parent (its id, ``checkpoint/NAME-ID``),
    or the HF directory it records as its first input (its content hash, the folder's name)."""
    for pid in a.parents:
        parent = store.parent(a, pid)
        if parent is not None and parent.kind == "checkpoint":
            return parent.id, f"checkpoint/{parent.path.name}"
        if parent is not None and parent.kind == "eval":  # a --seeds summary: its runs' model
            return model_of(store, parent)
    inputs = a.manifest.get("inputs", [])
    if inputs and inputs[0].get("dir"):
        return f"dir:{inputs[0].get('sha256')}", Path(inputs[0]["path"]).name
    return "?", "?"


def row_labels(labels: dict[str, str]) -> dict[str, str]:
    """identity -> the row's label; two models whose folders share a name (``.../hf/discriminator``
    of two checkpoints) get their content hash added, not one row between them."""
    shared = {lab for lab in labels.values() if list(labels.values()).count(lab) > 1}
    return {m: f"{lab} ({m.removeprefix('dir:')[:8]})" if lab in shared else lab for m, lab in labels.items()}


SECTIONS: dict[str, Callable[[Artifact, Path], list[str]]] = {
    "corpus": corpus_section,
    "vocab": vocab_section,
    "examples": examples_section,
    "checkpoint": checkpoint_section,
    "eval": eval_section,
    "study": study_section,
}
