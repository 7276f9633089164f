"""Text that spells a special token stays text, in every stage (issue 43).

A review saying "[PAD]" or "[MASK]" used to become that token: the tokenizers matched their added
special tokens inside raw text, so examples held [MASK] inside text and [PAD] mid-row and
pretraining died; fine-tuning made a fake segment boundary from "[SEP]" in a sentence and an NER
token "[PAD]" became padding. Here one real chain (corpus on raw text -> vocab -> examples ->
pretrain, tiny) carries such reviews through, and the fine-tuning encoders of every task family
read such text through the loader they use.
"""

from __future__ import annotations

import io
import json

import pytest
import sentencepiece

from kolectra.core.tokens import SPECIAL_IDS, SPECIALS
from kolectra.pipeline import stages
from kolectra.pipeline.store.artifacts import Store
from tests.test_examples import _load
from tests.test_vocab_corpus import korean_sentences

SPELLED = "리뷰에 [PAD] 와 [MASK] 그리고 [SEP] [CLS] [UNK] 가 적혀 있다"
CODE_ONLY = {SPECIAL_IDS[t] for t in ("[PAD]", "[CLS]", "[SEP]", "[MASK]")}  # [UNK] may come from text
PRETRAIN = ["train.batch_size=4", "train.warmup_steps=1", "train.log_every=1",
            "train.cpu_threads=1"]


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    root = tmp_path_factory.mktemp("text-tokens")
    texts = [" ".join(korean_sentences(60, seed=3)[i:i + 3]) for i in range(0, 60, 3)]
    texts = [f"{t} {SPELLED}" if i % 2 else t for i, t in enumerate(texts)]
    texts += ["[PAD]", "[MASK] [MASK] 영화 [SEP] 좋다"]
    raw = root / "raw.jsonl"
    raw.write_text("".join(json.dumps({"id": f"r{i}", "text": t}, ensure_ascii=False) + "\n"
                           for i, t in enumerate(texts)), encoding="utf-8")
    store = Store(root / "root")
    corpus = stages.corpus(store, [str(raw)], sets=["min_chars=1"])
    vocab = stages.vocab(store, corpus, sets=["vocab_size=1000", "report_baseline=false"])
    examples = stages.examples(store, corpus, vocab, sets=["max_seq_length=32"])
    return {"store": store, "corpus": corpus, "vocab": vocab, "examples": examples}


def _text_ids(ids: list[int]) -> set[int]:
    return set(ids) & CODE_ONLY


def test_the_vocab_artifact_spells_specials_out_for_transformers_tokenizers_and_the_report(chain):
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    from kolectra.vocab.export import make_tokenizer, text_only

    d = chain["store"].local(chain["vocab"])
    tok = AutoTokenizer.from_pretrained(str(d))  # a Hugging Face user's load: tokenizer_config.json says it
    enc = tok(SPELLED, "[SEP] 둘째")
    assert enc["input_ids"][0] == 2 and enc["input_ids"][-1] == 3 and enc["input_ids"].count(3) == 2
    assert not _text_ids(enc["input_ids"][1:-1]) - {3} and enc["input_ids"][1:-1].count(3) == 1
    assert "[" in tok.convert_ids_to_tokens(enc["input_ids"])
    raw = text_only(Tokenizer.from_file(str(d / "tokenizer.json")))
    assert not _text_ids(raw.encode(SPELLED, add_special_tokens=False).ids)
    vocab = (d / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    report = make_tokenizer(vocab)  # what report.json's figures are measured with
    assert not _text_ids(report.encode(SPELLED, add_special_tokens=False).ids)
    assert tok.decode(tok("[MASK] 영화")["input_ids"], skip_special_tokens=True) == "[ MASK ] 영화"


@pytest.mark.parametrize("recipe", ["sp_unigram", "sp_bpe"])
@pytest.mark.parametrize("sentences", ["korean", "with_brackets"])
def test_sentencepiece_exports_spell_specials_out_as_sentencepiece_does(recipe, sentences):
    """SentencePiece never matches a control piece in text; HF's Unigram put every piece in its
    lattice (score 0.0, the best), so "[MASK]" came out as 4, even with special matching off."""
    from kolectra.vocab import spm

    sents = korean_sentences(80, seed=5) + (["괄호 [ ] 와 P A D M S K C L E U N 글자"] * 20
                                              if sentences == "with_brackets" else [])
    model = io.BytesIO()
    sentencepiece.set_random_generator_seed(0)
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(sents), model_writer=model, model_type=spm.MODEL_TYPES[recipe], vocab_size=1000,
        pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, pad_piece=SPECIALS[0], unk_piece=SPECIALS[1],
        control_symbols=list(SPECIALS[2:]) + ["[unused0]"], normalization_rule_name="identity",
        byte_fallback=True, hard_vocab_limit=False, minloglevel=2)
    sp = sentencepiece.SentencePieceProcessor(model_proto=model.getvalue())
    tok = spm.make_tokenizer(model.getvalue(), recipe)
    for text in (SPELLED, "[MASK]", "a[SEP]b [unused0]", "x <0x61>", sents[0]):
        ids = tok.encode(text, add_special_tokens=False).ids
        assert ids == sp.encode(spm.clean(text)) and not _text_ids(ids), text


