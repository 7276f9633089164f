"""KorQuAD's fine-tuning verdict (issue 46): a run at chance level is marked as having learned
nothing (EM 0 and F1 5 used to pass, as long as one answer was non-empty); a run that learned
passes. Chance is what spans of the answer's length score when placed without reading the question
(``korquad_metric.chance_f1``), recorded with the verdict. Driven through ``kolectra finetune korquad``.
A span head whose train loss stayed near guessing spans uniformly learned nothing too, whatever a few dev
questions' F1 (the embedded sample's demo: F1 6.67 over twice chance, every answer wrong)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from kolectra.finetune.features import Features
from kolectra.finetune.korquad import Korquad
from kolectra.finetune.loop import TrainLog
from kolectra.finetune.readers.korquad import read_squad
from kolectra.finetune.skeleton import Fit, Scored, Split
from kolectra.pipeline.cli import main
from tests.test_finetune_e2e import FIXTURE, tiny_model  # noqa: F401 - tiny_model is a fixture

COMMON = ["--train", str(FIXTURE), "--dev", str(FIXTURE), "--preset", "sample", "--set", "train_on_eval=true",
          "--set", "max_length=64", "--set", "doc_stride=32", "--set", "max_query_length=24", "--set", "batch_size=16",
          "--set", "max_train_examples=12", "--set", "max_eval_examples=12"]


def _korquad(tiny_model, root: Path, capsys, *sets: str) -> tuple[dict, str]:
    assert main(["finetune", "korquad", "--model", str(tiny_model), *COMMON, *sets, "--out", str(root)]) == 0
    captured = capsys.readouterr()
    art = Path(captured.out.strip().splitlines()[-1])
    return json.loads((art / "metrics.json").read_text(encoding="utf-8")), captured.err


@pytest.mark.parametrize("learns", [False, True])
def test_a_korquad_run_at_chance_level_learned_nothing_and_one_that_learned_passes(tiny_model, tmp_path, capsys,
                                                                                 learns):
    sets = (["--set", "optim.lr=5e-3", "--set", "epochs=8", "--set", "optim.warmup_fraction=0.1"] if learns
            else ["--set", "optim.lr=1e-9", "--set", "epochs=1"])  # the span head stays as initialised
    metrics, err = _korquad(tiny_model, tmp_path / "root", capsys, *sets)
    health = metrics["health"]
    chance = health["figures"]["chance_f1"]
    assert 1.0 < chance < 10.0 and health["figures"]["f1"] == pytest.approx(metrics["f1"], abs=1e-3)
    assert sum(len(s) for s in json.loads((tmp_path / "root").joinpath(
        "eval").iterdir().__next__().joinpath("predictions.json").read_text()).values()) > 0  # answers were given
    if learns:
        assert health["status"] == "ok" and metrics["f1"] > 2 * chance
        assert "WARNING" not in err
    else:
        assert health["status"] == "not_learning" and metrics["f1"] < 2 * chance
        assert health["problems"][0].startswith(f"EM {metrics['exact_match']:.2f} and F1 {metrics['f1']:.2f} are at "
                                                "chance level")
        assert f"WARNING: EM {metrics['exact_match']:.2f}" in err


def _verdict(f1: float, train_loss: float, window_tokens: int = 128) -> list[str]:
    """Korquad.health on the sample's questions with every answer wrong but non-empty, a dev F1 and the last
    epoch's train loss as given, and 48 training windows of ``window_tokens`` tokens each."""
    questions, _ = read_squad(FIXTURE)
    predictions = {q.id: [{"text": q.context[:1]}] for q in questions}
    fit = Fit(log=TrainLog(history=[{"epoch": 1, "train_loss": train_loss}], curve=[], timings=[], steps_per_epoch=6,
                           log_every=1),
              final=Scored({"exact_match": 0.0, "f1": f1, "questions": len(questions)}, predictions, 0.0))
    lengths = np.full(48, window_tokens)
    splits = {"train": Split(None, None, Features({}, {}, lengths, 0)),
              "dev": Split(questions, None, Features({}, {}, lengths, 0), {"questions": questions})}
    problems, figures = Korquad().health(splits, fit)
    assert figures["uniform_span_loss"] == pytest.approx(math.log(window_tokens), abs=1e-4)
    return problems


def test_a_span_head_whose_train_loss_stayed_at_a_uniform_guess_learned_nothing_whatever_a_few_questions_f1():
    # as the embedded sample's demo run: EM 0 with an F1 over twice chance (there 6.67 against 3.20 on 12
    # questions; here 12 against about 4.5), every answer a syllable, the train loss 4.78 where guessing over
    # 128 tokens costs ln 128 = 4.85
    problems = _verdict(f1=12.0, train_loss=4.78)
    assert len(problems) == 1 and problems[0].startswith("the last epoch's train loss 4.780 is 98.5% of what guessing")
    assert _verdict(f1=12.0, train_loss=3.2) == []  # a loss well under the guess: the F1 rule alone decides
    assert _verdict(f1=1.0, train_loss=4.78)[0].startswith("EM 0.00 and F1 1.00 are at chance level")  # both said
    assert len(_verdict(f1=1.0, train_loss=4.78)) == 2
    assert _verdict(f1=12.0, train_loss=3.2, window_tokens=24) != []  # the guess follows the windows: ln 24 = 3.18
