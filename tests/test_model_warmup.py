"""Short runs say so (issue 26): a preset's warm-up is scaled to a run shorter than it was written for,
a warm-up the user set is kept with a one-line warning, and a run that ends in warm-up says its
health went unchecked."""

from __future__ import annotations

import dataclasses
import json

from kolectra.model import config, presets, train
from kolectra.pipeline import configs
from tests.model_support import build_examples, build_tokenizer


def test_preset_warm_up_scales_to_a_tenth_of_a_short_run():
    cfg, doc = configs.resolve("pretrain", preset="mini", sets=["train.steps=200"])
    assert cfg.train.warmup_steps == 20 and doc["train"]["warmup_steps"] == 20  # what the manifest records
    cfg, line = config.fit_warmup(presets.mini(), explicit=False)
    assert line is None and cfg.train.warmup_steps == 200  # 10 % of the preset's 2,000 steps: left alone
    short = dataclasses.replace(presets.mini(), train=dataclasses.replace(presets.mini().train, steps=200))
    cfg, line = config.fit_warmup(short, explicit=False)
    assert cfg.train.warmup_steps == 20
    assert line.startswith("warm-up scaled to 20 steps (10% of 200): the mini preset's 200 would cover 100%")
    # a fifth is still fine; more is scaled
    at_fifth = dataclasses.replace(short, train=dataclasses.replace(short.train, steps=1000))
    assert config.fit_warmup(at_fifth, explicit=False)[0].train.warmup_steps == 200
    assert config.fit_warmup(dataclasses.replace(at_fifth, train=dataclasses.replace(at_fifth.train, steps=999)),
                             explicit=False)[0].train.warmup_steps == 100


def test_a_warm_up_the_user_set_is_kept_and_warned_about():
    cfg, _ = configs.resolve("pretrain", preset="mini", sets=["train.steps=200", "train.warmup_steps=150"])
    assert cfg.train.warmup_steps == 150
    line = config.warmup_warning(cfg.train)
    assert line.startswith("WARNING: warm-up (150 steps) covers 75% of the run (200 steps)") and "\n" not in line
    full = dataclasses.replace(cfg.train, warmup_steps=200)
    assert "not shorter than the run" in config.warmup_warning(full)
    assert config.warmup_warning(dataclasses.replace(cfg.train, warmup_steps=40)) is None
    assert config.warmup_warning(dataclasses.replace(cfg.train, steps=0, warmup_steps=0)) is None


def test_a_run_that_ends_in_warm_up_warns_and_records_why_health_is_unchecked(tmp_path, capsys):
    tok = build_tokenizer(tmp_path / "tok")
    examples = build_examples(tmp_path / "examples", tok, n=32, seq_len=32)
    cfg = presets.tiny()
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps=4, batch_size=8, warmup_steps=4,
                                                             log_every=2, cpu_threads=1))
    result = train.pretrain(cfg, examples, tok, tmp_path / "out")
    err = capsys.readouterr().err
    assert err.count("WARNING: warm-up (4 steps) is not shorter than the run (4 steps)") == 1
    assert "WARNING: training health unchecked: the run ended in warm-up (4 steps, warm-up 4)" in err
    assert result.stats["health"]["status"] == "unchecked"
    assert result.stats["health"]["reason"] == "the run ended in warm-up"
    card = (tmp_path / "out" / "hf" / "discriminator" / "README.md").read_text()
    assert "| training health | unchecked: the run ended in warm-up |" in card
    assert json.loads((tmp_path / "out" / "metrics.jsonl").read_text().splitlines()[-1])["step"] == 4


def test_a_warm_up_longer_than_the_run_says_the_rate_never_peaks():
    """3 steps with warm-up 100 train at 1-3 % of train.lr (k4: the last logged lr 6.0e-05 of 2e-3): both lines
    said the run ended at its peak learning rate. Only a warm-up exactly as long as the run ends there, and
    only under warmup_then_decay (the reference schedule multiplies the decay in)."""
    from kolectra.model import health, optim

    t = dataclasses.replace(presets.tiny().train, steps=3, warmup_steps=100)
    line = config.warmup_warning(t)
    assert "its learning rate never reaches train.lr (at most 3% of it), and its health goes unchecked" in line
    assert "peak" not in line
    assert max(optim.lr_scale(s, 100, 3) for s in range(3)) == 0.03
    ctx = dict(objective="electra", vocab_size=8000, warmup_steps=100, total_steps=3, lr=2e-3)
    v = {"status": "unchecked", "reason": health.ENDED_IN_WARMUP}
    text = health.unchecked_text(v, health.Context(**ctx))
    assert "(3 steps, warm-up 100): its learning rate never reaches train.lr (at most 3% of it)" in text
    assert "peak" not in text
    # a warm-up as long as the run: its last step is at the peak, as before
    assert "its last step is at the peak learning rate" in config.warmup_warning(dataclasses.replace(t, warmup_steps=3))
    # the reference schedule never gets there: its largest factor over 4 steps is 2/4 x 3/4 (steps 1 and 2)
    ref = dataclasses.replace(t, steps=4, warmup_steps=4, schedule="warmup_times_decay")
    assert max(optim.lr_scale(s, 4, 4, "warmup_times_decay") for s in range(4)) == 0.375
    assert "never reaches train.lr (at most 38% of it)" in config.warmup_warning(ref)
    ctx.update(warmup_steps=4, total_steps=4)
    assert "at most 38% of it" in health.unchecked_text(v, health.Context(**ctx, schedule="warmup_times_decay"))


def test_a_warm_up_a_step_longer_than_the_run_is_not_at_1e_02_percent():
    """199 steps of a 200-step warm-up reach 99.5 % of train.lr: both lines said 'at most 1e+02% of it' (m1)."""
    from kolectra.model import health

    t = dataclasses.replace(presets.tiny().train, steps=199, warmup_steps=200)
    assert "its learning rate never reaches train.lr (at most 99.5% of it)" in config.warmup_warning(t)
    ctx = health.Context(objective="electra", vocab_size=8000, warmup_steps=1001, total_steps=1000, lr=2e-3)
    text = health.unchecked_text({"status": "unchecked", "reason": health.ENDED_IN_WARMUP}, ctx)
    assert "(at most 99.91% of it)" in text  # 99.9001 %: the hundredth above, never 100
    assert "e+02" not in text
