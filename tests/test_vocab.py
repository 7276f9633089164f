"""The vocab stage on a small real-Korean corpus: HF loading, id agreement, morpheme alignment,
determinism, errors. Real kiwipiepy segmentation, real HF tokenizers/transformers, no mocks."""

from __future__ import annotations

import bisect
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kolectra.core.config import ConfigError, override
from kolectra.vocab import trainer
from kolectra.vocab.build import build
from kolectra.vocab.config import VocabConfig
from kolectra.vocab.words import WordSplitter, doc_words, morph_cuts
from tests.test_vocab_corpus import small_corpus, write_corpus

ROOT = Path(__file__).resolve().parents[1]
# the test corpus runs out of pairs seen twice near 910 pieces: both recipes learn all they can
CFG = VocabConfig(vocab_size=1000, num_unused=10)
FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt", "report.json")
EXTRA_TEXTS = ["漢字와 English가 섞인 문장!", "ㅋㅋㅋ 완전 대박... 10점 만점에 10점", "Movie와 movie는 다르다",
               "처음 보는 낱말 뷁햏 [MASK] 도 있다", "  여러   칸의\t공백과\n줄바꿈  "]


def _build(cfg: VocabConfig, corpus: Path, out: Path) -> tuple[Path, dict]:
    out.mkdir(parents=True)
    result = build(cfg, corpus, out)
    return out, result.stats


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("vocab")
    corpus = small_corpus(root / "corpus")
    morph, stats = _build(CFG, corpus, root / "morph")
    plain, plain_stats = _build(override(CFG, ["recipe=wordpiece"]), corpus, root / "plain")
    return {"root": root, "corpus": corpus, "morph": morph, "stats": stats, "plain": plain, "plain_stats": plain_stats}


def _texts(corpus: Path, split: str) -> list[str]:
    from kolectra.corpus import shards
    return [d["text"] for d in shards.iter_documents(corpus, split)]


def test_directory_loads_with_autotokenizer(built):
    from transformers import AutoTokenizer

    d = built["morph"]
    assert all((d / f).is_file() for f in FILES)
    tok = AutoTokenizer.from_pretrained(d)
    assert tok.convert_ids_to_tokens([0, 1, 2, 3, 4]) == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert (tok.pad_token_id, tok.unk_token_id, tok.cls_token_id, tok.sep_token_id, tok.mask_token_id) == (0, 1, 2, 3, 4)
    assert tok.model_max_length == 512
    assert len(tok) == built["stats"]["vocab_size"] <= CFG.vocab_size
    enc = tok("영화가 좋았다", "다시 보고 싶다")
    ids, types = enc["input_ids"], enc["token_type_ids"]
    first_sep = ids.index(3)
    assert ids[0] == 2 and ids[-1] == 3 and ids.count(3) == 2
    assert types == [0] * (first_sep + 1) + [1] * (len(ids) - first_sep - 1)
    # cased, no accent stripping: Hangul stays composed (NFD would make jamo pieces)
    assert tok.decode(tok("영화가 좋았다", add_special_tokens=False)["input_ids"]) == "영화가 좋았다"
    config = json.loads((d / "tokenizer_config.json").read_text())
    import transformers
    assert hasattr(transformers, config["tokenizer_class"])
    assert config["do_lower_case"] is False and config["strip_accents"] is False


def test_same_ids_as_bert_tokenizer_built_from_vocab_txt(built, tmp_path):
    from transformers import AutoTokenizer, BertTokenizer

    d = built["morph"]
    auto = AutoTokenizer.from_pretrained(d)
    # transformers 5 spells the vocab.txt argument ``vocab`` (``vocab_file=`` is silently ignored)
    # a vocab.txt alone carries no setting: "[MASK]" in text stays text with split_special_tokens (issue 43)
    from_txt = BertTokenizer(vocab=str(d / "vocab.txt"), do_lower_case=False, strip_accents=False,
                             split_special_tokens=True)
    only_txt = tmp_path / "only_vocab_txt"
    only_txt.mkdir()
    shutil.copy(d / "vocab.txt", only_txt / "vocab.txt")
    from_dir = BertTokenizer.from_pretrained(only_txt, do_lower_case=False, strip_accents=False,
                                             split_special_tokens=True)
    assert len(from_txt) == len(from_dir) == len(auto)
    texts = _texts(built["corpus"], "valid") + _texts(built["corpus"], "train")[:20] + EXTRA_TEXTS
    for text in texts:
        want = auto(text)["input_ids"]
        assert from_txt(text)["input_ids"] == want, text
        assert from_dir(text)["input_ids"] == want, text
    assert any(1 not in auto(t)["input_ids"] and len(auto(t)["input_ids"]) > 5 for t in texts)


