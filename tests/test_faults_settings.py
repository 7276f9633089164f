"""Settings and inputs that reached numpy, torch or tokenizers before kolectra checked them (a
traceback there): refused up front, naming the key or the file."""

from __future__ import annotations

import pytest

from kolectra.core.config import ConfigError, override
from kolectra.corpus.examples import load_tokenizer
from kolectra.model.presets import preset
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)


@pytest.mark.parametrize("sets, key", [(["seed=-1"], "seed"), ([f"seed={2**40}"], "seed"),
                                       (["train.cpu_threads=-2"], "train.cpu_threads")])
def test_settings_numpy_or_torch_would_refuse_are_refused_by_name(sets, key):
    with pytest.raises(ConfigError, match=rf"^{key}: must be"):
        override(preset("tiny"), sets).validate()
    override(preset("tiny"), ["seed=0", "train.cpu_threads=0"]).validate()  # the edges are fine


@pytest.mark.parametrize("garbage", ["{not json", "", '{"model": 5}'])
def test_a_garbled_tokenizer_is_named_by_the_examples_stage(tmp_path, garbage):
    (tmp_path / "tokenizer.json").write_text(garbage)
    with pytest.raises(ValueError, match=rf"{tmp_path / 'tokenizer.json'}: not a loadable tokenizer"):
        load_tokenizer(tmp_path)


def test_a_vocab_of_mostly_unknown_tokens_or_tiny_is_warned_and_recorded(tmp_path, capsys):
    """56 entries, the alphabet cut to 25 characters: 77 % [UNK] on the held-out split (was published silently)."""
    import json

    from kolectra.vocab.build import build
    from kolectra.vocab.config import VocabConfig
    from tests.test_vocab_corpus import small_corpus, write_corpus

    corpus = small_corpus(tmp_path / "corpus")
    (tmp_path / "bad").mkdir()
    stats = build(VocabConfig(vocab_size=56, num_unused=0, limit_alphabet=25, report_baseline=False), corpus,
                  tmp_path / "bad").stats
    warned = [line for line in capsys.readouterr().err.splitlines() if "WARNING: vocab:" in line]
    report = json.loads((tmp_path / "bad" / "report.json").read_text(encoding="utf-8"))
    assert len(warned) == 2 and "are [UNK]" in warned[0] and "only 56 entries" in warned[1]
    assert report["warnings"] == stats["warnings"] and len(report["warnings"]) == 2
    known = write_corpus(tmp_path / "known",
                         {"train": [["영화가 정말 좋았다.", "배우가 연기를 잘했다."]] * 3})
    (tmp_path / "good").mkdir()  # held-out text of known characters: no [UNK], no such warning
    stats = build(VocabConfig(vocab_size=200, num_unused=0, min_frequency=1, report_baseline=False), known,
                  tmp_path / "good").stats
    assert stats["unk_rate"] == 0.0 and not any("[UNK]" in w for w in stats["warnings"])


def test_a_step_batch_larger_than_the_examples_is_refused_with_grad_accum_too(tmp_path):
    """144 examples, train.batch_size 512: refused with grad_accum 1 ('cannot fill one batch'), but with
    grad_accum 4 the loader checked one micro-batch of 128 and every step held each example 3-4 times (k4)."""
    import dataclasses

    from kolectra.model.presets import tiny
    from kolectra.model.pretrain_inputs import PretrainInputError, read_inputs
    from tests.model_support import build_examples, build_tokenizer

    tok = build_tokenizer(tmp_path / "tok")
    examples = build_examples(tmp_path / "ex", tok, n=12, seq_len=32)
    cfg = tiny()
    for accum in (1, 4):
        big = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, batch_size=16, grad_accum=accum))
        with pytest.raises(PretrainInputError, match=r"12 examples cannot fill one step's batch of 16 \(train.batch_size, "
                                                     rf"in {accum} micro-batch\(es\)\); set train.batch_size to at most 12"):
            read_inputs(big, examples, tok)
    read_inputs(dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, batch_size=12, grad_accum=4)), examples, tok)


