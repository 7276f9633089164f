"""``kolectra study``: which pretraining buys the better Korean encoder per unit of compute.

The ELECTRA paper's central claim (Clark et al. 2020, figure 1 and section 3.4) is that replaced
token detection learns more per pretraining FLOP than masked language modelling, and more so
for small models; DeBERTaV3 (He et al. 2021) adds that gradient-disentangled embedding sharing
(GDES) helps further. A study checks such claims on the user's own corpus and says only what its
numbers support:

- **Arms**: an objective, optionally with an embedding-sharing suffix (``electra``, ``mlm``,
  ``electra-gdes``, ``electra15``, ``hybrid``, ``corrective``, ``mlm_then_rtd``, ...) and recipe
  switches (``mlm+mask0.3``, ``electra+gen0.5+temp2``: :data:`study_plan.RECIPE_SWITCHES`), each
  pretrained at every budget of a doubling grid ending
  at ``--flops`` (warm-up and linear decay over its own steps), ``--pretrain-seeds`` times.
- **A floor**: the same model, randomly initialised and never trained, read out the same way.
  A readout that cannot separate pretrained models from the floor cannot rank objectives.
- **Readouts** that see pretraining at small scale, each ``--finetune-seeds`` times, all scored on
  the same held-out NSMC rows (carved from the train file with the seed, rows of one text kept on one
  side; never the test set):
  ``probe`` (frozen encoder, mean-pooled last layer, logistic regression on a few thousand rows:
  :mod:`kolectra.finetune.probe`), ``lowdata`` (fine-tuning on about a thousand rows) and
  ``finetune`` (fine-tuning on more rows); and recipes of them, read side by side on the same
  checkpoints and rows, each with its own floor (``probe-best-layer``, ``lowdata-reinit1``:
  :data:`study_plan.READOUT_SWITCHES`). Every pretraining point is trained once, whatever the recipes.
- **Health** of each point: discriminator AUC, replaced share, generator accuracy and the
  trainer's verdict (:mod:`kolectra.model.health`); points that learned nothing are flagged with what
  the verdict found (``AT PRIOR`` for a discriminator at its class prior).
- **Comparisons**: paired differences between arms (and against the floor) at each budget with
  hierarchical bootstrap 95 % intervals (:mod:`kolectra.pipeline.study.stats`); a winner is named
  only when the interval excludes zero and both arms beat the floor.
- **Held-out rows** are kept out of the pretraining text when the study builds its examples
  (``--corpus``): their document ids are dropped by the examples stage. Given ``--examples``, the
  report counts how many held-out rows the pretraining corpus holds.

Every run is an artifact, so an interrupted study resumes and a rerun with twice the budget reuses
every point it already has. :mod:`kolectra.pipeline.study.report` writes ``study.json``,
``report.md`` and the plots.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
from pathlib import Path
from typing import Sequence

import numpy as np

from kolectra.core.bars import Bar
from kolectra.core.config import ConfigError, override
from kolectra.core.stage import StageOutput, progress
from kolectra.core.words import counted
from kolectra.corpus import shards
from kolectra.finetune.files import URL_FILE, as_given, folded_url
from kolectra.model import rtd
from kolectra.model.electra import train_flops_per_sequence
from kolectra.model.launcher import one_process
from kolectra.model.presets import preset as model_preset
from kolectra.model.train_end import TrainingDiverged
from kolectra.pipeline import overlap, stages
from kolectra.pipeline.store.artifacts import Artifact, ArtifactError, Store
from kolectra.pipeline.store.request import Request
from kolectra.pipeline.study import report as study_report
from kolectra.pipeline.study.plan import READOUTS, StudyPlan, parse_arm, readout_recipe  # noqa: F401
from kolectra.pipeline.study.plan import arm_sets as plan_arm_sets
from kolectra.pipeline.study.stats import Runs, compare, floor_verdict, verdict

# what a readout's eval artifact scores, in its own words (metrics.json's eval_set, its table, learning curve and
# `kolectra report`): they had called these rows NSMC's test set ("NSMC test accuracy", "300 test rows")
HELD_OUT = "held-out rows carved from the NSMC train file (not NSMC's test set)"
STAGE_VERSION = 14  # bump when the same request's bytes change; history: docs/artifacts.md


# ---- data ----------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Splits:
    """NSMC files of the study: one held-out dev file, and per fine-tuning seed the training rows."""

    dev: Path
    dev_ids: frozenset[str]
    train: dict[str, list[Path]]  # readout -> one file per fine-tuning seed
    grouping: dict = dataclasses.field(default_factory=dict)  # what keeping each text on one side did


def _write_nsmc(path: Path, header: str, rows: Sequence[str]) -> Path:
    return _write_whole(path, ("\n".join([header, *rows]) + "\n").encode("utf-8"))


def _write_whole(path: Path, data: bytes) -> Path:
    """``data`` at ``path``, never rewritten in place: another study process on the same root may be
    reading the file for a readout (or the holdout list for its examples), so a file with these bytes
    is left as it is, and any other is replaced whole (written under a name of this process, renamed)."""
    if path.is_file() and path.read_bytes() == data:
        return path
    part = path.with_name(f"{path.name}.{os.getpid()}.part")
    part.write_bytes(data)
    os.replace(part, path)
    return path


def _row_text(row: str, rules: dict) -> str:
    """The text a row is grouped by: its review as the corpus of text ``rules`` would hold it, as
    :func:`dev_overlap` and ``kolectra report``'s eval overlap read it (:func:`pipeline.overlap.same_text`);
    a row without one: the line."""
    parts = row.split("\t")
    return overlap.same_text(parts[1], rules) if len(parts) >= 2 else row


def make_splits(nsmc_train: Path, plan: StudyPlan, cache: Path, rules: dict | None = None) -> Splits:
    """Seeded, content-named NSMC files under ``cache``: dev first, then each readout's rows drawn
    from the rest (a different sample per fine-tuning seed).

    Rows of one text stay on one side: NSMC repeats short reviews ("굿", "최고"), and drawn one by one,
    1-2 of the sample's 300 held-out rows were also in each readout's training rows. One text is one after
    the pretraining corpus's text ``rules`` (:func:`pipeline.overlap.rules_of`; None: its defaults), as the
    held-out texts are looked for in the corpus: NFC, width folding, invisible characters, spaces, and
    ``max_repeat`` where the corpus shortens repeats. NFC and folded spaces alone (study 14 before h11) split
    a full-width ``ＯＳＴ`` from ``OST``, a review with a zero-width space from the same without, and ``ㅋㅋㅋㅋㅋ``
    from ``ㅋㅋ`` in a ``max_repeat=2`` corpus: one held out, its twin a training row.

    The seed shuffles the texts, not the rows, and each text's rows all go to dev if they fit in
    what is left of ``dev_rows`` (else all stay out of it): every text is held out with the same
    chance whatever its count. Shuffling rows and letting a text's first row decide (study 9) held
    out a text of k rows k times as often: "굿"'s 191 rows were held out whole, and a quarter of
    NSMC's 5,000 held-out rows repeated a held-out text. A file without repeated texts gives the
    same split as the row-by-row draw before study 9."""
    rules = rules if rules is not None else overlap.DEFAULT_RULES
    raw = Path(nsmc_train).read_bytes()
    sizes = (plan.dev_rows, plan.probe_rows, plan.lowdata_rows, plan.finetune_rows, plan.finetune_seeds, plan.seed)
    # "texts-by-rules" and the rules: the files of this split are named apart from earlier splits' and from those
    # of a corpus of other rules (same names, other bytes)
    grouped_by = b"texts-by-rules" + json.dumps(rules, sort_keys=True).encode()
    out = cache / f"nsmc-study-{hashlib.sha256(raw + repr(sizes).encode() + grouped_by).hexdigest()[:16]}"
    lines = raw.decode("utf-8").split("\n")
    header, rows = lines[0], [line for line in lines[1:] if line.strip()]
    texts = [_row_text(r, rules) for r in rows]
    same: dict[str, list[int]] = {}
    for i, t in enumerate(texts):
        same.setdefault(t, []).append(i)
    groups = list(same.values())  # in the order of each text's first row: without repeats, the rows'
    random.Random(plan.seed).shuffle(groups)  # the texts shuffled, so a text's count does not raise its chance
    order = [i for g in groups for i in g]
    n_dev = min(plan.dev_rows, len(rows) // 2)
    held, left_out = set(), 0
    for g in groups:
        if len(held) >= n_dev:
            break
        if len(g) <= n_dev - len(held):
            held.update(g)
        else:  # its rows would overrun --dev-rows: all of them stay on the training side
            left_out += 1
    dev_idx, pool = sorted(held), [i for i in order if i not in held]
    out.mkdir(parents=True, exist_ok=True)
    dev = _write_nsmc(out / "dev.txt", header, [rows[i] for i in dev_idx])
    want = {"probe": plan.probe_rows, "lowdata": plan.lowdata_rows, "finetune": plan.finetune_rows}
    train: dict[str, list[Path]] = {}
    dev_texts, leaked = {texts[i] for i in dev_idx}, 0
    for readout in dict.fromkeys(readout_recipe(r)[0] for r in plan.readouts):  # recipes of a readout share rows
        n = min(want[readout], len(pool))
        train[readout] = []
        for f in range(1, plan.finetune_seeds + 1):
            picked = sorted(random.Random(f"{plan.seed}-{readout}-{f}").sample(pool, n))
            leaked += len(dev_texts & {texts[i] for i in picked})
            train[readout].append(_write_nsmc(out / f"{readout}-seed{f}.txt", header, [rows[i] for i in picked]))
    # rows each readout trains on: fewer than asked where the file has not that many left (at most half of it is
    # held out), which went unsaid: --probe-rows 4000 on the sample's 2,000 rows trained every probe on 1,000
    trains = {readout: min(want[readout], len(pool)) for readout in train}
    for readout, n in trains.items():
        if n < want[readout]:
            progress(f"study: WARNING: --{readout}-rows {want[readout]} is more than the {len(pool)} rows of "
                     f"{nsmc_train} left beside the {len(dev_idx)} held out: every {readout} readout trains on all "
                     f"{n}, the same rows whatever its fine-tuning seed")
    if plan.dev_rows > n_dev:
        progress(f"study: WARNING: --dev-rows {plan.dev_rows}: {len(dev_idx)} rows held out, at most half of the "
                 f"{len(rows)} rows of {nsmc_train}")
    grouping = {"rows": len(rows), "repeated_rows": len(rows) - len(same),
                "dev_texts": len(dev_texts), "dev_rows_repeating_a_dev_text": len(dev_idx) - len(dev_texts),
                "texts_too_frequent_for_dev": left_out, "dev_texts_in_training_rows": leaked,
                "training_rows": trains}
    return Splits(dev, frozenset(rows[i].split("\t", 1)[0] for i in dev_idx), train, grouping)


def holdout_ids_file(splits: Splits) -> Path:
    """The held-out rows' ids, one a line, in a file named by its content beside the splits' folders:
    its path is part of the examples request, so studies with other fine-tuning seeds or readout
    sizes but the same held-out rows share one examples artifact."""
    ids = "".join(f"{i}\n" for i in sorted(splits.dev_ids)).encode("utf-8")
    return _write_whole(splits.dev.parent.parent / f"study-holdout-{hashlib.sha256(ids).hexdigest()[:16]}.txt", ids)


def pretraining_corpus(store: Store, corpus_ref: str | None, examples_ref: str | None) -> Artifact:
    """The corpus the study pretrains on: ``--corpus``, or the one ``--examples`` were packed from."""
    if examples_ref is not None:
        return store.require(examples_ref, "examples").parent_of_kind(store, "corpus")
    if corpus_ref is None:
        raise ArtifactError("study: give --corpus or --examples")
    return store.require(corpus_ref, "corpus")


def examples_for(store: Store, plan: StudyPlan, splits: Splits, corpus_ref: str | None,
                 examples_ref: str | None) -> tuple[Artifact, dict]:
    """The examples artifact, and how the held-out rows stand against its corpus."""
    corpus = pretraining_corpus(store, corpus_ref, examples_ref)
    if examples_ref is not None:
        examples = store.require(examples_ref, "examples")
        # kept in a store: a local copy
        found = dev_overlap(store.local(corpus), splits, held_out=False, rules=overlap.rules_of(corpus))
        return examples, {"held_out_from_pretraining": found["dev_rows_in_pretraining_corpus"] == 0,
                          "dev_rows": len(splits.dev_ids), **found}
    vocab = stages.vocab(store, corpus, sets=[f"vocab_size={plan.vocab_size}"])
    holdout = holdout_ids_file(splits)
    seq = model_preset(plan.preset).max_seq_length
    examples = stages.examples(store, corpus, vocab, sets=[f"max_seq_length={seq}", f"holdout_ids={holdout}"])
    return examples, {"held_out_from_pretraining": True, "dev_rows": len(splits.dev_ids),
                      "held_out_documents": examples.manifest.get("stats", {}).get("held_out_documents"),
                      **dev_overlap(store.local(corpus), splits, held_out=True, rules=overlap.rules_of(corpus))}


def dev_overlap(corpus_dir: Path, splits: Splits, held_out: bool, rules: dict | None = None) -> dict:
    """How much of the held-out rows the pretraining text still holds: rows whose id is in the
    corpus (0 when the study dropped them by id) and held-out texts that occur in it under another
    id (short stock reviews such as "최고의 영화" recur; dropping by id cannot catch them).

    Matched as ``kolectra report`` matches an eval's texts (:mod:`pipeline.overlap`): a held-out text through the
    corpus's text ``rules`` (:func:`pipeline.overlap.rules_of`; None: its defaults), found as a
    whole line of a document or a whole document. NFC and folded spaces alone (study 13) missed a full-width
    ``ＯＳＴ``, a zero-width space, ``ㅋㅋㅋㅋ`` a ``max_repeat`` corpus holds as ``ㅋㅋ``, and a review that is one
    line of a longer document."""
    rules = rules if rules is not None else overlap.DEFAULT_RULES
    dev_text = {}
    for line in splits.dev.read_text(encoding="utf-8").split("\n")[1:]:
        parts = line.split("\t")
        if len(parts) >= 2:
            dev_text[parts[0]] = overlap.same_text(parts[1], rules)
    texts, by_id = set(dev_text.values()) - {""}, set()
    elsewhere = set()
    for doc in shards.iter_documents(corpus_dir, "train"):
        did = str(doc.get("id"))
        if did in dev_text:
            by_id.add(did)
        else:
            elsewhere.update(t for t in overlap.doc_lines(str(doc.get("text", ""))) if t in texts)
    return {"dev_rows_in_pretraining_corpus": 0 if held_out else len(by_id),
            "dev_texts_under_other_ids": len(elsewhere), "dev_texts_under_other_ids_examples": sorted(elsewhere)[:5]}


# ---- points --------------------------------------------------------------------------------------
def arm_sets(plan: StudyPlan, arm: str) -> list[str]:
    """The study's pretraining sets, the arm's objective and sharing, and its recipe switches."""
    return plan_arm_sets(arm, plan.pretrain_sets)


def flops_per_step(examples: Artifact, plan: StudyPlan, arm: str) -> int:
    """Training FLOPs of one optimizer step of ``arm`` (the trainer's own counting)."""
    cfg = override(model_preset(plan.preset), arm_sets(plan, arm))
    index = json.loads((examples.path / "index.json").read_text(encoding="utf-8"))
    seq_len, vocab_size = index["max_seq_length"], index["vocab_size"]
    n_masked = rtd.num_slots(cfg.objective.mask_prob, seq_len)
    return cfg.train.batch_size * train_flops_per_sequence(cfg.model, vocab_size, seq_len, n_masked,
                                                           cfg.objective.objective)


def pretrain_point(store: Store, examples: Artifact, plan: StudyPlan, arm: str, budget: float | None,
                   seed: int) -> tuple[Artifact, int]:
    """A checkpoint of ``arm`` at ``budget`` FLOPs (None: the untrained floor) and its step count."""
    if budget is None:
        sets = [*plan.pretrain_sets, "train.steps=0", "train.warmup_steps=0"]
        return stages.pretrain(store, examples, preset=plan.preset, sets=sets, seed=seed, name="study-floor"), 0
    steps = max(1, round(budget / flops_per_step(examples, plan, arm)))
    sets = [*arm_sets(plan, arm), f"train.steps={steps}", f"train.warmup_steps={max(1, steps // 10)}",
            f"train.log_every={max(1, steps // 20)}"]
    progress(f"study: {arm} at {budget:.3g} FLOPs = {counted(steps, 'step')}, pretraining seed {seed}")
    try:
        return stages.pretrain(store, examples, preset=plan.preset, sets=sets, seed=seed, name=f"study-{arm}",
                               resume="exact", again="the same `kolectra study`"), steps
    except TrainingDiverged as e:
        raise TrainingDiverged(diverged_text(str(e), arm, budget, seed)) from None


# the end of the trainer's divergence message (model/train_end.py), whose second way out a study refuses
TRAINER_FIX = "; lower train.lr or lengthen train.warmup_steps"


def diverged_text(said: str, arm: str, budget: float, seed: int) -> str:
    """A study point's divergence: which point (under -q its progress line was not shown), and the ways out a
    study takes: the trainer's "lengthen train.warmup_steps" is refused by the study, which sets the warm-up."""
    return (f"study: {arm} at {budget:.3g} FLOPs, pretraining seed {seed}: {said.removesuffix(TRAINER_FIX)}; "
            "lower train.lr (--set train.lr=..., every arm's and the floor's: each point is trained again; the "
            f"warm-up is the study's, a tenth of the steps), or leave {arm} out of --arms (the points built before "
            "it are reused)")


def read_out(store: Store, ckpt: Artifact, plan: StudyPlan, splits: Splits, readout: str,
             seed: int) -> tuple[float, np.ndarray | None, str | None]:
    """One readout recipe of one checkpoint with fine-tuning seed ``seed``: (score, per-row 0/1 or None,
    the readout's own health verdict: ``ok``, ``not_learning``, ``unchecked``, or None where it records
    none, as a probe before its version 3). Recipes of one readout (``lowdata``, ``lowdata-reinit1``) train on the same rows."""
    base, sets = readout_recipe(readout)
    train = splits.train[base][seed - 1]
    if base == "probe":
        art = stages.probe(store, ckpt, train, splits.dev, sets=sets, seed=seed, name="study-probe", eval_set=HELD_OUT)
    else:
        art = stages.finetune(store, "nsmc", ckpt, train, splits.dev, preset=plan.finetune_preset,
                              sets=[*plan.finetune_sets, *sets, "max_train_examples=0", "max_eval_examples=0"],
                              seed=seed, name=f"study-{base}", eval_set=HELD_OUT)
    metrics = json.loads((art.path / "metrics.json").read_text(encoding="utf-8"))
    correct = per_row_correct(art.path)
    rows = len(correct) if correct is not None else metrics.get("eval_examples", metrics.get("test_examples", "?"))
    # the score under the study's name for it (the readout's artifact says HELD_OUT since eval_set; before, "NSMC
    # test accuracy", quoted so as NSMC's)
    progress(f"study: {readout}, fine-tuning seed {seed}: held-out accuracy {100 * float(metrics['accuracy']):.2f}% "
             f"on the study's {rows} held-out rows (carved from the NSMC train file, not NSMC's test set)")
    return float(metrics["accuracy"]), correct, (metrics.get("health") or {}).get("status")


def per_row_correct(eval_dir: Path) -> np.ndarray | None:
    """0/1 per evaluation row from ``predictions.jsonl`` (``label`` and ``predicted``), if written."""
    path = eval_dir / "predictions.jsonl"
    if not path.is_file():
        return None
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not rows or "label" not in rows[0] or "predicted" not in rows[0]:
        return None
    return np.array([int(r["label"] == r["predicted"]) for r in rows], dtype=np.float64)


def health_of(ckpt: Artifact) -> dict:
    stats = ckpt.manifest.get("stats", {})
    final, verdict = stats.get("final", {}), stats.get("health", {})
    out = {k: final.get(k) for k in ("disc_auc", "replaced_share", "gen_acc", "disc_recall", "mlm_acc")
           if final.get(k) is not None}
    out["status"] = verdict.get("status", "unchecked")
    out["left_prior"] = out["status"] != "not_learning"  # kept as named; problem_kinds says what did not learn
    if out["status"] == "not_learning":
        out["problem_kinds"] = list(dict.fromkeys(study_report.problem_kind(p) for p in verdict.get("problems", ())))
    if out["status"] == "unchecked":  # why: report.md's health cell says it (before, the checkpoint alone did)
        out["reason"] = verdict.get("reason") or "no health verdict recorded"
    return out


# ---- the study -----------------------------------------------------------------------------------
def run_study(store: Store, plan: StudyPlan, nsmc_train: Path, *, corpus_ref: str | None = None,
              examples_ref: str | None = None, name: str | None = None, force: bool = False) -> Artifact:
    plan.validate()
    if folded_url(nsmc_train):  # read as the local path s3:/b/k: 'No such file', as if the object were missing
        raise ConfigError(f"study: --nsmc-train {URL_FILE}: {as_given(nsmc_train)}")
    one_process("a study")  # its readouts fine-tune (stages.finetune): refused before an arm is pretrained
    # rows of one text after the corpus's rules stay on one side: the rules are the corpus's, read before the split
    splits = make_splits(Path(nsmc_train), plan, store.root / ".cache",
                         overlap.rules_of(pretraining_corpus(store, corpus_ref, examples_ref)))
    examples, holdout = examples_for(store, plan, splits, corpus_ref, examples_ref)
    for arm in plan.arms:  # under half a step, round() gives 0 and the arm trained 1 step: over twice its budget
        per_step, smallest = flops_per_step(examples, plan, arm), min(plan.budgets())
        if smallest < per_step / 2:
            raise ConfigError(f"study: a step of {arm} takes {per_step:.3g} FLOPs, more than twice the smallest budget "
                              f"({smallest:.3g}): give a larger --flops or fewer --points")
    seeds = range(1, plan.pretrain_seeds + 1)
    ft_seeds = range(1, plan.finetune_seeds + 1)
    results: dict[tuple, Runs] = {}  # (arm or "floor", budget or None, readout) -> Runs
    points, parents = [], []
    bar = Bar("study", (1 + len(plan.arms) * plan.points) * plan.pretrain_seeds, "point", every=1)

    def evaluate(key_arm: str, budget: float | None) -> None:
        scores = {r: np.zeros((len(seeds), len(ft_seeds))) for r in plan.readouts}
        correct: dict[str, list] = {r: [] for r in plan.readouts}
        for i, s in enumerate(seeds):
            ckpt, steps = pretrain_point(store, examples, plan, key_arm, budget, s)
            parents.append(ckpt)
            point = {"objective": key_arm, "flops": budget or 0.0, "pretrain_seed": s, "steps": steps,
                     "checkpoint": ckpt.id, "readouts": {}, "health": health_of(ckpt), "readout_health": {}}
            for r in plan.readouts:
                outs = [read_out(store, ckpt, plan, splits, r, f) for f in ft_seeds]
                scores[r][i] = [o[0] for o in outs]
                correct[r].append([o[1] for o in outs])
                point["readouts"][r] = [o[0] for o in outs]
                point["readout_health"][r] = [o[2] for o in outs]  # a readout that learned nothing is flagged
            points.append(point)
            bar.advance()
        for r in plan.readouts:
            rows = correct[r]
            full = all(c is not None for per_seed in rows for c in per_seed)
            results[(key_arm, budget, r)] = Runs(scores[r], np.array(rows) if full else None)

    progress(f"study: floor (untrained {plan.preset}) x {plan.pretrain_seeds} seeds")
    evaluate("floor", None)
    for arm in plan.arms:
        for budget in plan.budgets():
            evaluate(arm, budget)
    bar.close()
    comparisons = compare_all(plan, results)
    floor = {r: results[("floor", None, r)].scores.ravel().tolist() for r in plan.readouts}
    doc = {"plan": dataclasses.asdict(plan), "examples": examples.id, "holdout": holdout, "split": splits.grouping,
           "floor": floor, "points": [p for p in points if p["objective"] != "floor"],
           "floor_points": [p for p in points if p["objective"] == "floor"], "comparisons": comparisons}
    request = Request(kind="study", name=stages.artifact_name(name, f"study-{plan.preset}"),
                      stage_version=STAGE_VERSION, config=dataclasses.asdict(plan), parents=tuple(parents))
    return store.build(request, lambda out: _publish(store, out, doc), force)


def compare_all(plan: StudyPlan, results: dict[tuple, Runs]) -> list[dict]:
    """Every arm against the floor and every pair of arms, per budget and readout."""
    out = []
    for budget in plan.budgets():
        for r in plan.readouts:
            floor = results[("floor", None, r)]
            vs_floor = {}
            for arm in plan.arms:
                vs_floor[arm] = compare(results[(arm, budget, r)], floor, plan.bootstrap, plan.seed)
                out.append({"a": arm, "b": "floor", "flops": budget, "readout": r, **vs_floor[arm],
                            "verdict": floor_verdict(arm, vs_floor[arm])})  # in words, as a pair's
            for i, a in enumerate(plan.arms):
                for b in plan.arms[i + 1:]:
                    cmp = compare(results[(a, budget, r)], results[(b, budget, r)], plan.bootstrap, plan.seed)
                    out.append({"a": a, "b": b, "flops": budget, "readout": r, **cmp,
                                "verdict": verdict(a, b, cmp, vs_floor[a], vs_floor[b])})
    return out


def _publish(store: Store, out: Path, doc: dict) -> StageOutput:
    (out / "study.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    lines = study_report.write(store, out, doc)
    for line in lines:
        progress(line)
    return StageOutput(stats={"points": len(doc["points"]), "comparisons": len(doc["comparisons"]),
                              "winners": [f"{c['verdict']} ({c['readout']}, {c['flops']:.3g} FLOPs)"
                                          for c in doc["comparisons"] if " ahead of " in c.get("verdict", "")]})
