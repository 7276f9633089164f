"""The study's statistics: paired bootstrap intervals and the verdict's rules (pure numpy, no training).
The held-out and readout splits' tests: tests/test_study_stats_splits.py."""

import json

import numpy as np

from kolectra.pipeline.study.stats import Runs, compare, verdict


def _runs(mean: float, rows: int = 400, seed: int = 0) -> Runs:
    rng = np.random.default_rng(seed)
    correct = (rng.random((2, 3, rows)) < mean).astype(np.float64)
    return Runs(correct.mean(-1), correct)


def test_interval_excludes_zero_only_for_a_real_gap():
    floor, better, same = _runs(0.60, seed=1), _runs(0.75, seed=2), _runs(0.60, seed=3)
    gap = compare(better, floor, 500, 0)
    assert gap["ci95"][0] > 0 and abs(gap["diff"] - 0.15) < 0.03 and gap["rows_resampled"]
    level = compare(same, floor, 500, 0)
    assert level["ci95"][0] < 0 < level["ci95"][1]


def test_two_equal_arms_are_called_different_at_most_at_the_nominal_rate_with_two_pretraining_seeds():
    """The bootstrap over 2 pretraining seeds alone named a winner between two equal arms in 46 % of
    these trials (seed effects of 2 points, fine-tuning noise of 0.5); the seeds' own t-interval
    must agree too, and then it is the nominal 5 %."""
    rng, above, named = np.random.default_rng(3), {"ci95": [0.01, 0.05]}, 0
    for _ in range(300):
        a, b = (Runs(0.65 + rng.normal(0, 0.02, (2, 1)) + rng.normal(0, 0.005, (2, 3))) for _ in "ab")
        named += "ahead" in verdict("a", "b", compare(a, b, 400, 0), above, above)
    assert named / 300 < 0.08
    # seeds that agree still separate: +2.0 and +2.1 points on both seeds of a pair
    base = np.full((2, 3), 0.65)
    agree = compare(Runs(base + np.array([[0.020], [0.021]])), Runs(base), 400, 0)
    assert agree["seed_t95"][0] > 0 and verdict("a", "b", agree, above, above) == "a ahead of b"
    disagree = compare(Runs(base + np.array([[0.030], [0.002]])), Runs(base), 400, 0)
    assert disagree["ci95"][0] > 0 and disagree["seed_t95"][0] < 0
    assert verdict("a", "b", disagree, above, above).startswith("no winner: the pretraining seeds disagree")
    assert compare(Runs(base[:1]), Runs(base[:1]), 50, 0)["seed_t95"] is None  # one seed: no t-interval


def test_verdict_names_a_winner_only_above_the_floor_and_says_where_each_arm_stands():
    above, below, level = {"ci95": [0.01, 0.05]}, {"ci95": [-0.06, -0.02]}, {"ci95": [-0.01, 0.02]}
    clear = {"diff": 0.03, "ci95": [0.01, 0.05]}
    assert verdict("electra", "mlm", clear, above, above) == "electra ahead of mlm"
    assert verdict("electra", "mlm", {"diff": -0.03, "ci95": [-0.05, -0.01]}, above, above) == "mlm ahead of electra"
    assert verdict("electra", "mlm", {"diff": 0.0, "ci95": [-0.01, 0.01]}, above, above).startswith("no winner")
    said = verdict("electra", "mlm", {"diff": -0.06, "ci95": [-0.08, -0.04]}, below, above)
    assert said == ("no winner named: electra is below the random-init floor, "
                    "mlm is above the random-init floor")
    assert "not separable" in verdict("electra", "mlm", clear, level, above)


def _point(arm: str, seed: int, status: str, readout_health: list | None, flops: float = 1e12) -> dict:
    return {"objective": arm, "flops": flops, "pretrain_seed": seed, "steps": 10, "checkpoint": f"{arm}{seed}",
            "readouts": {"lowdata": [0.5, 0.6]}, "health": {"status": status, "left_prior": status != "not_learning"},
            **({"readout_health": {"lowdata": readout_health}} if readout_health is not None else {})}