def test_the_batch_size_a_refusal_offers_divides_by_grad_accum(tmp_path):
    """13 examples, grad_accum 4: the refusal offered train.batch_size 13, which the config then refused as not
    divisible by train.grad_accum (m1); it offers 12. Fewer examples than grad_accum: grad_accum 1."""
    import dataclasses
    import re

    from kolectra.model.presets import tiny
    from kolectra.model.pretrain_inputs import PretrainInputError, read_inputs
    from tests.model_support import build_examples, build_tokenizer

    tok = build_tokenizer(tmp_path / "tok")
    cfg = tiny()
    for n, accum, offer in ((13, 4, "at most 12 (a multiple of train.grad_accum 4), or"),
                            (3, 4, "at most 3 and train.grad_accum to 1, or"), (13, 1, "at most 13, or")):
        examples = build_examples(tmp_path / f"ex{n}", tok, n=n, seq_len=32)
        big = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, batch_size=16, grad_accum=accum))
        with pytest.raises(PretrainInputError, match=rf"set train.batch_size to {re.escape(offer)}"):
            read_inputs(big, examples, tok)
    dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, batch_size=12, grad_accum=4)).validate()  # offered


def test_the_batch_size_a_refusal_offers_divides_by_the_launcher_s_ranks(tmp_path, monkeypatch):
    """Under torchrun's 2 ranks, 13 examples with grad_accum 4 offered 12, which start() then refused ('not
    divisible by grad_accum 4 x 2 devices'), and that refusal named no size (n2). Now 8, and start's
    refusal names the multiples next to the size. An XLA mesh's devices are unknown before it is built."""
    import dataclasses
    import re

    from kolectra.model import train
    from kolectra.model.device import Device
    from kolectra.model.presets import tiny
    from kolectra.model.pretrain_inputs import PretrainInputError, read_inputs
    from tests.model_support import build_examples, build_tokenizer

    tok = build_tokenizer(tmp_path / "tok")
    examples = build_examples(tmp_path / "ex", tok, n=13, seq_len=32)
    cfg = tiny()
    for accum, device, offer in ((4, "cpu", "at most 8 (a multiple of train.grad_accum 4 x 2 ranks), or"),
                                 (1, "cpu", "at most 12 (a multiple of 2 ranks), or"),
                                 (8, "cpu", "at most 12 (a multiple of 2 ranks) and train.grad_accum to 1, or"),
                                 (4, "xla", "at most 12 (a multiple of train.grad_accum 4; on XLA also of "
                                            "train.grad_accum x the mesh's devices), or")):
        big = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, batch_size=16, grad_accum=accum,
                                                                 device=device))
        with monkeypatch.context() as env:
            env.setenv("WORLD_SIZE", "2")
            env.setenv("RANK", "0")
            with pytest.raises(PretrainInputError, match=rf"set train.batch_size to {re.escape(offer)}"):
                read_inputs(big, examples, tok)

    class TwoRanks(Device):  # rank 0 of 2, as start() sees it (no process group needed to refuse)
        def __init__(self):
            super().__init__()
            self.world_size = 2

    for size, accum, offer in ((10, 4, "8 (a multiple of 8)"), (6, 2, "4 or 8 (a multiple of 4)"),
                               (12, 4, "8 (a multiple of 8)")):  # 16 would be more than the 13 examples
        odd = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, batch_size=size, grad_accum=accum))
        with pytest.raises(PretrainInputError, match=re.escape(f"x 2 devices (2 ranks); set train.batch_size to {offer}")):
            train.start(odd, read_inputs(odd, examples, tok), examples, tmp_path / f"out{size}", TwoRanks(), resume=False)
    many = build_examples(tmp_path / "many", tok, n=40, seq_len=32)
    odd = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, batch_size=20, grad_accum=4))
    with pytest.raises(PretrainInputError, match=re.escape("set train.batch_size to 16 or 24 (a multiple of 8)")):
        train.start(odd, read_inputs(odd, many, tok), many, tmp_path / "out", TwoRanks(), resume=False)


