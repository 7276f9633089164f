"""The examples stage counts the ``[UNK]`` among the text's tokens and warns when a vocabulary leaves
much of the text unknown: a vocab learned from another corpus (``allow_other_corpus_vocab``) made
two thirds of a review corpus ``[UNK]`` and was published without a word, nothing in its stats.
The corpus and vocab fixture is ``tests/test_examples.py``'s."""

from __future__ import annotations

import shutil

from kolectra.core.config import override
from kolectra.core.stage import StageOutput
from kolectra.core.tokens import SPECIALS
from kolectra.corpus.examples import build
from kolectra.pipeline import stages
from kolectra.pipeline.store.artifacts import Artifact, Store
from kolectra.pipeline.store.request import Request
from kolectra.vocab import export
from tests.test_examples import CFG, inputs  # noqa: F401 - inputs is a fixture


def _foreign_vocab(path):
    """A vocabulary of other text: Latin letters and digits, none of the corpus's Hangul."""
    path.mkdir()
    export.write_dir([*SPECIALS, *"abcdefghij0123456789.", *(f"##{c}" for c in "abcdefghij0123456789")], path)
    return path


def _publish(store: Store, kind: str, src, parents=()) -> Artifact:
    req = Request(kind=kind, name=kind, stage_version=1, config={"src": str(src)}, parents=tuple(parents))
    return store.build(req, lambda out: (shutil.copytree(src, out, dirs_exist_ok=True), StageOutput({}))[1])


def test_the_unknown_share_is_counted_and_a_vocab_of_other_text_is_warned_about(inputs, tmp_path, capsys):
    out = tmp_path / "own"
    out.mkdir()
    own = build(CFG, inputs["corpus"], inputs["vocab"], out).stats
    assert own["unk_tokens"] == 0 and own["unk_rate"] == 0.0 and own["truncated_sentences"] == 0
    # nothing cut: the text's tokens are the rows' tokens less a [CLS] and one or two [SEP] a sequence
    assert own["text_tokens"] == own["tokens"] - 3 * own["sequences"] + own["single_segment_sequences"]
    assert "[UNK]" not in capsys.readouterr().err
    out = tmp_path / "other"
    out.mkdir()
    cfg = override(CFG, ["allow_other_corpus_vocab=true"])
    other = build(cfg, inputs["corpus"], _foreign_vocab(tmp_path / "vocab"), out).stats
    assert other["text_tokens"] > 0 and other["unk_rate"] > 0.5
    assert other["unk_rate"] == round(other["unk_tokens"] / other["text_tokens"], 6)
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if "[UNK]" in x)
    assert "WARNING: examples:" in line and "(above 1%)" in line and "allow_other_corpus_vocab=true" in line


def test_a_vocab_of_another_corpus_allowed_is_said(inputs, tmp_path, capsys):
    store = Store(tmp_path / "root")
    corpus = _publish(store, "corpus", inputs["corpus"])
    other = _publish(store, "corpus", inputs["corpus"] / "data")  # another corpus id
    vocab = _publish(store, "vocab", inputs["vocab"], parents=[other])
    capsys.readouterr()
    stages.examples(store, corpus, vocab, sets=["max_seq_length=40", "allow_other_corpus_vocab=true"])
    err = capsys.readouterr().err
    assert f"was learned from corpus {other.id}, not from" in err and "allow_other_corpus_vocab=true" in err
    own = _publish(store, "vocab", inputs["vocab"], parents=[corpus])
    stages.examples(store, corpus, own, sets=["max_seq_length=40", "allow_other_corpus_vocab=true"])
    assert "was learned from corpus" not in capsys.readouterr().err  # its own corpus: nothing to say