def test_the_score_table_flags_readouts_that_learned_nothing_and_pretraining_never_checked():
    """A floor (or an arm) whose fine-tuning predicted one class for every row is flagged where its score
    stands, and a pretraining run whose health went unchecked (it ended in warm-up) is not called ok."""
    from kolectra.pipeline.study.report import score_table

    cmp = {"diff": 0.0, "ci95": [-0.01, 0.01], "b": "floor", "readout": "lowdata", "flops": 1e12}
    doc = {"plan": {"finetune_preset": "electra", "finetune_sets": []}, "floor": {"lowdata": [0.5, 0.5, 0.5, 0.5]},
           "floor_points": [_point("floor", 1, "unchecked", ["not_learning", "ok"]),
                            _point("floor", 2, "unchecked", ["not_learning", "not_learning"])],
           "points": [_point("electra", 1, "ok", ["ok", "not_learning"]), _point("electra", 2, "unchecked", ["ok", "ok"]),
                      _point("mlm", 1, "ok", ["ok", "ok"]), _point("mlm", 2, "not_learning", ["ok", "ok"])],
           "comparisons": [{**cmp, "a": "electra"}, {**cmp, "a": "mlm"}]}
    lines = score_table(doc, "lowdata")
    floor = next(ln for ln in lines if ln.startswith("Floor"))
    assert "**The readout learned nothing in 3 of 4 floor runs**" in floor
    rows = {ln.split(" | ")[0][2:]: ln.split(" | ")[-1][:-2] for ln in lines if ln.startswith("| electra") or ln.startswith("| mlm")}
    assert rows == {"electra": "pretraining unchecked (seed 2); readout learned nothing in 1 of 4 runs",
                    "mlm": "NOT LEARNING (seed 2)"}  # a verdict that names no kind is not called "at the prior"
    # a study.json written before readouts recorded their health: nothing claimed either way
    old = {**doc, "points": [_point("mlm", 1, "ok", None)], "floor_points": [_point("floor", 1, "unchecked", None)],
           "comparisons": [{**cmp, "a": "mlm"}]}
    lines = score_table(old, "lowdata")
    assert "learned nothing" not in "\n".join(lines)
    assert next(ln for ln in lines if ln.startswith("| mlm")).endswith("| ok |")


def test_a_readout_reports_its_own_health_verdict(tmp_path, monkeypatch):
    from kolectra.pipeline import stages
    from kolectra.pipeline.study.plan import StudyPlan
    from kolectra.pipeline.study.runner import Splits, read_out

    class Art:
        path = tmp_path

    (tmp_path / "metrics.json").write_text(json.dumps({"accuracy": 0.5, "health": {"status": "not_learning"}}))
    (tmp_path / "predictions.jsonl").write_text('{"label": 1, "predicted": 1}\n{"label": 0, "predicted": 1}\n')
    monkeypatch.setattr(stages, "finetune", lambda *a, **k: Art())
    monkeypatch.setattr(stages, "probe", lambda *a, **k: Art())
    splits = Splits(tmp_path / "dev.txt", frozenset(), {"lowdata": [tmp_path / "t.txt"], "probe": [tmp_path / "t.txt"]})
    score, correct, status = read_out(None, None, StudyPlan(flops=1e12), splits, "lowdata", 1)
    assert (score, correct.tolist(), status) == (0.5, [1.0, 0.0], "not_learning")
    (tmp_path / "metrics.json").write_text(json.dumps({"accuracy": 0.5}))  # a probe records no verdict
    assert read_out(None, None, StudyPlan(flops=1e12), splits, "probe", 1)[2] is None


def test_arms_that_train_the_same_model_are_refused_before_anything_trains():
    """Two spellings of one arm would train the same checkpoints, be compared with themselves and fill
    the score table twice; a precision switch is read as a run resolves it (bf16 by default on a CPU with
    native bf16), so electra+fp32 and electra+bf16 stay two arms everywhere."""
    import pytest

    from kolectra.core.config import ConfigError
    from kolectra.pipeline.study.plan import StudyPlan

    for arms in (("electra", "electra"), ("electra", "electra-es"), ("mlm", "electra", "mlm+mask0.15")):
        with pytest.raises(ConfigError, match="train the same model"):
            StudyPlan(flops=1e12, arms=arms).validate()
    with pytest.raises(ConfigError, match="--arms must not be empty"):
        StudyPlan(flops=1e12, arms=()).validate()
    StudyPlan(flops=1e12, arms=("electra+fp32", "electra+bf16", "electra-gdes", "mlm", "mlm+mask0.3")).validate()


