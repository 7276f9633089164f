"""KorQuAD's fine-tuning verdict (issue 46): a run at chance level is marked as having learned
nothing (EM 0 and F1 5 used to pass, as long as one answer was non-empty); a run that learned
passes. Chance is what spans of the answer's length score when placed without reading the question
(``korquad_metric.chance_f1``), recorded with the verdict. Driven through ``kolectra finetune korquad``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