def test_a_batch_size_grad_accum_does_not_divide_is_refused_naming_sizes_the_ranks_divide_too(tmp_path, monkeypatch):
    """Under torchrun's 2 ranks, train.batch_size 10 with grad_accum 4 was refused naming the rule alone ('must be
    divisible by train.grad_accum (4)'), so the 12 that meets it was refused next by start() ('not divisible by
    grad_accum 4 x 2 devices') (q2). The refusal now names the sizes next to it that the ranks divide too, and the
    size it names starts; one process, or XLA (its mesh unknown yet), names multiples of grad_accum."""
    import dataclasses
    import re

    from kolectra.core.config import ConfigError
    from kolectra.model import train
    from kolectra.model.device import Device
    from kolectra.model.presets import tiny
    from kolectra.model.pretrain_inputs import read_inputs
    from tests.model_support import build_examples, build_tokenizer

    cfg = tiny()

    def sized(size, device="cpu"):
        return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, batch_size=size, grad_accum=4,
                                                                  device=device))

    with monkeypatch.context() as env:
        env.setenv("WORLD_SIZE", "2")
        env.setenv("RANK", "0")
        with pytest.raises(ConfigError, match=re.escape(
                "train.batch_size (10) must be divisible by train.grad_accum (4): set it to 8 or 16 (a multiple of "
                "train.grad_accum 4 x 2 ranks)")):  # before: '... train.grad_accum (4)', and 12 refused next
            sized(10).validate()
        with pytest.raises(ConfigError, match=re.escape("set it to 8 or 12 (a multiple of train.grad_accum 4; on XLA "
                                                        "also of train.grad_accum x the mesh's devices)")):
            sized(10, "xla").validate()
        with pytest.raises(ConfigError, match=re.escape("set it to 8 (a multiple of train.grad_accum 4 x 2 ranks)")):
            sized(6).validate()
        env.setenv("RANK", "5")  # a broken launcher environment: the launcher's own refusal comes later
        with pytest.raises(ConfigError, match=re.escape("set it to 8 or 12 (a multiple of train.grad_accum 4)")):
            sized(10).validate()
    with pytest.raises(ConfigError, match=re.escape("set it to 8 or 12 (a multiple of train.grad_accum 4)")):
        sized(10).validate()

    class TwoRanks(Device):  # rank 0 of 2, as start() sees it
        def __init__(self):
            super().__init__()
            self.world_size = 2

    tok = build_tokenizer(tmp_path / "tok")
    many = build_examples(tmp_path / "many", tok, n=40, seq_len=32)
    offered = sized(16)
    offered.validate()
    (tmp_path / "out").mkdir()
    run = train.start(offered, read_inputs(offered, many, tok), many, tmp_path / "out", TwoRanks(), resume=False)
    assert run.cfg.train.batch_size == 16
    run.loader.close()
    run.log.close()


def test_examples_too_few_for_a_row_a_micro_batch_and_rank_are_offered_grad_accum_1(tmp_path):
    """3 examples, train.batch_size 2 in grad_accum 2 under torchrun's 2 ranks: start() refused it saying only
    '3 examples cannot fill 4 rows (one a micro-batch and device): build examples from more text, or use fewer
    devices' (q2), while grad_accum 1 runs it, as read_inputs' offer says where the batch is over the examples.
    It now offers that, and the size offered starts."""
    import dataclasses
    import re

    from kolectra.model import train
    from kolectra.model.device import Device
    from kolectra.model.presets import tiny
    from kolectra.model.pretrain_inputs import PretrainInputError, read_inputs
    from tests.model_support import build_examples, build_tokenizer

    class TwoRanks(Device):  # rank 0 of 2, as start() sees it
        def __init__(self):
            super().__init__()
            self.world_size = 2

    tok = build_tokenizer(tmp_path / "tok")
    few = build_examples(tmp_path / "few", tok, n=3, seq_len=32)
    cfg = tiny()
    odd = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, batch_size=2, grad_accum=2))
    with pytest.raises(PretrainInputError, match=re.escape(
            "3 examples cannot fill 4 rows (one a micro-batch and device): set train.batch_size to at most 2 (a "
            "multiple of 2 devices) and train.grad_accum to 1, build examples from more text, or use fewer devices")):
        train.start(odd, read_inputs(odd, few, tok), few, tmp_path / "odd", TwoRanks(), resume=False)
    offered = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, batch_size=2, grad_accum=1))
    (tmp_path / "out").mkdir()
    run = train.start(offered, read_inputs(offered, few, tok), few, tmp_path / "out", TwoRanks(), resume=False)
    run.loader.close()
    run.log.close()
    one = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, batch_size=1, grad_accum=1))
    with pytest.raises(PretrainInputError, match=re.escape("set train.batch_size to 2 (a multiple of 2)")):
        train.start(one, read_inputs(one, few, tok), few, tmp_path / "one", TwoRanks(), resume=False)