def test_decomposed_hangul_gets_the_ids_of_the_composed(built):
    # the corpus is NFC, so every piece is composed Hangul; text given in NFD (macOS files) was all
    # [UNK] to the tokenizer, and transformers 5's BertTokenizer class rebuilt a normaliser without NFC
    import unicodedata

    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    from kolectra.vocab.export import text_only

    for d in (built["morph"], built["plain"]):
        auto, raw = AutoTokenizer.from_pretrained(d), text_only(Tokenizer.from_file(str(d / "tokenizer.json")))
        texts = _texts(built["corpus"], "valid") + EXTRA_TEXTS
        assert any(unicodedata.normalize("NFD", t) != t for t in texts)
        for text in texts:
            nfd, want = unicodedata.normalize("NFD", text), auto(text)["input_ids"]
            assert auto(nfd)["input_ids"] == want, text
            assert raw.encode(nfd).ids == raw.encode(text).ids == want, text
        # NFC, never NFKC: full-width letters are not folded (the corpus stage rules on widths)
        assert raw.normalizer.normalize_str("ＡＢＣ ｶ ㈜ ﬁ") == "ＡＢＣ ｶ ㈜ ﬁ"


def test_vocab_has_no_junk_entries(built):
    for d in (built["morph"], built["plain"]):
        lines = (d / "vocab.txt").read_text(encoding="utf-8").split("\n")
        assert lines[-1] == ""
        vocab = lines[:-1]
        assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        assert vocab[5:15] == [f"[unused{i}]" for i in range(10)]
        assert len(vocab) == len(set(vocab))
        for tok in vocab:
            assert tok and tok.strip() == tok and not any(ch.isspace() for ch in tok), repr(tok)
            assert tok != "##" and not tok.startswith("###"), tok
        tj = json.loads((d / "tokenizer.json").read_text(encoding="utf-8"))
        assert tj["model"]["vocab"] == {t: i for i, t in enumerate(vocab)}
        nfc, bert = tj["normalizer"]["normalizers"]
        assert nfc == {"type": "NFC"} and bert["lowercase"] is False and bert["strip_accents"] is False


def test_trainer_never_merges_across_a_morpheme_boundary():
    # 가나|다 (a cut after two syllables). Ties break by text, so plain WordPiece's first merge is
    # ##나+##다, which straddles the cut; the constrained learner merges 가+##나 first instead.
    initial = ["가", "##나", "##다"]

    def learn(table, **kw):
        return trainer.learn_pieces(table, budget=10, initial=initial, min_frequency=2, **kw)[0]

    table = {("가나다", (2,)): 10}
    assert learn(table, respect_morphs=False) == ["##나다", "가나다"]
    assert learn(table, respect_morphs=True, cross_morph="prefix") == ["가나", "가나다"]  # whole-morph run
    assert learn(table, respect_morphs=True, cross_morph="any") == ["가나", "가나다"]
    assert learn(table, respect_morphs=True, cross_morph="none") == ["가나"]
    # 가|나|다: a run of whole morphemes inside the word (##나다) only with "any"
    table = {("가나다", (1, 2)): 10}
    assert learn(table, respect_morphs=True, cross_morph="any") == ["##나다", "가나다"]
    assert learn(table, respect_morphs=True, cross_morph="prefix") == ["가나", "가나다"]
    assert learn(table, respect_morphs=True, cross_morph="none") == []
    # min_frequency stops merging; the budget counts the alphabet (room for exactly one piece)
    assert trainer.learn_pieces(table, respect_morphs=False, budget=10, initial=initial, min_frequency=11)[0] == []
    # a pair seen exactly min_frequency times is still learned (min_frequency is a floor, not a bar to pass)
    assert trainer.learn_pieces(table, respect_morphs=False, budget=10, initial=initial, min_frequency=10)[0] != []
    assert trainer.learn_pieces(table, respect_morphs=False, budget=4, initial=initial, min_frequency=1)[0] == ["##나다"]
    # a word the alphabet cannot spell is left out and counted
    pieces, stats = trainer.learn_pieces({("가라", ()): 5}, respect_morphs=False, budget=10, initial=initial,
                                         min_frequency=1)
    assert pieces == [] and stats["words_outside_alphabet"] == 5


