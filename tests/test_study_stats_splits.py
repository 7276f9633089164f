"""The study's splits (moved as they were from tests/test_study_stats.py): the held-out rows and the readouts'
training rows drawn from the NSMC file (a text's rows stay on one side, a text held out as often whatever its
count, as seeded as before), the held-out ids file named by its rows, split files another study may be reading
left as they were, row counts below one refused, and the held-out rows looked for in the pretraining corpus."""


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


def test_dev_overlap_matches_held_out_texts_as_the_reports_eval_overlap_does(tmp_path):
    """The held-out texts were compared with whole documents after NFC and folded spaces alone, where kolectra report's
    eval overlap (pipeline/overlap.py) puts them through the corpus's own text rules and matches a document's lines
    too: a full-width ＯＳＴ, a zero-width space, ㅋㅋㅋㅋㅋ in a max_repeat=2 corpus (which holds ㅋㅋ) and a review that is
    one line of a longer document went uncounted: 2 of the 6 were found (the NFD one, and the document of two lines
    whole). All 6 now (h4)."""
    import gzip
    import json
    import unicodedata

    from kolectra.corpus import text as text_rules
    from kolectra.pipeline.study.runner import Splits, dev_overlap

    rules = {"strip_html": False, "mask_pii": False, "max_repeat": 2, "language": "ko"}
    held = ["ＯＳＴ가 너무 좋다", "배우 연기\u200b 최고", "ㅋㅋㅋㅋㅋ 이 영화 재밌다", unicodedata.normalize("NFD", "감동적인 영화"),
            "결말이 아쉽다", "두 번 봤어요"]
    corpus_docs = ["OST가 너무 좋다", "배우 연기 최고", "ㅋㅋ 이 영화 재밌다", "감동적인 영화", "첫 줄\n결말이 아쉽다\n끝 줄",
                   "두 번\n봤어요", "처음 보는 글"]
    dev = tmp_path / "dev.txt"
    dev.write_text("id\tdocument\tlabel\n" + "".join(f"{i}\t{t}\t1\n" for i, t in enumerate(held)), encoding="utf-8")
    (tmp_path / "corpus" / "data").mkdir(parents=True)
    with gzip.open(tmp_path / "corpus" / "data" / "train-00000-of-00001.jsonl.gz", "wt", encoding="utf-8") as f:
        for i, d in enumerate(corpus_docs):  # as the corpus stage holds them: its own rules applied
            cleaned = text_rules.clean(d, **rules)
            assert cleaned == d
            f.write(json.dumps({"id": f"c{i}", "text": cleaned}, ensure_ascii=False) + "\n")
    splits = Splits(dev, frozenset(str(i) for i in range(len(held))), {})
    seen = dev_overlap(tmp_path / "corpus", splits, held_out=True, rules=rules)
    assert seen["dev_texts_under_other_ids"] == 6 and seen["dev_rows_in_pretraining_corpus"] == 0
    # the corpus's rules, not the defaults: without max_repeat the ㅋㅋㅋㅋㅋ review is another text
    assert dev_overlap(tmp_path / "corpus", splits, held_out=True)["dev_texts_under_other_ids"] == 5


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


def test_split_files_another_study_may_be_reading_are_not_rewritten(tmp_path):
    """Two study processes may share a root (docs/studies.md): one starting must not truncate and rewrite
    the held-out rows, a readout's rows or the holdout list while the other reads them."""
    import os

    from kolectra.pipeline.study.plan import StudyPlan
    from kolectra.pipeline.study.runner import holdout_ids_file, make_splits

    nsmc = tmp_path / "train.txt"
    nsmc.write_text("id\tdocument\tlabel\n" + "".join(f"{i}\t리뷰 {i}\t{i % 2}\n" for i in range(40)), encoding="utf-8")
    plan = StudyPlan(flops=1e12, dev_rows=10, finetune_seeds=2, probe_rows=5)
    first = make_splits(nsmc, plan, tmp_path / "cache")
    files = [first.dev, *first.train["probe"], *first.train["lowdata"], holdout_ids_file(first)]
    before = {f: f.read_bytes() for f in files}
    for f in files:
        os.utime(f, ns=(0, 0))
    again = make_splits(nsmc, plan, tmp_path / "cache")
    assert holdout_ids_file(again) == files[-1]
    assert {f: f.stat().st_mtime_ns for f in files} == {f: 0 for f in files}  # left as they were
    files[0].write_text("damaged", encoding="utf-8")
    make_splits(nsmc, plan, tmp_path / "cache")
    assert {f: f.read_bytes() for f in files} == before  # another content is replaced whole
    assert not [p for p in (tmp_path / "cache").rglob("*.part")]


def test_row_counts_below_one_are_refused_before_anything_is_built():
    """``--dev-rows -5`` held out every row but the last 5 (a slice from the end), silently."""
    import pytest

    from kolectra.core.config import ConfigError
    from kolectra.pipeline.study.plan import StudyPlan

    for key, flag in (("dev_rows", "--dev-rows"), ("probe_rows", "--probe-rows"), ("lowdata_rows", "--lowdata-rows"),
                      ("finetune_rows", "--finetune-rows")):
        for n in (0, -5):
            with pytest.raises(ConfigError, match=f"{flag} must be >= 1, got {n}"):
                StudyPlan(flops=1e12, **{key: n}).validate()