def test_the_auc_plot_says_which_arm_and_seed_it_draws(tmp_path, monkeypatch):
    """One curve is drawn without a legend: the title names its arm, and every curve is pretraining seed 1's."""
    from kolectra.core import plot
    from kolectra.pipeline.study import report

    for arm, key in (("electra", "disc_auc"), ("mlm", "mlm_acc")):  # an MLM logs no AUC
        (tmp_path / arm).mkdir()
        (tmp_path / arm / "metrics.jsonl").write_text("".join(json.dumps({"step": s, key: 0.5 + s / 100}) + "\n"
                                                              for s in (5, 10)))

    class Store:
        def resolve(self, ref):
            return type("Art", (), {"path": tmp_path / ref[:-1]})

    titles = []
    monkeypatch.setattr(plot, "line_chart", lambda path, series, title="", **kw: titles.append((title, sorted(series))))
    doc = {"floor": {}, "points": [_point("electra", s, "ok", None, flops) for s in (1, 2) for flops in (1e12, 2e12)]
           + [_point("mlm", 1, "ok", None, 2e12)]}
    report.plots(Store(), tmp_path, doc)
    assert titles == [("discriminator AUC during pretraining of electra (2e+12 FLOPs, pretraining seed 1)", ["electra"])]


def test_an_artifacts_report_shows_the_seeds_interval_beside_the_bootstraps(tmp_path):
    from types import SimpleNamespace

    from kolectra.pipeline.report import study_section

    cmp = {"readout": "probe", "flops": 1e12, "a": "electra", "b": "mlm", "diff": 0.02, "ci95": [0.01, 0.03],
           "seed_t95": [-0.05, 0.09], "verdict": "no winner: the pretraining seeds disagree"}
    (tmp_path / "study.json").write_text(json.dumps({"comparisons": [cmp, {**cmp, "seed_t95": None}]}))
    lines = "\n".join(study_section(SimpleNamespace(path=tmp_path), tmp_path))
    assert r"\[+1.00, +3.00\]; seeds t \[-5.00, +9.00\] |" in lines and r"\[+1.00, +3.00\] |" in lines


def test_a_point_that_learned_nothing_is_labelled_by_what_its_verdict_found():
    """Every not-learning point read "AT PRIOR", a generator at uniform guessing or an MLM arm's masked LM
    included; the label now says the verdict's kind, and "AT PRIOR" only where the discriminator sits there."""
    from kolectra.model import health
    from kolectra.pipeline.study.report import health_cell, problem_kind, split_text

    def point(seed, problems):
        kinds = list(dict.fromkeys(problem_kind(p) for p in problems))
        return {"pretrain_seed": seed, "health": {"status": "not_learning", "left_prior": False,
                                                  "problem_kinds": kinds}}

    ctx = dict(vocab_size=8000, warmup_steps=250, total_steps=2500, lr=1e-3, nonpad_tokens=10_000_000,
               padding_share=0.002)
    gen = health.verdict([{"step": s, "disc_loss": 0.2, "disc_auc": 0.9, "disc_recall": 0.5,
                           "replaced_token_share": 0.114, "gen_loss": 8.9, "gen_acc": 0.001, "replaced_share": 0.9}
                          for s in (300, 400)], health.Context(objective="electra", **ctx))
    mlm = health.verdict([{"step": s, "mlm_loss": 8.95} for s in (300, 400)], health.Context(objective="mlm", **ctx))
    prior = health.verdict([{"step": s, "disc_loss": 0.3515, "disc_auc": 0.58, "disc_recall": 0.002,
                             "replaced_token_share": 0.114, "gen_loss": 5.9, "gen_acc": 0.2, "replaced_share": 0.86}
                            for s in (300, 400)], health.Context(objective="electra", **ctx))
    assert health_cell([point(1, gen["problems"])], "lowdata") == "NOT LEARNING: generator at uniform guessing (seed 1)"
    assert health_cell([point(2, mlm["problems"])], "lowdata") == "NOT LEARNING: masked LM at uniform guessing (seed 2)"
    assert health_cell([point(1, prior["problems"]), point(2, prior["problems"])], "lowdata") == "AT PRIOR (seed 1, 2)"
    both = point(3, [*prior["problems"], *gen["problems"]])
    assert health_cell([both], "lowdata") == "AT PRIOR + generator at uniform guessing (seed 3)"
    assert problem_kind("a sentence of no known kind") == "other"
    said = split_text({"rows": 80, "repeated_rows": 29, "dev_texts": 18, "dev_rows_repeating_a_dev_text": 2,
                       "texts_too_frequent_for_dev": 1, "dev_texts_in_training_rows": 0})
    assert "29 of the train file's 80 rows repeat" in said and "no held-out text is among" in said


