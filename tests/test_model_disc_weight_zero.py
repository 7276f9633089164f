"""objective.disc_weight=0 says at the start that nothing trains the discriminator's replaced-token head.

Accepted (>= 0) and silent before: `kolectra pretrain --set objective.disc_weight=0` (tiny, 40 steps) warned at
step 10 that "the discriminator has not learned even the share of replaced tokens", naming as likely causes too
few tokens and dropout, never the setting that gave its loss no weight. Real trainer, real files."""

from __future__ import annotations

import dataclasses

from kolectra.model import config, presets, train
from tests.model_support import build_examples, build_tokenizer


def _with(cfg, objective: str, disc_weight: float):
    return dataclasses.replace(cfg, objective=dataclasses.replace(cfg.objective, objective=objective,
                                                                  disc_weight=disc_weight))


def test_the_warning_names_what_the_weight_leaves_untrained():
    tiny = presets.tiny()
    line = config.disc_weight_warning(_with(tiny, "electra", 0.0).objective)
    assert line.startswith("WARNING: objective.disc_weight=0") and "\n" not in line
    assert "nothing trains the discriminator" in line
    hybrid = config.disc_weight_warning(_with(tiny, "hybrid", 0.0).objective)
    assert "its vocabulary head alone" in hybrid and "nothing trains the discriminator" not in hybrid
    assert config.disc_weight_warning(_with(tiny, "electra", 50.0).objective) is None
    assert config.disc_weight_warning(_with(tiny, "mlm", 0.0).objective) is None  # no RTD loss to weigh


def test_a_run_with_disc_weight_zero_says_so_before_training(tmp_path, capsys):
    tok = build_tokenizer(tmp_path / "tok")
    examples = build_examples(tmp_path / "examples", tok, n=16, seq_len=32)
    cfg = _with(presets.tiny(), "electra", 0.0)
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps=2, batch_size=8, warmup_steps=0,
                                                             log_every=2, cpu_threads=1))
    train.pretrain(cfg, examples, tok, tmp_path / "out")
    err = capsys.readouterr().err
    assert err.count("WARNING: objective.disc_weight=0") == 1  # before: not a word of it
