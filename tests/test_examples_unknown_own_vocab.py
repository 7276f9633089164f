"""The examples stage's [UNK] warning names the cause the lineage shows: with ``allow_other_corpus_vocab=true`` set
(a shared settings file may set it) and the vocab learned from this very corpus, it said "the vocab was learned from
another corpus ...: use the vocab built from this corpus", the one it was using. The fixture is
``tests/test_examples.py``'s; a vocabulary of other text is published as this corpus's vocab."""

from __future__ import annotations

from kolectra.pipeline import stages
from kolectra.pipeline.store.artifacts import Store
from tests.test_examples import inputs  # noqa: F401 - inputs is a fixture
from tests.test_examples_unknown import _foreign_vocab, _publish


def test_a_vocab_of_this_corpus_leaving_much_unknown_is_not_said_to_be_another_corpuss(inputs, tmp_path, capsys):
    store = Store(tmp_path / "root")
    corpus = _publish(store, "corpus", inputs["corpus"])
    vocab = _publish(store, "vocab", _foreign_vocab(tmp_path / "vocab"), parents=[corpus])  # this corpus's own
    capsys.readouterr()
    stages.examples(store, corpus, vocab, sets=["max_seq_length=40", "allow_other_corpus_vocab=true"])
    line = next(x for x in capsys.readouterr().err.splitlines() if "[UNK]" in x)
    assert "another corpus" not in line and "raise the vocab's vocab_size" in line, line