def test_one_segment_embedding_for_examples_with_a_second_segment_is_refused_naming_both_ways(tmp_path):
    """model.type_vocab_size=1 on examples whose B segments are of token type 1 (the examples stage's default)
    passed every check and ended the first step with 'internal error: IndexError: index out of range in self'
    (t9); now one line naming stats.json's count, type_vocab_size=2 and single_segment_prob=1, whose examples
    (no second segment) it still takes."""
    import dataclasses
    import json

    from kolectra.model.presets import tiny
    from kolectra.model.pretrain_inputs import PretrainInputError, read_inputs
    from tests.model_support import build_examples, build_tokenizer

    tok = build_tokenizer(tmp_path / "tok")
    examples = build_examples(tmp_path / "ex", tok, n=16, seq_len=32)
    cfg = tiny()
    one = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, type_vocab_size=1),
                              train=dataclasses.replace(cfg.train, batch_size=8))
    stats = json.loads((examples / "stats.json").read_text())
    (examples / "stats.json").write_text(json.dumps({**stats, "sequences": 40, "single_segment_sequences": 4}))
    with pytest.raises(PretrainInputError, match=r"stats.json: 36 of 40 sequences have a second segment .* "
                                                 r"model.type_vocab_size=1 cannot embed; set model.type_vocab_size=2 "
                                                 r"\(ELECTRA's\), or build the examples with --set single_segment_prob=1"):
        read_inputs(one, examples, tok)
    read_inputs(dataclasses.replace(one, model=cfg.model), examples, tok)  # two segment embeddings: as before
    (examples / "stats.json").write_text(json.dumps({**stats, "sequences": 40, "single_segment_sequences": 40}))
    read_inputs(one, examples, tok)


def test_one_segment_embedding_is_refused_for_examples_that_do_not_count_their_second_segments(tmp_path):
    """An examples artifact whose stats.json has no single_segment_sequences (built before the examples stage
    counted them) passed c2587a5's check with model.type_vocab_size=1 and ended the first step with 'internal
    error: IndexError' on its B segments (w9); now one line saying the count is missing and both ways out,
    unless its manifest says single_segment_prob=1 (no second segment)."""
    import dataclasses
    import json

    from kolectra.model.presets import tiny
    from kolectra.model.pretrain_inputs import PretrainInputError, read_inputs
    from tests.model_support import build_examples, build_tokenizer

    tok = build_tokenizer(tmp_path / "tok")
    examples = build_examples(tmp_path / "ex", tok, n=16, seq_len=32)  # B segments; stats.json without the count
    assert "single_segment_sequences" not in json.loads((examples / "stats.json").read_text())
    cfg = tiny()
    one = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, type_vocab_size=1),
                              train=dataclasses.replace(cfg.train, batch_size=8))
    with pytest.raises(PretrainInputError, match=r"stats.json: no count of the sequences with a second segment "
                                                 r"\(single_segment_sequences: .*model.type_vocab_size=1 can embed "
                                                 r"them is unknown .*set model.type_vocab_size=2 .*rebuild the examples"):
        read_inputs(one, examples, tok)
    read_inputs(dataclasses.replace(one, model=cfg.model), examples, tok)  # two segment embeddings: as before
    (examples / "manifest.json").write_text(json.dumps({"config": {"single_segment_prob": 0.1}}))
    with pytest.raises(PretrainInputError, match="no count of the sequences with a second segment"):
        read_inputs(one, examples, tok)
    (examples / "manifest.json").write_text(json.dumps({"config": {"single_segment_prob": 1.0}}))
    read_inputs(one, examples, tok)  # built without a second segment: taken


def test_one_segment_embedding_is_refused_on_examples_in_a_bucket_too(bucket, tmp_path, monkeypatch):  # noqa: F811
    """On a store root the trainer fetched index.json alone before its checks, so stats.json's count was not
    there to read and model.type_vocab_size=1 still ended the first step in an IndexError (t9)."""
    import json

    from kolectra.core.stage import StageOutput
    from kolectra.model.pretrain_inputs import PretrainInputError
    from kolectra.pipeline import stages
    from kolectra.pipeline.store.factory import open_store
    from kolectra.pipeline.store.request import Request
    from tests.model_support import build_examples, small_chain
    from tests.test_faults_pretrain import SETS

    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))
    store = open_store(f"{bucket}/r")
    corpus, vocab, _ = small_chain(store)

    def examples(out):
        build_examples(out, store.local(vocab), n=16, seq_len=32)
        stats = json.loads((out / "stats.json").read_text())
        (out / "stats.json").write_text(json.dumps({**stats, "sequences": 40, "single_segment_sequences": 4}))
        return StageOutput(stats={})

    ex = store.build(Request(kind="examples", name="two", stage_version=1, config={"two": 1}, parents=(corpus, vocab)),
                     examples)
    with pytest.raises(PretrainInputError, match=r"stats.json: 36 of 40 sequences have a second segment"):
        stages.pretrain(store, ex.id, preset="tiny", sets=[*SETS, "model.type_vocab_size=1"])
