"""``kolectra report REF``: an artifact's lineage, stats and metrics as Markdown with plots.

The report walks the lineage from the raw inputs down to REF and gives each artifact a section
its kind knows how to tell: the corpus filter funnel, the vocabulary's quality figures against
its baseline, the examples' packing, the pretraining curves and compute, the fine-tuning curve
and scores. Plots are PNG files beside ``report.md`` (drawn by :mod:`core.plot`, no
plotting library needed). Nothing here changes an artifact; the report is derived data.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from kolectra.core import plot
from kolectra.pipeline.artifacts import Artifact, ArtifactError, Store


def render(store: Store, ref: str | Path, dest: Path | None = None) -> Path:
    """Write ``report.md`` (and its PNGs) for ``ref``; return the Markdown file's path."""
    art = store.resolve(ref)
    dest = Path(dest) if dest else store.root / "reports" / f"{art.kind}-{art.path.name}"
    dest.mkdir(parents=True, exist_ok=True)
    m = art.manifest
    prov = m.get("provenance", {})
    lines = [
        f"# kolectra report: {art.kind} `{art.path.name}`",
        "",
        "| | |",
        "| --- | --- |",
        f"| artifact | `{art.path}` |",
        f"| built | {prov.get('started', '?')} → {prov.get('finished', '?')} on `{prov.get('host', '?')}` |",
        f"| kolectra | {prov.get('kolectra', '?')} (git `{str(prov.get('git_commit'))[:12]}`) |",
        f"| digest | `{m['digest'][:16]}` over {len(m['files'])} files "
        f"({sum(f['bytes'] for f in m['files']):,} bytes) |",
        "",
        "## Lineage",
        "",
        "```",
        *store.lineage_lines(art),
        "```",
    ]
    problems = store.verify(art)
    if problems:
        lines += ["", "**Verification failed:**", ""] + [f"- {p}" for p in problems]
    for a in ancestors(store, art):
        section = SECTIONS.get(a.kind)
        if section:
            lines += ["", f"## {a.kind}: `{a.path.name}`", ""] + section(a, dest)
    out = dest / "report.md"
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


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


# ---- sections ----------------------------------------------------------------------------------
def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _table(header: list[str], rows: list[list]) -> list[str]:
    def cell(v) -> str:
        if isinstance(v, float):
            return f"{v:,.4f}" if abs(v) < 100 else f"{v:,.1f}"
        if isinstance(v, int):
            return f"{v:,}"
        return str(v)

    out = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
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
    rows.append(["**records out**", s["records_out"], f"{s['records_out'] / max(s['records_in'], 1):.2%}"])
    png = dest / f"{a.path.name}-funnel.png"
    plot.bar_chart(png, [(label, n) for label, n in steps if n] + [("kept", s["records_out"])],
                   title="corpus: where the records went", xlabel="records")
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
    out = [f"Measured on the `{r.get('split', 'valid')}` split ({r.get('eojeols', '?')} eojeols); "
           f"chosen recipe: **{r.get('chosen', names[0])}**.", ""]
    out += _table(["figure"] + names, [[k] + [recipes[n].get(k, "") for n in names] for k in keys])
    frag = recipes.get(r.get("chosen", names[0]), {}).get("most_fragmented", [])[:10]
    if frag:
        out += ["", "Most fragmented frequent words:", ""]
        out += _table(["word", "count", "pieces"], [[f["word"], f["count"], " ".join(f["pieces"])] for f in frag])
    return out


def examples_section(a: Artifact, dest: Path) -> list[str]:
    s = _read_json(a.path / "stats.json")
    return _table(["figure", "value"], [[k, v] for k, v in s.items() if isinstance(v, (int, float))])


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
        losses = {k: [(r["step"], r[k]) for r in rows if k in r] for k in ("loss", "gen_loss", "disc_loss")}
        png = dest / f"{a.path.name}-loss.png"
        plot.line_chart(png, {k: v for k, v in losses.items() if v}, title="pretraining loss",
                        xlabel="step", ylabel="loss")
        out += [f"![training loss]({png.name})", ""]
        accs = {k: [(r["step"], r[k]) for r in rows if k in r] for k in ("gen_acc", "disc_acc", "replaced_share")}
        accs = {k: v for k, v in accs.items() if v}
        if accs:
            png = dest / f"{a.path.name}-accuracy.png"
            plot.line_chart(png, accs, title="generator / discriminator", xlabel="step", ylabel="share")
            out += [f"![accuracies]({png.name})", ""]
        last = rows[-1]
        out += _table(["last logged step", "value"], [[k, v] for k, v in last.items() if isinstance(v, (int, float))])
    return out


def eval_section(a: Artifact, dest: Path) -> list[str]:
    m = _read_json(a.path / "metrics.json")
    headline = [[k, m[k]] for k in ("accuracy", "exact_match", "f1", "dev_accuracy", "best_epoch") if k in m]
    out = [f"Task: **{m.get('task', a.manifest.get('config', {}).get('task', '?'))}**", ""]
    out += _table(["metric", "value"], headline)
    epochs = m.get("epochs", [])
    series = {k: [(e["epoch"], e[k]) for e in epochs if k in e] for k in ("train_loss", "dev_accuracy", "dev_f1")}
    series = {k: v for k, v in series.items() if v}
    if series:
        png = dest / f"{a.path.name}-curve.png"
        plot.line_chart(png, series, title="fine-tuning", xlabel="epoch", ylabel="value")
        out += ["", f"![learning curve]({png.name})"]
    return out


def study_section(a: Artifact, dest: Path) -> list[str]:
    doc = _read_json(a.path / "study.json")
    out = [f"Equal-FLOPs study; its own report with plots: `{a.path / 'report.md'}`.", ""]
    out += _table(["readout", "FLOPs", "a", "b", "a - b (points)", "95 % CI", "verdict"],
                  [[c["readout"], f"{c['flops']:.3g}", c["a"], c["b"], f"{100 * c['diff']:+.2f}",
                    f"[{100 * c['ci95'][0]:+.2f}, {100 * c['ci95'][1]:+.2f}]", c.get("verdict", "vs floor")]
                   for c in doc.get("comparisons", [])])
    return out


SECTIONS: dict[str, Callable[[Artifact, Path], list[str]]] = {
    "corpus": corpus_section,
    "vocab": vocab_section,
    "examples": examples_section,
    "checkpoint": checkpoint_section,
    "eval": eval_section,
    "study": study_section,
}