def test_words_the_runtime_makes_unk_do_not_vote_for_pieces():
    # the runtime WordPiece makes a word of more than 100 characters one [UNK]; learned from, one
    # review of 120 hearts gave ##♥♥, ##♥♥♥♥, ... up to 64 hearts (its pairs alone pass min_frequency)
    from kolectra.vocab.build import learn_vocab
    from kolectra.vocab.export import MAX_INPUT_CHARS_PER_WORD, make_tokenizer

    table = {("영화", (1,)): 3, ("좋다", ()): 3, ("♥" * 120, ()): 1, ("♥♥", ()): 1}
    cfg = VocabConfig(vocab_size=40, num_unused=0, min_frequency=2)
    vocab, stats = learn_vocab(cfg, table, "wordpiece", show_progress=False)
    assert not [t for t in vocab if "♥♥" in t], vocab
    assert "영화" in vocab and "좋다" in vocab and "♥" in vocab and "##♥" in vocab  # its characters stay
    assert stats["words_too_long"] == 1 and stats["train_word_types"] == 3
    assert make_tokenizer(vocab).encode("♥" * 120, add_special_tokens=False).tokens == ["[UNK]"]
    assert make_tokenizer(vocab).encode("♥" * MAX_INPUT_CHARS_PER_WORD, add_special_tokens=False).tokens != ["[UNK]"]


def _boundary_share(tok_dir: Path, corpus: Path, split: str) -> float:
    """Independent recount of report.json's morph_boundary_share with the transformers tokenizer."""
    from transformers import AutoTokenizer

    from kolectra.corpus import shards
    tok = AutoTokenizer.from_pretrained(tok_dir)
    cuts = on = 0
    for doc in shards.iter_documents(corpus, split):
        bounds = morph_cuts(doc)
        enc = tok(doc["text"], add_special_tokens=False, return_offsets_mapping=True)
        words = enc.word_ids()
        for k in range(1, len(words)):
            if words[k] == words[k - 1]:
                cuts += 1
                at = enc["offset_mapping"][k][0]
                j = bisect.bisect_left(bounds, at)
                on += j < len(bounds) and bounds[j] == at
    return on / cuts


def test_morph_recipe_cuts_words_on_morpheme_boundaries_more_often(built):
    report = json.loads((built["morph"] / "report.json").read_text(encoding="utf-8"))
    assert report["split"] == "valid" and report["chosen"] == "morph_wordpiece"
    morph, base = report["recipes"]["morph_wordpiece"], report["recipes"]["wordpiece"]
    share_morph = _boundary_share(built["morph"], built["corpus"], "valid")
    share_plain = _boundary_share(built["plain"], built["corpus"], "valid")
    assert morph["morph_boundary_share"] == pytest.approx(share_morph, abs=1e-4)
    assert base["morph_boundary_share"] == pytest.approx(share_plain, abs=1e-4)  # the in-run baseline
    assert share_morph > share_plain + 0.02, (share_morph, share_plain)
    # the same holds on the training documents, and pieces confined to single morphemes go further
    train_morph = _boundary_share(built["morph"], built["corpus"], "train")
    assert train_morph > _boundary_share(built["plain"], built["corpus"], "train") + 0.02
    inside, _ = _build(override(CFG, ["cross_morph=none", "report_baseline=false"]), built["corpus"],
                       built["root"] / "inside")
    assert _boundary_share(inside, built["corpus"], "train") > train_morph + 0.05
    for fig in (morph, base):
        assert 0 <= fig["unk_rate"] < 0.15  # a tiny corpus: the valid split has unseen syllables
        assert fig["tokens_per_eojeol"] >= 1.0 and fig["chars_per_token"] >= 1.0
        assert 0 < fig["words_kept_whole"] <= 1
        assert fig["most_fragmented"] and all(len(r["pieces"]) >= 1 for r in fig["most_fragmented"])
    assert built["stats"]["morph_boundary_share"] == morph["morph_boundary_share"]
    from kolectra.vocab.table import format_report
    table = format_report(report)
    assert "morph_wordpiece" in table and "wordpiece" in table
    assert f"{morph['morph_boundary_share']:.1%}" in table and f"{base['morph_boundary_share']:.1%}" in table
    assert built["stats"]["recipe"] == "morph_wordpiece"