def _duplicated_nsmc(path):
    """80 rows: '굿' 25 times, '최고' 6 times (twice decomposed, NFD, once with stray spaces), 49 other texts."""
    import unicodedata

    texts = ["굿"] * 25 + ["최고"] * 3 + [unicodedata.normalize("NFD", "최고")] * 2 + [" 최고  "]
    texts += [f"리뷰 {i}" for i in range(49)]
    path.write_text("id\tdocument\tlabel\n" + "".join(f"{i}\t{t}\t{i % 2}\n" for i, t in enumerate(texts)),
                    encoding="utf-8")
    return path


def _texts(path):
    import unicodedata

    lines = path.read_text(encoding="utf-8").split("\n")[1:]
    return [" ".join(unicodedata.normalize("NFC", ln.split("\t")[1]).split()) for ln in lines if ln.strip()]


def test_no_held_out_text_occurs_in_a_readouts_training_rows(tmp_path):
    """Drawn one row at a time, a repeated review ('굿') landed on both sides: 1-2 of the embedded sample's 300
    held-out rows were in each readout's training file. Rows of one text (after NFC, spaces folded) now stay
    on one side, the split is as seeded as before, and what the grouping did is counted."""
    from kolectra.pipeline.study.plan import StudyPlan
    from kolectra.pipeline.study.runner import make_splits

    nsmc = _duplicated_nsmc(tmp_path / "train.txt")
    for seed in range(4):
        plan = StudyPlan(flops=1e12, dev_rows=20, finetune_seeds=3, probe_rows=30, lowdata_rows=40, seed=seed,
                         readouts=("probe", "lowdata"))
        splits = make_splits(nsmc, plan, tmp_path / f"cache{seed}")
        dev = _texts(splits.dev)
        for files in splits.train.values():
            for f in files:
                assert not set(dev) & set(_texts(f)), (seed, f.name)
        assert len(dev) == 20 and "굿" not in dev  # 25 copies cannot fit in 20 rows: all train
        g = splits.grouping
        assert g["rows"] == 80 and g["repeated_rows"] == 24 + 5 and g["dev_texts_in_training_rows"] == 0
        # '굿' is counted when its turn came before the held-out rows were full (the texts are shuffled: study 10)
        assert g["texts_too_frequent_for_dev"] in (0, 1) and g["dev_texts"] == len(set(dev))
        assert g["dev_rows_repeating_a_dev_text"] == len(dev) - len(set(dev))
        assert dev.count("최고") in (0, 6)  # its NFD and spaced spellings go with it
        again = make_splits(nsmc, plan, tmp_path / f"again{seed}")  # deterministic: the same bytes
        assert again.dev.read_bytes() == splits.dev.read_bytes() and again.grouping == g
        assert [f.read_bytes() for f in again.train["lowdata"]] == [f.read_bytes() for f in splits.train["lowdata"]]


def test_a_file_without_repeated_texts_splits_as_before(tmp_path):
    """Grouping by text changes nothing where every text is its own: the seed's first dev_rows rows are held out."""
    import random

    from kolectra.pipeline.study.plan import StudyPlan
    from kolectra.pipeline.study.runner import make_splits

    nsmc = tmp_path / "train.txt"
    nsmc.write_text("id\tdocument\tlabel\n" + "".join(f"{i}\t리뷰 {i}\t{i % 2}\n" for i in range(40)), encoding="utf-8")
    splits = make_splits(nsmc, StudyPlan(flops=1e12, dev_rows=10, finetune_seeds=1, probe_rows=5, seed=3), tmp_path)
    order = list(range(40))
    random.Random(3).shuffle(order)
    assert splits.dev_ids == frozenset(str(i) for i in order[:10])
    assert splits.grouping["repeated_rows"] == 0 and splits.grouping["dev_rows_repeating_a_dev_text"] == 0


def test_a_text_is_held_out_as_often_whatever_its_count(tmp_path):
    """Study 9 shuffled the rows and let a text's first row decide its side, so a text of k rows was held out
    k times as often, whole: on NSMC's train file at --dev-rows 5000, '굿''s 191 rows were held out with each of
    seeds 0-3, and 25-30 % of the held-out rows were rows of a text the file repeats (3.3 % of the file's rows).
    The texts are shuffled now: a text of 10 rows is held out about as often as one of a single row."""
    from kolectra.pipeline.study.plan import StudyPlan
    from kolectra.pipeline.study.runner import make_splits

    nsmc = tmp_path / "train.txt"  # '굿' 10 times (5 % of the rows), 190 texts once
    texts = ["굿"] * 10 + [f"리뷰 {i}" for i in range(190)]
    nsmc.write_text("id\tdocument\tlabel\n" + "".join(f"{i}\t{t}\t{i % 2}\n" for i, t in enumerate(texts)),
                    encoding="utf-8")
    held = 0
    for seed in range(60):
        splits = make_splits(nsmc, StudyPlan(flops=1e12, dev_rows=40, finetune_seeds=1, probe_rows=20, seed=seed,
                                             readouts=("probe",)), tmp_path / "cache")
        dev = _texts(splits.dev)
        assert len(dev) == 40 and dev.count("굿") in (0, 10)
        held += dev.count("굿") > 0
    # each of the 191 texts has about a 40/191 = 21 % chance: 12.6 of 60 seeds (study 9: 45 of 60)
    assert 5 <= held <= 22, held
