"""The study's held-out split keeps rows of one text on one side, "one text" read as the eval-overlap check reads it
(pipeline/overlap.same_text: the corpus's own text rules). Grouped by NFC and folded spaces alone (study 14 before
h11), a full-width ＯＳＴ and OST, a review with a zero-width space and the same without, and ㅋㅋㅋㅋㅋ beside ㅋㅋ in a
corpus of max_repeat=2 were other texts: one row could be held out and its twin trained on by a readout, and
the study's dev_overlap (which does read them as one text) then counted the held-out text as found elsewhere."""

from __future__ import annotations

import pytest

from kolectra.core.config import ConfigError
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.request import Request
from kolectra.pipeline.study.plan import StudyPlan
from kolectra.pipeline.study.runner import make_splits, run_study

PAIRS = 12  # of each kind: drawn text by text, about half of the twins landed on both sides


def _nsmc(path, kinds=("width", "invisible", "repeat")):
    """Twin rows (ids a{k}{i} and b{k}{i}) that differ only as ``kinds`` say, among 60 texts of their own."""
    twins = {"width": ("ＯＳＴ가 좋다 {i}", "OST가 좋다 {i}"), "invisible": ("연기\u200b 최고 {i}", "연기 최고 {i}"),
             "repeat": ("ㅋㅋㅋㅋㅋ 재밌다 {i}", "ㅋㅋ 재밌다 {i}")}
    rows = []
    for k in kinds:
        a, b = twins[k]
        rows += [(f"a{k}{i}", a.format(i=i)) for i in range(PAIRS)] + [(f"b{k}{i}", b.format(i=i)) for i in range(PAIRS)]
    rows += [(f"x{i}", f"다른 리뷰 {i}") for i in range(60)]
    path.write_text("id\tdocument\tlabel\n" + "".join(f"{i}\t{t}\t{n % 2}\n" for n, (i, t) in enumerate(rows)),
                    encoding="utf-8")
    return path


def _split_twins(dev_ids, kinds) -> list[str]:
    """The twins one of which is held out and the other not."""
    return [f"{k}{i}" for k in kinds for i in range(PAIRS) if (f"a{k}{i}" in dev_ids) != (f"b{k}{i}" in dev_ids)]


def _ids(path) -> set[str]:
    return {ln.split("\t")[0] for ln in path.read_text(encoding="utf-8").split("\n")[1:] if ln.strip()}


def test_rows_differing_only_in_width_or_invisible_characters_stay_on_one_side(tmp_path):
    """Before: of 12 full-width/ASCII and 12 zero-width-space twins, several were split at every seed."""
    kinds = ("width", "invisible")
    nsmc = _nsmc(tmp_path / "train.txt", kinds)
    for seed in range(3):
        plan = StudyPlan(flops=1e12, dev_rows=54, finetune_seeds=2, probe_rows=40, lowdata_rows=50, seed=seed,
                         readouts=("probe", "lowdata"))
        splits = make_splits(nsmc, plan, tmp_path / f"cache{seed}")
        assert _split_twins(splits.dev_ids, kinds) == [], seed
        assert _ids(splits.dev) == splits.dev_ids
        for files in splits.train.values():  # no readout trains on a held-out row's twin
            for f in files:
                trained = _ids(f)
                assert not {i[1:] for i in trained} & {i[1:] for i in splits.dev_ids if i[0] in "ab"}, (seed, f.name)
        g = splits.grouping
        assert g["rows"] == 108 and g["repeated_rows"] == 24 and g["dev_texts_in_training_rows"] == 0


def test_the_corpus_s_own_rules_group_the_rows_repeats_it_shortens(tmp_path):
    """ㅋㅋㅋㅋㅋ and ㅋㅋ are one text in a corpus of max_repeat=2, two in one without: the rules given group them."""
    nsmc = _nsmc(tmp_path / "train.txt", ("repeat",))
    plan = StudyPlan(flops=1e12, dev_rows=42, finetune_seeds=1, probe_rows=20, seed=1, readouts=("probe",))
    shortened = {"strip_html": False, "mask_pii": False, "max_repeat": 2, "language": "ko"}
    grouped = make_splits(nsmc, plan, tmp_path / "cache", rules=shortened)
    assert _split_twins(grouped.dev_ids, ("repeat",)) == [] and grouped.grouping["repeated_rows"] == PAIRS
    apart = make_splits(nsmc, plan, tmp_path / "cache")  # the default rules keep every run of ㅋ
    assert apart.grouping["repeated_rows"] == 0
    assert apart.dev.parent != grouped.dev.parent  # other rules, other rows: files of their own
    from kolectra.pipeline.study.report import split_text

    assert split_text(grouped.grouping).startswith("Rows of one text (the same after the corpus's text rules: NFC, width, "
                                                   "invisible characters, spaces, repeats it shortens) stay on one side")


def _chain(store, config: dict):
    """corpus (of ``config``'s text rules) -> vocab -> examples, as tests/model_support.small_chain builds them."""
    from kolectra.core.stage import StageOutput
    from tests.model_support import build_examples, build_tokenizer

    def writes(fn):
        def produce(out):
            fn(out)
            return StageOutput(stats={})
        return produce

    corpus = store.build(Request(kind="corpus", name="c", stage_version=1, config=config),
                         writes(lambda out: (out / "stats.json").write_text("{}")))
    vocab = store.build(Request(kind="vocab", name="v", stage_version=1, config={}, parents=(corpus,)),
                        writes(build_tokenizer))
    return store.build(Request(kind="examples", name="e", stage_version=1, config={}, parents=(corpus, vocab)),
                       writes(lambda out: build_examples(out, store.local(vocab), n=64, seq_len=32, shard_size=50)))


def test_a_study_groups_its_held_out_rows_by_its_pretraining_corpus_s_text_rules(tmp_path):
    """run_study reads the rules of the corpus its examples came from before it carves the rows: before, ㅋㅋㅋㅋㅋ and
    ㅋㅋ twins landed on both sides of a study on a max_repeat=2 corpus (which dev_overlap then matched as one)."""
    store = Store(tmp_path / "store")
    examples = _chain(store, {"max_repeat": 2})
    plan = StudyPlan(flops=1e7, points=1, preset="tiny", arms=("electra",), pretrain_seeds=1, finetune_seeds=1,
                     readouts=("probe",), dev_rows=42, probe_rows=20, bootstrap=50)
    nsmc = _nsmc(tmp_path / "train.txt", ("repeat",))
    with pytest.raises(ConfigError, match="more than twice the smallest budget"):  # after the split, before training
        run_study(store, plan, nsmc, examples_ref=examples.id)
    [dev] = (store.root / ".cache").glob("nsmc-study-*/dev.txt")
    assert _split_twins(_ids(dev), ("repeat",)) == []