def test_same_corpus_and_config_give_identical_files(built, tmp_path):
    # a fresh interpreter with another hash seed: set/dict iteration order cannot leak into the output
    out = tmp_path / "again"
    out.mkdir()
    code = ("import sys; from pathlib import Path; from vocab.build import build; from vocab.config import VocabConfig;"
            f"build(VocabConfig(vocab_size={CFG.vocab_size}, num_unused={CFG.num_unused}), Path(sys.argv[1]), Path(sys.argv[2]))")
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code, str(built["corpus"]), str(out)], check=True, env=env, cwd=ROOT,
                   capture_output=True)
    for f in FILES:
        assert (out / f).read_bytes() == (built["morph"] / f).read_bytes(), f


def test_baseline_learned_in_a_second_process_gives_the_same_files(built, tmp_path, monkeypatch):
    from kolectra.vocab import build as stage
    from tests.test_vocab_count import record_beside

    monkeypatch.setattr(stage, "SIDE_BY_SIDE_MIN_WORD_TYPES", 0)  # the test corpus is small
    monkeypatch.setattr(stage, "_cpus", lambda: 2)
    started = record_beside(monkeypatch)
    out, stats = _build(CFG, built["corpus"], tmp_path / "beside")
    assert len(started) == 1 and started[0] != os.getpid()  # the baseline really ran elsewhere
    for f in FILES:
        assert (out / f).read_bytes() == (built["morph"] / f).read_bytes(), f
    assert stats == {**built["stats"], "build_seconds": stats["build_seconds"]}


SCRIPT = """
from pathlib import Path
import sys
from kolectra.vocab import build as stage
from kolectra.vocab.config import VocabConfig
with open(sys.argv[3], "a") as f:  # a side effect of running this script
    f.write("ran\\n")
stage.SIDE_BY_SIDE_MIN_WORD_TYPES, stage._cpus = 0, lambda: 2
stage.build(VocabConfig(vocab_size={size}, num_unused={unused}), Path(sys.argv[1]), Path(sys.argv[2]))
"""


def test_a_script_without_a_main_guard_runs_once(built, tmp_path):
    # multiprocessing's spawn would import the script again in the second process
    script, out, ran = tmp_path / "build_vocab.py", tmp_path / "out", tmp_path / "ran.txt"
    script.write_text(SCRIPT.format(size=CFG.vocab_size, unused=CFG.num_unused), encoding="utf-8")
    out.mkdir()
    subprocess.run([sys.executable, str(script), str(built["corpus"]), str(out), str(ran)], check=True,
                   cwd=tmp_path, capture_output=True, timeout=300)
    assert ran.read_text().splitlines() == ["ran"]
    for f in FILES:
        assert (out / f).read_bytes() == (built["morph"] / f).read_bytes(), f


def test_a_second_process_that_dies_or_fails_is_handled(built, capsys):
    from kolectra.vocab import words
    from kolectra.vocab.beside import Beside
    from kolectra.vocab.build import learn_vocab

    table, _ = words.count_words(words.iter_docs(built["corpus"], "train"))
    alone = learn_vocab(CFG, table, "wordpiece", show_progress=False)
    killed = Beside("learning wordpiece", learn_vocab, CFG, table, "wordpiece", show_progress=False)
    killed.process.kill()  # as the kernel's OOM killer would
    (vocab, stats), _ = killed.result()
    assert (vocab, stats) == alone  # learned here instead
    assert "learning wordpiece died (exit code -9)" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="vocab_size=200 is too small"):  # raised there, raised here
        Beside("learning", learn_vocab, override(CFG, ["vocab_size=200"]), table, "wordpiece").result()