def test_a_study_of_one_pretraining_seed_says_its_intervals_leave_out_the_runs_spread(tmp_path):
    """With --pretrain-seeds 1 the intervals resample fine-tuning seeds and rows only (no seeds' t-interval
    exists), yet report.md, its printed lines and `kolectra report` named winners and arms below the floor as
    a study of several seeds does, without a word (the tiny study of docs/studies.md: 'electra is below the
    random-init floor' from one pretraining run); they say it now, and a study of two seeds does not."""
    from types import SimpleNamespace

    from kolectra.pipeline.report import study_section
    from kolectra.pipeline.study import report

    cmp = {"readout": "probe", "flops": 1e12, "a": "electra", "b": "mlm", "diff": 0.05, "ci95": [0.01, 0.09],
           "seed_t95": None, "verdict": "electra ahead of mlm"}
    for seeds in (1, 2):
        doc = {"plan": {"arms": ["electra", "mlm"], "preset": "tiny", "pretrain_seeds": seeds, "finetune_seeds": 2},
               "holdout": {"dev_rows": 300, "held_out_from_pretraining": True}, "floor": {"probe": [0.5, 0.52]},
               "points": [], "floor_points": [], "comparisons": [cmp]}
        folder = tmp_path / str(seeds)
        folder.mkdir()
        printed = report.write(None, folder, doc)
        (folder / "study.json").write_text(json.dumps(doc))
        shown = "\n".join(study_section(SimpleNamespace(path=folder), folder))
        said = [(folder / "report.md").read_text(encoding="utf-8"), "\n".join(printed), shown]
        assert [("**One pretraining seed:**" in t and "not the spread between pretraining runs" in t) for t in said] \
            == [seeds == 1] * 3, seeds


def test_an_unchecked_point_says_why_its_pretraining_went_unchecked():
    """A point whose health went unchecked read 'pretraining unchecked (seed 1)' whatever the reason (a run that
    ended in warm-up, electra15 whose last windows scored too few original tokens to judge its discriminator), the
    checkpoint alone naming it; study.json's health keeps the verdict's reason and the cell says it."""
    from types import SimpleNamespace

    from kolectra.model import health
    from kolectra.pipeline.study.report import health_cell
    from kolectra.pipeline.study.runner import health_of

    ctx = dict(vocab_size=8000, lr=1e-3, nonpad_tokens=10_000, padding_share=0.0)
    warmup = health.verdict([{"step": 2, "disc_loss": 0.4, "gen_loss": 8.0}],
                            health.Context(objective="electra", warmup_steps=4, total_steps=3, **ctx))
    few = health.verdict([{"step": s, "disc_loss": 0.07, "disc_auc": 0.64, "disc_recall": 1.0, "disc_acc": 0.99,
                           "replaced_token_share": 0.99, "gen_loss": 5.0, "gen_acc": 0.2, "replaced_share": 0.99,
                           "disc_replaced_tokens": 100, "disc_original_tokens": 1} for s in (30, 33)],
                         health.Context(objective="electra15", warmup_steps=4, total_steps=33, **ctx))
    assert (warmup["status"], few["status"]) == ("unchecked", "unchecked"), (warmup, few)

    def point(seed, verdict):
        ckpt = SimpleNamespace(manifest={"stats": {"final": {}, "health": verdict}})
        return {"pretrain_seed": seed, "health": health_of(ckpt)}

    pts = [point(1, warmup), point(2, few), point(3, few)]
    assert [p["health"]["reason"] for p in pts] == [health.ENDED_IN_WARMUP, health.DISC_NOT_JUDGED,
                                                    health.DISC_NOT_JUDGED]
    assert health_cell(pts, "lowdata") == (f"pretraining unchecked: {health.ENDED_IN_WARMUP} (seed 1); pretraining "
                                           f"unchecked: {health.DISC_NOT_JUDGED} (seed 2, 3)")
    assert health_cell([point(1, {})], "lowdata") == "pretraining unchecked: no health verdict recorded (seed 1)"