def test_examples_hold_specials_only_where_packing_put_them(chain):
    index, ids, types, docs = _load(chain["store"].local(chain["examples"]), with_docs=True)
    assert SPECIAL_IDS["[MASK]"] not in ids
    assert not ((ids == SPECIAL_IDS["[PAD]"]) & (docs != 0)).any()  # [PAD] only in padding
    sequences = sum(len(set(row[row > 0].tolist())) for row in docs)
    assert int((ids == SPECIAL_IDS["[CLS]"]).sum()) == sequences  # one [CLS] a sequence, none from text
    assert int((ids == SPECIAL_IDS["[SEP]"]).sum()) <= 2 * sequences
    assert index["shards"] and sequences > 0


def test_pretraining_reads_examples_made_from_such_text(chain):
    index = json.loads((chain["store"].local(chain["examples"]) / "index.json").read_text(encoding="utf-8"))
    rows = sum(s["examples"] for s in index["shards"])  # one pass over every row: a bad one is read
    art = stages.pretrain(chain["store"], chain["examples"], preset="tiny",
                          sets=[*PRETRAIN, f"train.steps={-(-rows // 4) + 1}"])
    assert (chain["store"].local(art) / "hf" / "discriminator" / "config.json").is_file()
    chain["model"] = chain["store"].local(art) / "hf" / "discriminator"


def _model_dir(chain):
    if "model" not in chain:
        test_pretraining_reads_examples_made_from_such_text(chain)
    return chain["model"]


def _encoded(task, chain, batch: dict) -> dict:
    from kolectra.core.config import override
    from kolectra.finetune import config
    from kolectra.finetune.loading import load_tokenizer

    presets = {"nsmc": config.NSMC_PRESETS, "korquad": config.KORQUAD_PRESETS, "classify": config.CLASSIFY_PRESETS,
               "regress": config.REGRESS_PRESETS, "ner": config.NER_PRESETS}[task.name]
    cfg = override(presets["sample"](), ["max_length=64"] + (["doc_stride=32", "max_query_length=16"]
                                                             if task.name == "korquad" else []))
    return task.encoder(load_tokenizer(_model_dir(chain)), cfg)(batch, list(range(len(next(iter(batch.values()))))))


@pytest.mark.parametrize("family", ["nsmc", "classify", "regress"])
def test_text_tasks_see_one_segment_boundary_and_no_specials_from_text(chain, family):
    from kolectra.finetune import classify, nsmc, regress

    task = {"nsmc": nsmc.Nsmc, "classify": classify.Classify, "regress": regress.Regress}[family]()
    batch = {"text": [SPELLED, "[PAD]"], "label": [0, 1]}
    if family != "nsmc":
        batch["text_pair"] = ["[SEP] 둘째 문장", "[CLS]"]
    enc = _encoded(task, chain, batch)
    for ids, types in zip(enc["input_ids"], enc["token_type_ids"]):
        assert ids[0] == SPECIAL_IDS["[CLS]"] and ids[-1] == SPECIAL_IDS["[SEP]"]
        assert not _text_ids(ids[1:-1]) - {SPECIAL_IDS["[SEP]"]}
        assert ids.count(SPECIAL_IDS["[SEP]"]) == (1 if family == "nsmc" else 2)
        assert sum(types) == (0 if family == "nsmc" else len(ids) - ids.index(SPECIAL_IDS["[SEP]"]) - 1)


def test_ner_tokens_spelling_specials_are_words_with_labels(chain):
    from kolectra.finetune import ner

    tokens = [["[PAD]", "영화", "[SEP]", "[MASK]", "좋다"]]
    enc = _encoded(ner.Ner(), chain, {"tokens": tokens, "tags": [[1, 0, 0, 0, 0]]})
    ids, starts = enc["input_ids"][0], enc["word_starts"][0]
    assert not _text_ids(ids[1:-1]) and all(s > 0 for s in starts)  # every word has a first sub-token
    assert enc["labels"][0][starts[0]] == 1


def test_korquad_windows_keep_question_and_context_apart(chain):
    from kolectra.finetune import korquad

    context = "영화 [SEP] 정말 [PAD] 재미있었다 [MASK] 배우"
    batch = {"id": ["q"], "question": ["[SEP] 무엇이 [CLS]"], "context": [context], "title": ["t"],
             "answer_texts": [["재미있었다"]], "answer_starts": [[context.index("재미있었다")]]}
    enc = _encoded(korquad.Korquad(), chain, batch)
    ids = enc["input_ids"][0]
    assert ids.count(SPECIAL_IDS["[SEP]"]) == 2 and ids.count(SPECIAL_IDS["[CLS]"]) == 1
    assert SPECIAL_IDS["[PAD]"] not in ids and SPECIAL_IDS["[MASK]"] not in ids
