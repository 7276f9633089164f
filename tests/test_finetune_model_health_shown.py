"""``kolectra finetune``'s warning on a checkpoint that learned nothing (06498c7) prints the checkpoint's folder name
and the problems its manifest records: a root from elsewhere (a shared bucket, a download) may put terminal escape
sequences there (``ESC ] 0 ;`` retitles the window), which every other line of names and values escapes
(:func:`kolectra.core.shown.shown`: ``artifacts`` lines, the error line, the stage-version note). This one wrote them
raw. The checkpoint is published by hand (its manifest as a pretraining writes it): no training needed."""

from __future__ import annotations

from kolectra.core.stage import StageOutput
from kolectra.pipeline import stage_versions
from kolectra.pipeline.cli.finetune import _model_health
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.request import Request

TITLE = "\x1b]0;pwned\x07"


def test_the_warning_on_a_checkpoint_that_learned_nothing_escapes_what_its_manifest_says(tmp_path, capsys):
    store = Store(tmp_path / "root")
    health = {"status": "not_learning", "problems": [f"loss flat{TITLE}"]}
    req = Request(kind="checkpoint", name="tiny", stage_version=stage_versions.current("checkpoint"), config={})
    ckpt = store.build(req, lambda out: ((out / "hf").mkdir(), StageOutput(stats={"health": health}))[1])
    capsys.readouterr()
    _model_health(store, "nsmc", ckpt.id)
    err = capsys.readouterr().err
    assert "learned nothing in pretraining" in err and "loss flat\\x1b]0;pwned\\x07" in err, err
    assert "\x1b" not in err and "\x07" not in err, err


def test_the_scores_health_lines_escape_what_the_runs_metrics_say(tmp_path, capsys):
    """The health under the scores (a run's own verdict; a ``--seeds`` summary's, from its runs' metrics.json,
    pipeline.verdicts.seeds_health) printed the verdict's words raw on stdout."""
    import json

    from kolectra.pipeline.cli.finetune import _print_metrics

    path = tmp_path / "metrics.json"
    path.write_text(json.dumps({"accuracy": 0.5, "health": {"status": "not_learning", "problems": [f"one class{TITLE}"]}}))
    capsys.readouterr()
    _print_metrics(path, f"learned nothing in 2 of 2 seeds (seed 1: one class{TITLE})")
    out = capsys.readouterr().out
    assert out.count("one class\\x1b]0;pwned\\x07") == 2 and "\x1b" not in out and "\x07" not in out, out


def test_the_line_on_a_vocab_of_another_corpus_allowed_escapes_its_folder_name(tmp_path, capsys):
    """``examples`` with allow_other_corpus_vocab=true says whose vocab it uses (916b3ed): the folder's name, which a
    root from elsewhere names (a shared bucket's listing), was written raw. (Here beside the finetune lines: one rule.)"""
    import os

    from kolectra.pipeline import stages

    store = Store(tmp_path / "root")

    def publish(kind: str, parents=()):
        req = Request(kind=kind, name=kind, stage_version=1, config={"k": kind}, parents=tuple(parents))
        return store.build(req, lambda out: StageOutput({}))

    corpus = publish("corpus")
    vocab = publish("vocab")
    os.rename(vocab.path, vocab.path.with_name(f"vocab{TITLE}-{vocab.id}"))
    vocab = store.require(vocab.id, "vocab")
    capsys.readouterr()
    stages.check_vocab_lineage(corpus, vocab, allow_other=True)
    err = capsys.readouterr().err
    assert "used as allow_other_corpus_vocab=true says" in err and "\\x1b]0;pwned\\x07" in err, err
    assert "\x1b" not in err and "\x07" not in err, err
