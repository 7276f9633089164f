"""``kolectra report REF REF ...``: several eval artifacts' headline scores in one Markdown table,
models as rows and tasks as columns (as KoELECTRA's README shows its results), each cell with the
rows it was measured on and the flags that make it not comparable; with ``--published``, the
published models' figures as rows of the same table (:mod:`pipeline.published`). One artifact's
full report is :mod:`pipeline.report`'s.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from pathlib import Path
from typing import Iterator

from kolectra.core import storage, store_objects
from kolectra.core.config import ConfigError, flat_dict
from kolectra.core.shown import shown
from kolectra.core.stage import warn
from kolectra.finetune.files import scored_file_losses  # torch-free
from kolectra.pipeline.markdown import code, table, text
from kolectra.pipeline.stage_versions import older_evals
from kolectra.pipeline.store.artifacts import Artifact, ArtifactError, Store
from kolectra.pipeline.store.catalog import article
from kolectra.pipeline.store.roots import artifact_around
from kolectra.pipeline.verdicts import UNTRAINED, health_of, read_json, untrained, verdict_text

METRIC_LABELS = {"accuracy": "acc", "exact_match": "EM", "f1": "F1", "macro_f1": "macro-F1", "spearman": "Spearman",
                 "pearson": "Pearson", "precision": "P", "recall": "R"}


def render_table(store: Store, refs: list[str], dest: str | Path | None = None,
                 published: bool = False) -> tuple[Path | str, str]:
    """``kolectra report REF REF ...``: the eval artifacts' headline scores in one Markdown table,
    a row per model (the checkpoint, or the HF directory fine-tuned) and a column per task (the
    artifact's name: ``--name kornli``), as KoELECTRA's README shows its results.  Writes
    ``report.md`` (the table and where each cell comes from; ``dest``: :func:`report_place`); returns its
    path (a store URL for a report in a store) and the table.
    ``published``: the published models' figures as rows of the same table, with a split column."""
    arts = evals(store, refs)
    lines, sources = score_table(store, arts, published)
    ids = hashlib.sha256(" ".join(sorted(a.id for a in arts)).encode()).hexdigest()[:12]
    where = report_place(store, dest, f"table-{ids}", arts)
    # an earlier kolectra's evals in one table with this one's: said, not mixed silently; a --seeds
    # summary's runs too (its cell is their median, and takes their sizes and health: _cell_notes)
    summary_of = {pid: a for a in arts if "seeds" in (a.manifest.get("config") or {}) for pid in a.parents}
    runs = [r for pid, a in summary_of.items() if pid not in {x.id for x in arts} and (r := store.parent(a, pid)) is not None]
    older = older_eval_notes([*arts, *runs], summary_of)
    body = "\n".join([f"# kolectra report: {len(arts)} evaluations", "", *lines, "", TABLE_NOTE, "",
                      *(f"- {code(f'eval/{name}')}{text(why)}." for name, why in older), *([""] if older else []),
                      *overlap_lines(store, arts), "Sources:", "", *sources]) + "\n"
    with default_place_hint(dest, where):
        if isinstance(where, Path):
            where.mkdir(parents=True, exist_ok=True)
            out = where / "report.md"
            out.write_text(body, encoding="utf-8")
            return out, "\n".join(lines)
        storage.write_bytes(f"{where}/report.md", body.encode("utf-8"))
    return f"{where}/report.md", "\n".join(lines)


def overlap_lines(store: Store, arts: list[Artifact]) -> list[str]:
    """Under the table: each eval's scored texts that its pretraining corpus holds verbatim, as a share (the one
    eval's report's section, :mod:`pipeline.overlap`, read from the same cache: the corpus is read once per
    corpus and scored file), or why not checked; a table had said nothing of it."""
    from kolectra.pipeline import overlap  # noqa: PLC0415 - the corpus readers, for a table only

    return ["Eval texts in the pretraining corpus (a score on them may be inflated by memorisation; "
            "`kolectra report EVAL` shows them):", "", *(overlap.share_line(store, a) for a in arts), ""]


def report_root(store: Store, arts: list[Artifact]) -> Path | str:
    """The root whose ``reports/`` holds a report without ``--dest``: the one the first REF's artifact lies in
    (a REF given as ``s3://b/k/eval/NAME-ID`` or ``/data/k/eval/NAME-ID``: that root, not ``--out``'s; a name
    or an id is found in ``--out``'s), else the command's (an artifact folder outside any root). Before,
    ``kolectra report s3://b/k/eval/NAME-ID`` drew the report in ./artifacts/reports, away from its artifact."""
    root = arts[0].root if arts else None
    if root is None:
        return store.root
    return root if isinstance(root, Path) else str(root).rstrip("/")


@contextlib.contextmanager
def default_place_hint(dest: str | Path | None, where: Path | str) -> Iterator[None]:
    """A report that cannot be written where no ``--dest`` sent it (the reports/ of its artifact's root: a
    colleague's bucket or a disk root read-only to this user) says where that place came from and how to choose
    another; with ``--dest`` the error stands alone."""
    try:
        yield
    except OSError as e:  # an error naming another file (an artifact read) is not the place's
        if dest is None and (e.filename is None or str(e.filename).startswith(str(where))):
            e.add_note(f"without --dest a report goes to the reports/ folder of the root its artifact lies in "
                       f"({where}); give --dest DIR to write it elsewhere")
        raise


def report_place(store: Store, dest: str | Path | None, name: str, arts: list[Artifact] | None = None) -> Path | str:
    """Where a report goes: ``dest`` (a local folder, or a folder in a store: ``s3://``, ``gs://``), else
    ``ROOT/reports/<name>``, ROOT being the root of the artifacts reported, ``arts`` (:func:`report_root`). A local
    :class:`Path`, or a store URL (no trailing ``/``), its bucket checked first (a missing one refused in one
    line, before anything is drawn); a ``dest`` inside the root (but for ``ROOT/reports``) or inside an artifact
    of any root is refused: its files went into a published artifact, which ``verify`` then found changed
    ('not in manifest (added after publishing)')."""
    root = report_root(store, arts or [])
    if dest is None:
        return root / "reports" / name if isinstance(root, Path) else storage.join(str(root), "reports", name)
    if storage.is_url(dest):
        storage.check_bucket(str(dest))  # before the '/' goes: 's3://' stripped is 's3:', a local path
        url = str(dest).rstrip("/")
        _refuse_managed(dest, url, store, root)
        if store_objects.object_info(url) is not None:  # report.md went below the object, as s3://b/k/report.md
            raise ConfigError(f"--dest {dest}: a file, not a folder")
        return url
    if why := storage.one_slash_problem(dest, "--dest"):  # s3:/b/x: drawn in ./s3:/b/x, exit 0
        raise ConfigError(why)
    where = Path(storage.local_path(dest))
    _refuse_managed(dest, where, store, root)
    if where.exists() and not where.is_dir():  # mkdir said only '...: File exists'
        raise ConfigError(f"--dest {dest}: a file, not a folder")
    return where


def _refuse_managed(dest: str | Path, where: str | Path, store: Store, home: Path | str) -> None:
    def within(place: str | Path, folder: str | Path) -> bool:
        if storage.is_url(str(place)) != storage.is_url(str(folder)):
            return False
        if storage.is_url(str(place)):
            a, b = str(place).rstrip("/"), str(folder).rstrip("/")
            return a == b or a.startswith(f"{b}/")
        a, b = Path(place).expanduser().resolve(), Path(folder).expanduser().resolve()
        return a == b or b in a.parents

    managed = [artifact] if (artifact := artifact_around(where)) is not None else []  # the nearer first
    # the command's root and the one the REF lies in (report_root), each but for its reports/
    managed += [r for r in dict.fromkeys([home, store.root]) if not within(where, storage.join(str(r), "reports"))]
    for folder in managed:
        if within(where, folder):
            raise ConfigError(f"--dest {dest}: inside {folder}, which kolectra manages (an artifact, a root or its "
                              f"cache): a report goes in {storage.join(str(home), 'reports')} (the default) or "
                              "outside the root")


def older_eval_notes(arts: list[Artifact], summary_of: dict[str, Artifact] | None = None) -> list[tuple[str, str]]:
    """``(name, why)`` for each eval among ``arts`` that an earlier kolectra's task built, each said on
    stderr too: a report (a table's or one eval's) names it in report.md, not shown as this version's.
    ``summary_of``: a run's id -> the ``--seeds`` summary a table shows in its place, which ``why`` names."""
    def of(a: Artifact) -> str:
        summary = (summary_of or {}).get(a.id)
        return f", a run of the --seeds summary eval/{summary.path.name}," if summary is not None else ""

    older = [(a.path.name, f"{of(a)} was built by an earlier kolectra ({task} stage version {then}; this one builds {now}): "
              "its score and its health check follow that version's rules (docs/artifacts.md, 'Stage versions', "
              "says what changed); fine-tune again for this version's") for a, task, then, now in older_evals(arts)]
    for name, why in older:
        warn(f"report: eval/{shown(name)}{why}")
    return older


TABLE_NOTE = ("Scores in percent; a `--seeds` summary shows the median over its seeds. "
              "Beside each score: the rows (questions, for KorQuAD) it was measured on, as "
              "`N of M` when `max_eval_examples` kept only the first N of the file's M (such a "
              "score is not comparable with a full-test figure), `test file: N bad rows left out` when "
              "the scored file had rows the reader could not use (neither is a score on the whole file), "
              "and `learned nothing` when the "
              "run's health check failed (docs/finetune.md), `no better than always answering the majority class (P%)` "
              "when it passed (it reads the dev split) but the accuracy on the whole test file is no better than "
              "that class's share of it, `N% of test rows in training` when "
              "that share of the scored rows is also in the training file (a `--seeds` summary: its runs' shares), "
              "`on FILE@HASH` (its sha256's first 8 digits) when the scores of one column were measured on "
              "different files (not comparable across its rows), `epochs=2, optim.lr=0.0005` (each score's values of "
              "the keys that differ) when they were fine-tuned with different settings; beside a model, its "
              "pretraining verdict when it did not pass. Published models' figures to place "
              "these against: docs/published.md (`kolectra report --published`).")


def score_table(store: Store, arts: list[Artifact], published: bool = False) -> tuple[list[str], list[str]]:
    """The score table of ``arts`` (models as rows, tasks as columns) and its sources' lines; with
    ``published``, the published models' rows below in the same units and a split column saying
    what each row's figures were measured on (docs/published.md's rows, :mod:`pipeline.published`)."""
    cells: dict[tuple[str, str], tuple[str, Artifact]] = {}
    notes: dict[tuple[str, str], list[str]] = {}  # what stands beside each score: _cell_notes, mark_scored_files
    headers: dict[str, str] = {}
    tasks: dict[str, str] = {}  # column -> task
    splits: dict[str, list[str]] = {}  # model identity -> what each of its scores was measured on
    model_names: dict[str, str] = {}  # model identity -> its name
    read = [(a, m, m.get("task") or a.manifest.get("config", {}).get("task", "?"))
            for a, m in ((a, read_json(a.path / "metrics.json")) for a in arts)]
    tasks_named: dict[str, set[str]] = {}  # column -> the tasks scored under that name
    for a, _, task in read:
        tasks_named.setdefault(_column(a, task), set()).add(task)
    for a, m, task in read:
        names, scale = _headline(task)
        column, (model, name) = _column(a, task), model_of(store, a)
        if len(tasks_named[column]) > 1:  # one --name on two tasks: a column each, headed by its own metrics
            column = f"{column}: {task}"
        if (model, column) in cells:
            raise ArtifactError(f"report: {a.path} and {cells[model, column][1].path} both score {name} on "
                                f"{column}; give one of them (or tell them apart with --name)")
        headers.setdefault(column, f"{column} ({' / '.join(METRIC_LABELS.get(n, n) for n in names)})")
        tasks.setdefault(column, task)
        cells[model, column] = (_cell(m, names, scale), a)
        notes[model, column] = _cell_notes(store, a, m)
        splits.setdefault(model, []).append(f"{column}: {_split(store, a, m) or '?'}")
        model_names.setdefault(model, name + _pretraining_note(store, a))
    mark_scored_files(store, cells, notes)
    mark_settings(cells, notes)
    cells = {k: (value + (f" ({'; '.join(notes[k])})" if notes[k] else ""), a) for k, (value, a) in cells.items()}
    label = row_labels(model_names)
    rows = [[label[model], *(cells.get((model, c), ("-",))[0] for c in headers)] for model in model_names]
    sources = [f"- {text(column)}, {text(label[model])}: {code(a.path)}" for (model, column), (_, a) in cells.items()]
    if not published:
        return table(["model", *headers.values()], rows), sources
    from kolectra.pipeline.published import rows_for  # noqa: PLC0415 - only with --published

    rows = [[*row, "; ".join(splits[model])] for row, model in zip(rows, model_names)]
    theirs = rows_for([tasks[c] for c in headers])
    rows += [[f"{r.model} (published)", *figures, r.splits] for r, figures in theirs]
    sources += [f"- {text(r.model)} (published): {text(r.source)}" for r, _ in theirs]
    return table(["model", *headers.values(), "split"], rows), sources


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
    path = facts.get("path") if isinstance(facts, dict) and not held_out(m) else None  # held-out: said in full
    return size + (f" of {Path(path).name}" if size and isinstance(path, str) else "")


def _split(store: Store, a: Artifact, m: dict) -> str:
    """:func:`split_of` for the table's split column; a ``--seeds`` summary records no test file of its
    own, so its runs say (it read ``?`` before)."""
    if "seeds" not in m:
        return split_of(m)
    return " / ".join(sorted({split_of(r) for r in _runs(store, a)} - {""}))


def _runs(store: Store, a: Artifact) -> list[dict]:
    """The metrics of a ``--seeds`` summary's runs, its parents."""
    return [read_json(p.path / "metrics.json") for p in (store.parent(a, pid) for pid in a.parents) if p]


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
        scored, whole, unit = m["test_examples"], (m.get("test_file") or {}).get("rows"), held_out(m) or "test rows"
    elif isinstance(m.get("eval_examples"), int):  # a linear probe
        scored, whole, unit = m["eval_examples"], None, held_out(m) or "test rows"
    else:
        return ""
    if isinstance(whole, int) and whole > scored:
        return f"{scored:,} of {whole:,} {unit}"
    return f"{scored:,} {unit}"


def held_out(m: dict) -> str:
    """What an NSMC eval or a probe scored when it is not a test set (``eval_set``: a study's held-out rows), else
    "": those had been called "300 test rows" (KorQuAD's ``eval_set`` names its dev set: not this)."""
    said = m.get("eval_set")
    return said if isinstance(said, str) and said and not isinstance(m.get("questions"), int) else ""


def _cell_notes(store: Store, a: Artifact, m: dict) -> list[str]:
    """``N of M test rows``, ``test file: 7 bad rows left out``, ``learned nothing``: the test size, the scored file's
    bad rows left out and the health flag beside a score; a ``--seeds`` summary takes them from its runs."""
    runs = [m]
    if "seeds" in m:
        runs = _runs(store, a)
    sizes = {test_size(r) for r in runs} - {""}
    failed = sum(1 for r in runs if (r.get("health") or {}).get("status") == "not_learning")
    notes = [" / ".join(sorted(sizes))] if sizes else []
    # a score on a file short of rows is not comparable with one on the whole file (before 2026-12-02 unsaid here)
    notes += sorted({lost for r in runs if (lost := scored_file_losses(r))})
    if any(by_article(r) for r in runs):
        notes.append(BY_ARTICLE)
    if failed:
        notes.append("learned nothing" if len(runs) == 1 else f"learned nothing in {failed} of {len(runs)} seeds")
    # a run its health check passed (one that failed says so above) whose test score is no better than the majority
    if below := [share for r in runs if (r.get("health") or {}).get("status") != "not_learning"
                 and (share := below_majority(r)) is not None]:
        notes.append(f"no better than always answering the majority class ({max(below):.1%})"
                     + (f" in {len(below)} of {len(runs)} seeds" if len(runs) > 1 else ""))
    return notes + overlap_notes([a] if "seeds" not in m else _run_artifacts(store, a))


def below_majority(m: dict) -> float | None:
    """The test file's majority-class share where an accuracy (nsmc, classify) is no higher, else None. The health check
    reads dev alone: 49.60 on a test file of 53.4% one class passed as ``ok`` beside a dev accuracy 1 point over its
    majority, unsaid in the table before 2026-12-02. Only a score on the whole file (its label counts are the file's)."""
    accuracy, labels = m.get("accuracy"), (m.get("test_file") or {}).get("labels")
    if not isinstance(accuracy, (int, float)) or not isinstance(labels, dict):
        return None
    counts = [c for c in labels.values() if isinstance(c, int)]
    if len(counts) != len(labels) or not sum(counts) or sum(counts) != m.get("test_examples"):
        return None
    share = max(counts) / sum(counts)
    return share if accuracy <= share else None


def overlap_notes(arts: list[Artifact]) -> list[str]:
    """``P% of test rows in training`` from the evals' recorded warnings; a ``--seeds`` summary's runs each carry their
    own (read from the runs: a summary before summary 4 records none; before 2026-12-02 its cell said nothing where
    every run's said 0.6%), as
    ``0.4-0.6% ... (in 2 of 3 seeds)`` where the runs' training rows, cut by ``max_train_examples``, differ."""
    shares = [{share for w in (r.manifest.get("stats") or {}).get("warnings", []) for share in OVERLAP.findall(w)}
              for r in arts]
    found = sorted(set().union(*shares), key=lambda share: float(share.rstrip("%"))) if shares else []
    if not found:
        return []
    share = found[0] if len(found) == 1 else f"{found[0].rstrip('%')}-{found[-1]}"
    some = sum(1 for s in shares if s)
    return [f"{share} of test rows in training" + (f" (in {some} of {len(arts)} seeds)" if some < len(arts) else "")]


def _run_artifacts(store: Store, a: Artifact) -> list[Artifact]:
    """A ``--seeds`` summary's runs (its parents), as artifacts."""
    return [p for p in (store.parent(a, pid) for pid in a.parents) if p is not None]


def scored_file(store: Store, a: Artifact) -> tuple[str, ...]:
    """The files an eval's score was measured on, each ``(NAME@SHA256[:8])`` from its manifest's inputs (the model's
    folder, if any, first; then train, the scored file, a dev file: stages.finetune, stages.probe); a ``--seeds``
    summary's are its runs'. Empty where not recorded."""
    if "seeds" in (a.manifest.get("config") or {}):
        return tuple(sorted({f for r in _run_artifacts(store, a) for f in scored_file(store, r)}))
    inputs = [i for i in a.manifest.get("inputs", []) if isinstance(i, dict)]
    if model_of(store, a)[0].startswith("dir:"):  # a Hugging Face folder fine-tuned: the first input
        inputs = inputs[1:]
    if len(inputs) < 2 or not isinstance(inputs[1].get("sha256"), str):
        return ()
    return (f"{Path(str(inputs[1].get('path', '?'))).name}@{inputs[1]['sha256'][:8]}",)


# what a column's rows may differ in and stay comparable: the seed (a --seeds summary's count is shown), and what
# changes only the last digits (threads, the eval batch) or is shown already (max_eval_examples: the test size)
SAME_RECIPE_EXCEPT = {"seed", "seeds", "cpu_threads", "eval_batch_size", "max_eval_examples"}


def mark_settings(cells: dict[tuple[str, str], tuple[str, Artifact]], notes: dict[tuple[str, str], list[str]]) -> None:
    """A column whose models were fine-tuned with different settings (``--set epochs=2`` beside the preset's 5, another
    lr or preset) says each score's values of those keys beside it and warns: a difference across its rows is then
    not the models' alone. Before 2026-12-02 nothing said so."""
    configs = {key: {k: v for k, v in flat_dict(a.manifest.get("config") or {}).items() if k not in SAME_RECIPE_EXCEPT}
               for key, (_, a) in cells.items()}
    for column in dict.fromkeys(c for _, c in cells):
        keys = [k for k in cells if k[1] == column]
        differ = sorted(n for n in set().union(*(configs[k] for k in keys))
                        if len({json.dumps(configs[k].get(n), sort_keys=True) for k in keys}) > 1)
        if len(keys) < 2 or not differ:
            continue
        shown_keys = differ[:4]  # another preset differs in a dozen keys: the cell names a few, the warning all
        more = f", +{len(differ) - len(shown_keys)} more settings" if len(differ) > len(shown_keys) else ""
        for k in keys:
            notes[k].append(", ".join(f"{n}={json.dumps(configs[k].get(n), ensure_ascii=False)}"
                                      for n in shown_keys) + more)
        warn(f"report: the scores of {column} were fine-tuned with different settings ({', '.join(differ)}): a "
             "difference across its rows is not the models' alone")


def mark_scored_files(store: Store, cells: dict[tuple[str, str], tuple[str, Artifact]],
                      notes: dict[tuple[str, str], list[str]]) -> None:
    """A column whose scores were measured on different files (another test file of the same size: both cells read
    ``500 test rows``) says on which beside every score, and a warning says they are not comparable; before
    2026-12-02 nothing told them apart."""
    files = {key: scored_file(store, a) for key, (_, a) in cells.items()}
    for column in dict.fromkeys(c for _, c in cells):
        keys = [k for k in cells if k[1] == column]
        if len({files[k] for k in keys}) < 2:
            continue
        for k in keys:
            notes[k].append(f"on {' / '.join(files[k]) or 'a file not recorded'}")
        warn(f"report: the scores of {column} were measured on different files "
             f"({', '.join(sorted({f for k in keys for f in files[k]}))}): not comparable across its rows")


# finetune/skeleton.py warn_overlap's words: "N of M scored rows (P%) of FILE also appear in the training file"
OVERLAP = re.compile(r"\d+ of \d+ scored rows \(([\d.]+%)\) of .* also appear in the training file")


def _pretraining_note(store: Store, a: Artifact) -> str:
    """`` (pretraining: learned nothing)`` beside a model whose checkpoint's own verdict did not pass."""
    parent = _checkpoint_of(store, a)
    health = health_of(parent) if parent is not None else None
    if health is not None and untrained(parent):  # the floor's "unchecked: no metrics logged after warm-up"
        return f" (pretraining: {UNTRAINED})"
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
    """The artifact's name (``--name kornli``); a ``--seeds`` summary's default name (``nsmc-seeds``, where its runs
    are ``nsmc``) is its task's. A name given is kept whole: ``--name rev0-seeds`` was the column ``rev0``."""
    if a.name == f"{task}-seeds" and "seeds" in (a.manifest.get("config") or {}):
        return task
    return a.name or task


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