def test_an_arm_no_better_than_the_floor_is_said_so_in_words_in_a_study_of_one_arm(tmp_path):
    """A study of one arm has no pair to name a winner of, so report.md, its printed lines and `kolectra report`
    gave the arm's standing against the floor as an interval alone ("+1.20 [-0.80, +3.10]", read as a gain);
    each now says where it stands in words, and a recipe with no arm above the floor says so under its table."""
    from types import SimpleNamespace

    from kolectra.pipeline.report import study_section
    from kolectra.pipeline.study import report
    from kolectra.pipeline.study.runner import StudyPlan, compare_all

    plan = StudyPlan(flops=1e12, points=1, arms=("electra",), pretrain_seeds=2, finetune_seeds=2,
                     readouts=("probe", "lowdata"), bootstrap=200)
    level = Runs(np.array([[0.60, 0.61], [0.58, 0.62]]))
    results = {("floor", None, "probe"): level, ("electra", 1e12, "probe"): Runs(level.scores + [[0.03, 0.01], [-0.02, -0.01]]),
               ("floor", None, "lowdata"): level, ("electra", 1e12, "lowdata"): Runs(level.scores + 0.10)}
    comparisons = compare_all(plan, results)
    said = {c["readout"]: c["verdict"] for c in comparisons}
    assert said == {"probe": "electra is not separable from the random-init floor",
                    "lowdata": "electra is above the random-init floor"}
    doc = {"plan": {"arms": ["electra"], "preset": "tiny", "pretrain_seeds": 2, "finetune_seeds": 2,
                    "finetune_preset": "electra", "finetune_sets": []},
           "holdout": {"dev_rows": 300, "held_out_from_pretraining": True},
           "floor": {r: level.scores.ravel().tolist() for r in ("probe", "lowdata")},
           "points": [{**_point("electra", s, "ok", ["ok", "ok"]), "readouts": {"probe": [0.6, 0.6], "lowdata": [0.7, 0.7]}}
                      for s in (1, 2)],
           "floor_points": [], "comparisons": comparisons}
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "metrics.jsonl").write_text("")
    store = SimpleNamespace(resolve=lambda ref: SimpleNamespace(path=tmp_path / "ckpt"))  # the arm's training log
    printed = "\n".join(report.write(store, tmp_path, doc))
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    for shown in (md, printed):
        assert ": not separable from the floor |" in shown and ": above the floor |" in shown
        assert "**No arm is above the untrained floor at its budget read by `probe`**" in shown
        assert "read by `lowdata`**" not in shown
    # its verdicts and comparisons stood as a heading over nothing and an empty table
    assert md.count("One arm: no pair of arms to judge") == 2 and "| readout recipe |" not in md
    (tmp_path / "study.json").write_text(json.dumps(doc))
    shown = "\n".join(study_section(SimpleNamespace(path=tmp_path), tmp_path))
    assert "| electra is not separable from the random-init floor |" in shown
    # a study.json before version 13 recorded no verdict against the floor: its words come from the intervals
    for c in doc["comparisons"]:
        del c["verdict"]
    (tmp_path / "study.json").write_text(json.dumps(doc))
    shown = "\n".join(study_section(SimpleNamespace(path=tmp_path), tmp_path))
    assert "| electra is above the random-init floor |" in shown and "vs floor" not in shown


