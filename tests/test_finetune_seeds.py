"""Seed summaries: median and spread over runs that differ only in the seed."""

import json

import pytest

from kolectra.finetune.report import format_table, nsmc_table
from kolectra.finetune.seeds import describe, parse_seeds, run_seeds, summarize, write_summary


def test_describe_median_spread_iqr():
    d = describe([0.80, 0.84, 0.81, 0.90, 0.82])
    assert d["n"] == 5 and d["median"] == 0.82
    assert d["spread"] == pytest.approx(0.10) and d["min"] == 0.80 and d["max"] == 0.90
    assert d["iqr"] == pytest.approx(0.84 - 0.81)
    single = describe([0.5])
    assert single["spread"] == 0.0 and single["stdev"] == 0.0 and single["median"] == 0.5
    with pytest.raises(ValueError, match="no values"):
        describe([])


def test_summarize_per_task_metrics():
    runs = {3: {"exact_match": 50.0, "f1": 60.0}, 1: {"exact_match": 40.0, "f1": 70.0},
            2: {"exact_match": 45.0, "f1": 65.0}}
    s = summarize("korquad", runs)
    assert s["seeds"] == [1, 2, 3]
    assert s["exact_match"]["median"] == 45.0 and s["f1"]["spread"] == 10.0
    assert s["f1"]["per_seed"] == {"1": 70.0, "2": 65.0, "3": 60.0}
    with pytest.raises(ValueError, match="accuracy"):
        summarize("nsmc", {1: {"exact_match": 1.0}})


def test_run_seeds_calls_each_seed_and_writes_the_summary(tmp_path):
    called = []

    def run_one(seed):
        called.append(seed)
        return {"accuracy": 0.80 + seed / 100, "accuracy_pct": 80.0 + seed}

    summary, table = run_seeds("nsmc", [3, 1, 2], run_one, tmp_path / "seeds.json")
    assert called == [3, 1, 2]
    assert json.loads((tmp_path / "seeds.json").read_text()) == summary
    assert summary["accuracy_pct"]["median"] == 82.0 and summary["accuracy_pct"]["spread"] == 2.0
    lines = table.splitlines()
    assert lines[0] == "nsmc over 3 seeds" and "accuracy %" in lines[1]
    assert [ln.split()[0:2] for ln in lines[3:6]] == [["seed", "1"], ["seed", "2"], ["seed", "3"]]
    assert lines[6].split() == ["median", "82.00"] and lines[7].split() == ["spread", "2.00"]
    again = tmp_path / "again.json"
    assert write_summary("nsmc", {1: run_one(1), 2: run_one(2), 3: run_one(3)}, again)[1] == table
    assert again.read_bytes() == (tmp_path / "seeds.json").read_bytes()
    with pytest.raises(ValueError, match="distinct"):
        run_seeds("nsmc", [1, 1], run_one)


def test_parse_seeds():
    assert parse_seeds("1,2,3") == [1, 2, 3] and parse_seeds("5-7, 1") == [5, 6, 7, 1]
    for bad in ("", "a", "1,1", "3-x", "-2"):
        with pytest.raises(ValueError, match=f"^--seeds: .*'{bad}'"):
            parse_seeds(bad)


def test_tables():
    t = format_table(("name", "value"), [("a", 1.5), ("long name", None)])
    assert t.splitlines() == ["name       value", "---------  -----", "a           1.50", "long name      -"]
    m = {"epochs": [{"epoch": 1, "train_loss": 0.5, "dev_accuracy": 0.8},
                    {"epoch": 2, "train_loss": 0.3, "dev_accuracy": 0.85}],
         "best_epoch": 2, "accuracy_pct": 84.5, "test_examples": 10, "dev_examples": 5}
    lines = nsmc_table(m).splitlines()
    assert lines[3].split() == ["2", "0.3000", "85.00", "*"] and "84.50%" in lines[-1]