def test_clear_errors(built, tmp_path):
    with pytest.raises(ConfigError, match="recipe"):
        override(CFG, ["recipe=bpe"])
    with pytest.raises(ConfigError, match="too small"):
        _build(VocabConfig(vocab_size=100), built["corpus"], tmp_path / "small")
    empty = tmp_path / "empty"
    (empty / "data").mkdir(parents=True)
    with pytest.raises(ValueError, match="no train documents"):
        _build(CFG, empty, tmp_path / "o1")
    bad = write_corpus(tmp_path / "bad", {"train": [["좋은 영화였다."]]})
    path = bad / "data" / "train-00000-of-00001.jsonl.gz"
    import gzip
    with gzip.open(path, "rt", encoding="utf-8") as f:
        doc = json.loads(f.readline())
    del doc["morphs"]
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(json.dumps(doc, ensure_ascii=False) + "\n")
    with pytest.raises(ValueError, match="train-0.*morphs"):
        _build(CFG, bad, tmp_path / "o2")


def test_report_falls_back_to_train_without_valid_split(tmp_path):
    corpus = write_corpus(tmp_path / "c", {"train": [["영화가 정말 좋았다.", "배우가 연기를 잘했다."]] * 3})
    _, stats = _build(VocabConfig(vocab_size=200, num_unused=0, min_frequency=1), corpus, tmp_path / "o")
    assert stats["report_split"] == "train" and stats["unk_rate"] == 0.0


def test_a_corpus_too_small_for_vocab_size_says_so(tmp_path, capsys):
    """vocab_size is a ceiling: a one-document corpus asked for 64,000 learned 131 entries and said nothing of
    the 63,869 it could not learn (k4); 128,000 on the 4,000-review sample gave 9,891 just as quietly."""
    corpus = write_corpus(tmp_path / "c", {"train": [["영화가 정말 좋았다.", "배우가 연기를 잘했다."]] * 3})
    _, stats = _build(VocabConfig(vocab_size=64_000, num_unused=0, report_baseline=False), corpus, tmp_path / "o")
    err = capsys.readouterr().err
    assert (f"vocab: morph_wordpiece learned {stats['vocab_size']:,} entries, fewer than vocab_size=64,000: the corpus "
            "has no more (no pair it may merge occurs min_frequency=2 times or more in its words)") in err
    _build(VocabConfig(vocab_size=stats["vocab_size"], num_unused=0, report_baseline=False), corpus, tmp_path / "o2")
    assert "fewer than vocab_size" not in capsys.readouterr().err  # reached: nothing to say


def test_a_words_cuts_are_inside_it_never_at_its_ends():
    # a word type's cuts are offsets 0 < cut < len (vocab/words.py): a morpheme starting the word
    # or ending it gives no cut, or the same word would be counted under two keys
    doc = {"id": "d", "text": "영화를 봤다", "morphs": [[0, 2, "NNG"], [2, 3, "JKO"], [4, 6, "VV+EF"]]}
    assert doc_words(doc, WordSplitter()) == ([("영화를", (2,)), ("봤다", ())], 0)


def test_the_table_printed_into_a_closed_pipe_ends_quietly(tmp_path):
    """`python -m kolectra.vocab.table DIR | head -1` (docs/vocab.md): a reader that stops early left a
    BrokenPipeError traceback, where every kolectra command ends quietly (m4)."""
    fig = {"learning": {"vocab_size": 100}, "unk_rate": 0.0, "tokens_per_eojeol": 2.0, "chars_per_token": 1.5,
           "morph_boundary_share": 0.7, "words_kept_whole": 0.5,
           "most_fragmented": [{"word": "가나", "count": 2, "pieces": ["가", "##나"]}]}
    (tmp_path / "report.json").write_text(json.dumps({"chosen": "wordpiece", "split": "valid", "recipes": {"wordpiece": fig}}))
    p = subprocess.Popen([sys.executable, "-m", "kolectra.vocab.table", str(tmp_path)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=ROOT)
    p.stdout.close()  # the reader is gone before the table is written
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 0 and "Traceback" not in err, err
