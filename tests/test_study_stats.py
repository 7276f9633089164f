"""The study's statistics: paired bootstrap intervals and the verdict's rules (pure numpy, no training)."""

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


def test_dev_overlap_counts_rows_by_id_and_texts_under_other_ids(tmp_path):
    import gzip
    import json

    from kolectra.pipeline.study.runner import Splits, dev_overlap

    dev = tmp_path / "dev.txt"
    dev.write_text("id\tdocument\tlabel\n1\t최고의  영화\t1\n2\t지루했다\t0\n3\t다시 볼 영화\t1\n", encoding="utf-8")
    (tmp_path / "corpus" / "data").mkdir(parents=True)
    docs = [{"id": "1", "text": "최고의 영화"}, {"id": "9", "text": "최고의 영화"}, {"id": "8", "text": "지루했다"},
            {"id": "7", "text": "처음 보는 글"}]
    with gzip.open(tmp_path / "corpus" / "data" / "train-00000-of-00001.jsonl.gz", "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in docs)
    splits = Splits(dev, frozenset({"1", "2", "3"}), {})
    seen = dev_overlap(tmp_path / "corpus", splits, held_out=False)
    assert seen["dev_rows_in_pretraining_corpus"] == 1  # id 1
    assert seen["dev_texts_under_other_ids"] == 2  # ids 9 and 8 carry held-out texts (whitespace aside)
    assert dev_overlap(tmp_path / "corpus", splits, held_out=True)["dev_rows_in_pretraining_corpus"] == 0


def test_the_held_out_ids_file_is_named_by_its_rows_not_by_the_readouts(tmp_path):
    """Its path is part of the examples request: studies that differ in fine-tuning seeds or readout
    sizes, but hold out the same rows, must share one examples artifact."""
    from kolectra.pipeline.study.plan import StudyPlan
    from kolectra.pipeline.study.runner import holdout_ids_file, make_splits

    nsmc = tmp_path / "train.txt"
    nsmc.write_text("id\tdocument\tlabel\n" + "".join(f"{i}\t리뷰 {i}\t{i % 2}\n" for i in range(40)), encoding="utf-8")
    cache = tmp_path / "cache"
    one = make_splits(nsmc, StudyPlan(flops=1e12, dev_rows=10, finetune_seeds=1, probe_rows=5), cache)
    three = make_splits(nsmc, StudyPlan(flops=1e12, dev_rows=10, finetune_seeds=3, probe_rows=8), cache)
    assert one.dev.parent != three.dev.parent and one.dev_ids == three.dev_ids
    assert holdout_ids_file(one) == holdout_ids_file(three)
    assert holdout_ids_file(one).read_text().split() == sorted(one.dev_ids)
    other = make_splits(nsmc, StudyPlan(flops=1e12, dev_rows=12, finetune_seeds=1, probe_rows=5), cache)
    assert holdout_ids_file(other) != holdout_ids_file(one)