def test_a_korquad_seeds_summary_names_each_run_whose_predictions_the_official_script_reads(tmp_path, capsys,
                                                                                              tiny_model):
    """A KorQuAD --seeds summary holds medians, no predictions.json (what the official evaluate script reads):
    its seeds.json and the command named no seed's run, so comparing the seeds' answers meant digging the runs
    out of the manifest's parents. seeds.json's ``runs`` and a line per seed name them now."""
    from kolectra.pipeline.cli import main
    from kolectra.pipeline.store.artifacts import Store
    from tests.test_finetune_e2e import FIXTURE

    train, dev = FIXTURE.with_name("korquad_train.json"), FIXTURE.with_name("korquad_dev.json")
    root = tmp_path / "root"
    argv = ["finetune", "korquad", "--model", str(tiny_model), "--train", str(train), "--dev", str(dev),
            "--preset", "sample", "--seeds", "1,2", "--out", str(root), "--set", "epochs=1", "--set", "max_length=64",
            "--set", "doc_stride=32", "--set", "max_query_length=24"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    summary = Store(root).resolve(out.strip().splitlines()[-1])
    assert not (summary.path / "predictions.json").exists()  # a median has no answers
    runs = json.loads((summary.path / "seeds.json").read_text(encoding="utf-8"))["runs"]
    assert set(runs) == {"1", "2"}
    for seed, ref in runs.items():
        run = Store(root).resolve(ref)
        assert run.id in summary.parents and run.manifest["config"]["seed"] == int(seed)
        assert (root / ref / "predictions.json").is_file()
        assert f"seed {seed}: {ref} (its predictions.json)" in err



def test_a_seeds_summary_whose_runs_learned_nothing_says_so_on_stdout_built_or_reused(tmp_path, capsys, tiny_model):
    """A --seeds summary holds medians and no verdict: its stdout listed the scores alone, so with every seed's
    span head at uniform guessing the command ended as one whose seeds learned (each seed's WARNING went by once on
    stderr as it was built; the same command again, reusing them, said nothing of it, where one run's reuse prints
    its verdict). It now adds 'health  learned nothing in k of n seeds (seed s: ...)'."""
    from kolectra.pipeline.cli import main
    from kolectra.pipeline.store.artifacts import Store
    from tests.test_finetune_e2e import FIXTURE

    train, dev = FIXTURE.with_name("korquad_train.json"), FIXTURE.with_name("korquad_dev.json")
    root = tmp_path / "root"
    argv = ["finetune", "korquad", "--model", str(tiny_model), "--train", str(train), "--dev", str(dev),
            "--preset", "sample", "--seeds", "1,2", "--out", str(root), "--set", "epochs=1", "--set", "max_length=64",
            "--set", "doc_stride=32", "--set", "max_query_length=24", "--set", "optim.lr=1e-9"]
    for _ in range(2):  # built, then reused
        assert main(argv) == 0
        out = capsys.readouterr().out.strip().splitlines()
        summary = Store(root).resolve(out[-1])
        runs = [Store(root).resolve(ref) for ref in
                json.loads((summary.path / "seeds.json").read_text(encoding="utf-8"))["runs"].values()]
        health = [json.loads((r.path / "metrics.json").read_text(encoding="utf-8"))["health"] for r in runs]
        assert [h["status"] for h in health] == ["not_learning", "not_learning"]  # lr 1e-9: the head stays uniform
        said = [ln.strip() for ln in out if ln.strip().startswith("health ")]
        assert said == [f"health  learned nothing in 2 of 2 seeds (seed 1: {'; '.join(health[0]['problems'])})"], out
    # kolectra artifacts show of the summary said its medians and lineage alone (a run's show says its verdict)
    assert main(["artifacts", "show", summary.id, "--out", str(root)]) == 0
    shown = [ln.strip() for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("health ")]
    assert shown == [f"health    learned nothing in 2 of 2 seeds (seed 1: {'; '.join(health[0]['problems'])})"]


# the tiny model the KorQuAD case fine-tunes (a fixture of test_finetune_e2e)
from tests.test_finetune_e2e import tiny_model  # noqa: E402, F401