def test_the_report_says_the_held_out_texts_were_looked_for_in_the_pretraining_corpus_when_none_were_found(tmp_path):
    """report.md named held-out texts found in the pretraining corpus under another id, and said nothing when the
    check found none, so a reader could not tell the check was made; nor did it say that only exact texts (NFC,
    spaces folded) are looked for, not near-duplicates."""
    from kolectra.pipeline.study import report

    def written(holdout: dict) -> str:
        doc = {"plan": {"arms": ["electra"], "preset": "tiny", "pretrain_seeds": 2, "finetune_seeds": 2},
               "holdout": {"dev_rows": 300, "held_out_from_pretraining": True, **holdout}, "floor": {"probe": [0.5]},
               "points": [], "floor_points": [], "comparisons": []}
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        folder.mkdir()
        report.write(None, folder, doc)
        return (folder / "report.md").read_text(encoding="utf-8")

    none = written({"dev_texts_under_other_ids": 0, "dev_texts_under_other_ids_examples": []})
    assert "No held-out text occurs in the pretraining corpus under another id (texts compared as kolectra report " \
           "compares an eval's, through the corpus's text rules (NFC, width, invisible characters, spaces), a whole " \
           "line or document; near-duplicates are not looked for)." in none
    some = written({"dev_texts_under_other_ids": 3, "dev_texts_under_other_ids_examples": ["굿", "최고"]})
    assert "3 held-out texts also occur" in some and "near-duplicates are not looked for" in some
    assert "under another id" not in written({})  # a study.json without the count: nothing claimed


def test_readouts_given_fewer_rows_than_asked_are_said_so_before_training_and_in_the_report(tmp_path, capsys):
    """--probe-rows 4000 on a train file of 2,000 rows (the embedded sample at the default --dev-rows 5000, half
    held out) trained every probe on the 1,000 rows left, the same rows for each fine-tuning seed, and
    --dev-rows 5000 held out 1,000: nothing said either, before the hours of pretraining or in report.md."""
    from kolectra.pipeline.study import report
    from kolectra.pipeline.study.plan import StudyPlan
    from kolectra.pipeline.study.runner import make_splits

    nsmc = tmp_path / "train.txt"
    nsmc.write_text("id\tdocument\tlabel\n" + "".join(f"{i}\t리뷰 {i}\t{i % 2}\n" for i in range(40)), encoding="utf-8")
    plan = StudyPlan(flops=1e12, dev_rows=30, probe_rows=100, lowdata_rows=5, finetune_seeds=2,
                     readouts=("probe", "lowdata"))
    splits = make_splits(nsmc, plan, tmp_path / "cache")
    err = capsys.readouterr().err
    assert "study: WARNING: --probe-rows 100 is more than the 20 rows of" in err and "trains on all 20" in err
    assert "study: WARNING: --dev-rows 30: 20 rows held out, at most half of the 40 rows" in err
    assert "--lowdata-rows" not in err and splits.grouping["training_rows"] == {"probe": 20, "lowdata": 5}
    doc = {"plan": {"arms": ["electra"], "preset": "tiny", "pretrain_seeds": 2, "finetune_seeds": 2, "dev_rows": 30,
                    "probe_rows": 100, "lowdata_rows": 5},
           "holdout": {"dev_rows": 20, "held_out_from_pretraining": True}, "split": splits.grouping,
           "floor": {"probe": [0.5]}, "points": [], "floor_points": [], "comparisons": []}
    report.write(None, tmp_path, doc)
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "scored on 20 held-out NSMC rows carved from the train file (never the test set) (**of the 30 asked " \
           "with --dev-rows: at most half of the file's 40 rows are held out**)." in md
    assert ("Each readout trains on rows of the rest, drawn per fine-tuning seed: **`probe` 20, of the 100 asked "
            "(--probe-rows): all the rows left, the same for every fine-tuning seed**, `lowdata` 5.") in md
