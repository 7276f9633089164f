"""Issue 26's objectives and recipes: hybrid, corrective, MLM-then-RTD, generator width, mask rate and
the replacement-temperature schedule. Each steps with static shapes (one graph, no host sync), counts
its FLOPs, trains a few steps and exports a plain ElectraForPreTraining / ElectraForMaskedLM pair."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from transformers import ElectraForMaskedLM, ElectraForPreTraining

from kolectra.core.config import ConfigError, override
from kolectra.model import config, objectives, presets, rtd, train
from kolectra.model.electra import ElectraPair, flops_by_part, flops_line, train_flops_per_sequence
from kolectra.pipeline.study.plan import StudyPlan, arm_sets, parse_arm
from tests.model_support import build_examples, build_tokenizer, stop_in_step
from tests.test_model_rtd import SP, _batch

NEW = ("hybrid", "corrective", "mlm_then_rtd")
OBJ = config.ObjectiveConfig


def _model(**kw):
    return dataclasses.replace(presets.tiny().model, hidden=32, heads=2, intermediate=64, embedding_size=16,
                               generator_hidden=16, generator_heads=1, generator_intermediate=32, max_position=64,
                               **kw)


def _pair(objective, **kw):
    torch.manual_seed(0)
    return ElectraPair(_model(**kw), SP.vocab_size, SP.pad_id, objective)


def _knobs(obj, step, total=10):
    return objectives.knobs(obj, torch.tensor(float(step)), total)


@pytest.mark.parametrize("sharing", ["es", "gdes"])
@pytest.mark.parametrize("objective", ["hybrid", "corrective"])
def test_hybrid_and_corrective_train_both_discriminator_heads(objective, sharing):
    pair = _pair(objective, embedding_sharing=sharing)
    ids, types = _batch()
    torch.manual_seed(1)
    obj = OBJ(objective=objective, disc_mlm_weight=0.7)
    out = objectives.step_function(objective)(pair, ids, types, SP, obj)
    p = out.parts
    assert torch.allclose(out.loss, p["gen_loss"] + 50 * p["disc_loss"] + 0.7 * p["disc_mlm_loss"])
    out.loss.backward()
    assert pair.disc_lm_head.predictions.dense.weight.grad.abs().sum() > 0
    assert pair.discriminator.discriminator_predictions.dense.weight.grad.abs().sum() > 0
    assert pair.generator.electra.encoder.layer[0].output.dense.weight.grad.abs().sum() > 0
    assert out.sums["disc_tokens"] == (ids != SP.pad_id).sum()  # RTD on every token
    assert out.sums["disc_mlm_tokens"] == out.weights_BN.sum()  # the vocabulary head at the masked slots
    assert 0 <= out.sums["disc_mlm_correct"] <= out.sums["disc_mlm_tokens"]


def test_corrective_loss_is_the_copy_mixture_at_the_masked_slots():
    pair = _pair("corrective").eval()
    ids, types = _batch()
    torch.manual_seed(2)
    out = objectives.rtd_lm_step(pair, ids, types, SP, OBJ(objective="corrective"))
    bias = rtd.attention_bias((ids != SP.pad_id).float())
    rtd_logits, lm_logits = pair.discriminator_outputs(out.disc_in_BL, types, bias, out.positions_BN)
    target = torch.gather(ids, 1, out.positions_BN)
    p_lm = torch.softmax(lm_logits, -1).gather(2, target.unsqueeze(-1)).squeeze(-1)
    p_replaced = torch.sigmoid(torch.gather(rtd_logits, 1, out.positions_BN))
    same = (torch.gather(out.disc_in_BL, 1, out.positions_BN) == target).float()
    q = (1 - p_replaced) * same + p_replaced * p_lm  # p(original) by the copy mechanism
    w = out.weights_BN
    assert torch.allclose(out.parts["disc_mlm_loss"], -(torch.log(q) * w).sum() / w.sum(), atol=1e-5)
    # where the generator replaced the token, the correction is the plain cross-entropy plus -log P(replaced)
    assert (same * w).sum() < w.sum()


def test_corrective_binary_head_learns_only_from_the_rtd_loss():
    pair = _pair("corrective")
    ids, types = _batch()
    torch.manual_seed(3)
    out = objectives.rtd_lm_step(pair, ids, types, SP, OBJ(objective="corrective"))
    out.parts["disc_mlm_loss"].backward()
    assert pair.discriminator.discriminator_predictions.dense_prediction.weight.grad is None
    assert pair.disc_lm_head.predictions.dense.weight.grad.abs().sum() > 0


def test_mlm_then_rtd_switches_input_and_loss_with_a_weight():
    obj = OBJ(objective="mlm_then_rtd", mlm_phase=0.3)
    ids, types = _batch()
    assert _knobs(obj, 2)["mlm_weight"] == 1 and _knobs(obj, 3)["mlm_weight"] == 0  # round(0.3 x 10) = 3 steps
    for step, phase in ((0, "mlm"), (5, "rtd")):
        pair = _pair("mlm_then_rtd")
        torch.manual_seed(4)
        out = objectives.rtd_lm_step(pair, ids, types, SP, obj, knobs=_knobs(obj, step))
        p = out.parts
        out.loss.backward()
        rtd_head = pair.discriminator.discriminator_predictions.dense_prediction.weight.grad
        lm_head = pair.disc_lm_head.predictions.dense.weight.grad
        gen = pair.generator.electra.encoder.layer[0].output.dense.weight.grad
        assert gen.abs().sum() > 0  # the generator trains in both phases
        if phase == "mlm":
            assert torch.equal(out.disc_in_BL, out.masked_BL)  # BERT's [MASK]-ed input
            assert torch.allclose(out.loss, p["gen_loss"] + p["disc_mlm_loss"])
            assert rtd_head.abs().sum() == 0 and lm_head.abs().sum() > 0
            assert out.sums["mlm_steps"] == 1 and out.sums["rtd_steps"] == 0 and out.sums["disc_tokens"] == 0
        else:
            assert not torch.equal(out.disc_in_BL, out.masked_BL)  # the generator's samples
            assert torch.allclose(out.loss, p["gen_loss"] + 50 * p["disc_loss"])
            assert rtd_head.abs().sum() > 0 and lm_head.abs().sum() == 0
            assert out.sums["disc_mlm_tokens"] == 0 and out.sums["disc_tokens"] == (ids != SP.pad_id).sum()


def test_mlm_then_rtd_phase_losses_of_an_accumulated_step_are_the_steps_loss():
    """With train.grad_accum the micro-steps' losses add up to the step's loss (norm_2), so the phase's
    step count must add up to one step too: counted once a micro-step, the logged disc_loss and
    disc_mlm_loss read grad_accum times too low (and the not-learning check compares that to the prior)."""
    from kolectra.model.metrics import summarize

    obj = OBJ(objective="mlm_then_rtd", mlm_phase=0.5)
    ids, types = _batch()
    pair = _pair("mlm_then_rtd")
    for step, key in ((0, "disc_mlm_loss"), (9, "disc_loss")):
        micro = [(ids[:2], types[:2]), (ids[2:], types[2:])]  # uneven micro-batches: 2 and 4 rows
        norm_2 = sum(rtd.normalizers(i, SP, obj.mask_prob) for i, _ in micro)
        sums: dict = {}
        for i, t in micro:
            for k, v in objectives.rtd_lm_step(pair, i, t, SP, obj, norm_2, knobs=_knobs(obj, step)).sums.items():
                sums[k] = sums.get(k, 0) + v
        line = summarize({k: v.tolist() if v.dim() else float(v) for k, v in sums.items()}, steps=1)
        assert line[key] == pytest.approx(float(sums[key]), rel=1e-5)  # one step: its whole loss
        assert line["loss"] == pytest.approx(float(sums["loss"]), rel=1e-5)


def test_temperature_schedule_falls_from_start_to_one_on_the_device():
    obj = OBJ(temperature_start=3.0, temperature_decay=0.5)
    temps = [float(_knobs(obj, s, 10)["temperature"]) for s in range(8)]
    assert temps[0] == 3.0 and temps[5:] == [1.0, 1.0, 1.0]
    assert all(a > b for a, b in zip(temps[:5], temps[1:6]))  # linear fall over the first half
    assert objectives.knobs(OBJ(), torch.tensor(0.0), 10) is None  # nothing scheduled: no knobs at all
    # a hotter sampler spreads the replacements: fewer samples equal the generator's argmax
    torch.manual_seed(0)
    logits = torch.randn(4, 200, 50) * 4
    top = logits.argmax(-1)
    same = [(rtd.sample_tokens(logits, t, "gumbel") == top).float().mean() for t in (torch.tensor(1.0), torch.tensor(3.0))]
    assert same[0] > same[1] + 0.2
    cold = (rtd.sample_tokens(logits, torch.tensor(1.0), "inverse_cdf", torch.softmax(logits, -1)) == top).float().mean()
    assert abs(cold - same[0]) < 0.05  # the tensor temperature bypasses the T = 1 shortcut, same distribution


@pytest.mark.parametrize("objective,kw", [("hybrid", {"temperature_start": 2.0}), ("corrective", {}),
                                          ("mlm_then_rtd", {}), ("electra", {"temperature_start": 2.0})])
def test_step_traces_to_one_graph_with_its_knobs(objective, kw):
    """Static shapes and no host sync: torch.compile (and XLA) see one graph, the knobs as inputs."""
    from kolectra.model.device import Device

    model = Device().place(_pair(objective)).train()
    ids, types = _batch()
    obj = OBJ(objective=objective, **kw)
    knobs = _knobs(obj, 1)
    assert (knobs is None) == (objective == "corrective")  # corrective here schedules nothing
    torch._dynamo.reset()
    explained = torch._dynamo.explain(objectives.step_function(objective))(model, ids, types, SP, obj, knobs=knobs)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons


def test_flops_per_step_are_positive_and_ordered():
    m, V, L = presets.mini().model, 8000, 128
    N = rtd.num_slots(0.15, L)
    f = {o: train_flops_per_sequence(m, V, L, N, o) for o in ("mlm", "electra", *NEW)}
    assert all(v > 0 for v in f.values())
    assert f["mlm"] < f["electra"] < f["hybrid"] == f["corrective"] == f["mlm_then_rtd"]
    # the discriminator's vocabulary head is MLM's head at the same slots: hybrid = electra + mlm's head
    parts = flops_by_part(m, V, L, N, "hybrid")
    assert parts["mlm_head"] == flops_by_part(m, V, L, N, "mlm")["mlm_head"] > 0
    assert parts["discriminator_head"] == flops_by_part(m, V, L, N, "electra")["discriminator_head"]
    width = [train_flops_per_sequence(dataclasses.replace(m, generator_width=w), V, L, N) for w in (0.25, 0.5, 1.0)]
    assert width[0] == f["electra"] and width[0] < width[1] < width[2]  # mini's generator is 1/4 wide already
    masks = [train_flops_per_sequence(m, V, L, rtd.num_slots(p, L)) for p in (0.15, 0.25, 0.3)]
    assert masks[0] < masks[1] < masks[2]  # more slots, more of the generator's head


def test_generator_width_sets_the_generator_shape():
    pair = ElectraPair(_model(generator_width=0.5), SP.vocab_size, SP.pad_id)
    c = pair.generator.config
    assert (c.hidden_size, c.num_attention_heads, c.intermediate_size) == (16, 1, 32)
    pair = ElectraPair(_model(generator_width=1.0), SP.vocab_size, SP.pad_id)
    assert pair.generator.config.hidden_size == pair.discriminator.config.hidden_size == 32
    g = config.generator_shape(dataclasses.replace(presets.small().model, generator_width=0.25))
    assert (g.generator_hidden, g.generator_heads, g.generator_intermediate) == (64, 1, 256)  # the paper's Small


@pytest.mark.parametrize("sets,key", [(["objective.mlm_phase=1"], "objective.mlm_phase"),
                                      (["model.generator_width=1.5"], "model.generator_width"),
                                      (["objective.temperature_decay=0"], "objective.temperature_decay"),
                                      (["objective.disc_mlm_weight=-1"], "objective.disc_mlm_weight"),
                                      (["objective.objective=coco"], "objective.objective")])
def test_bad_recipe_settings_are_refused_naming_the_key(sets, key):
    with pytest.raises(ConfigError, match=key):
        override(presets.mini(), sets).validate()


def test_study_arms_take_the_new_objectives_and_recipe_switches():
    assert parse_arm("corrective-gdes") == ("corrective", "gdes")
    assert arm_sets("mlm+mask0.3") == ["objective.objective=mlm", "model.embedding_sharing=es",
                                       "objective.mask_prob=0.3"]
    assert arm_sets("electra-gdes+gen0.5+temp2", ("train.cpu_threads=1",))[1:] == [
        "objective.objective=electra", "model.embedding_sharing=gdes", "model.generator_width=0.5",
        "objective.temperature_start=2"]
    assert arm_sets("mlm_then_rtd+phase0.3+dmlm.5")[-2:] == ["objective.mlm_phase=0.3", "objective.disc_mlm_weight=.5"]
    StudyPlan(flops=1e13, arms=("hybrid", "mlm+mask0.3", "electra+gen1.0+temp3")).validate()
    # precision switches pair one recipe in bf16 and in float32 within a study
    assert arm_sets("electra+bf16")[-1] == "train.bf16=true"
    assert arm_sets("mlm+mask0.3+fp32")[-2:] == ["objective.mask_prob=0.3", "train.bf16=false"]
    for bad, why in (("electra+warm3", "unknown recipe switch"), ("mlm_then_rtd+phase1.5", "mlm_phase"),
                     ("coco", "unknown arm"), ("electra+bf17", r"\+bf16 sets train.bf16=true")):
        with pytest.raises(ConfigError, match=why):
            StudyPlan(flops=1e13, arms=(bad,)).validate()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("inputs")
    tok = build_tokenizer(root / "tok")
    return build_examples(root / "examples", tok, n=96, seq_len=32), tok


@pytest.mark.parametrize("objective,kw", [("hybrid", {}), ("corrective", {}), ("mlm_then_rtd", {"mlm_phase": 0.5}),
                                          ("electra", {"temperature_start": 3.0, "mask_prob": 0.25})])
def test_objective_trains_and_exports_a_plain_pair(objective, kw, inputs, tmp_path):
    examples, tok = inputs
    cfg = presets.tiny()
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, generator_width=0.5),
                              objective=dataclasses.replace(cfg.objective, objective=objective, **kw),
                              train=dataclasses.replace(cfg.train, steps=16, batch_size=8, warmup_steps=2,
                                                        log_every=4, lr=3e-3))
    result = train.pretrain(cfg, examples, tok, tmp_path)
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [4, 8, 12, 16]
    assert all(np.isfinite(r["loss"]) and np.isfinite(r["gen_loss"]) for r in rows)
    assert rows[-1]["gen_loss"] < rows[0]["gen_loss"]
    if objective == "mlm_then_rtd":  # 8 MLM steps, then RTD: each phase's figures from its own windows
        assert "disc_mlm_loss" in rows[0] and "disc_loss" not in rows[0] and "disc_auc" not in rows[0]
        assert "disc_loss" in rows[-1] and "disc_mlm_loss" not in rows[-1] and "disc_auc" in rows[-1]
        assert rows[1]["disc_mlm_loss"] < rows[0]["disc_mlm_loss"]
    elif objective in ("hybrid", "corrective"):
        assert rows[-1]["disc_mlm_loss"] < rows[0]["disc_mlm_loss"] and 0 <= rows[-1]["disc_mlm_acc"] <= 1
        assert "disc_auc" in rows[-1]
    else:
        assert rows[0]["temperature"] > rows[-1]["temperature"] == 1.0  # 3 falling to 1 over the first half
    assert result.stats["objective"] == objective and result.stats["recipe"]["objective"] == objective
    assert result.stats["recipe"]["generator"].startswith("32 hidden")  # tiny's 64 at width 0.5
    # the export: a stock pair, no extra heads, loading without missing or unexpected weights
    disc_dir, gen_dir = tmp_path / "hf" / "discriminator", tmp_path / "hf" / "generator"
    disc, info = ElectraForPreTraining.from_pretrained(disc_dir, output_loading_info=True)
    assert not any(info.values()), info
    gen, info = ElectraForMaskedLM.from_pretrained(gen_dir, output_loading_info=True)
    assert not any(info.values()), info
    assert json.loads((disc_dir / "config.json").read_text())["architectures"] == ["ElectraForPreTraining"]
    assert gen.config.hidden_size == 32
    card = (disc_dir / "README.md").read_text()
    assert f"| objective | {objective} |" in card and f"{objective})" in card.splitlines()[card.splitlines().index("---", 1) + 2]
    assert "| recipe | mask prob" in card
    # the figures its metadata's metrics name, from the last log window (they were listed, not reported)
    assert (f"| final figures (last log window) | discriminator: accuracy {rows[-1]['disc_acc']:.3f}, precision "
            f"{rows[-1]['disc_precision']:.3f}, recall {rows[-1]['disc_recall']:.3f}, AUC {rows[-1]['disc_auc']:.3f}")\
        in card and f"generator: accuracy at the masked slots {rows[-1]['gen_acc']:.3f} |" in card


def test_objectives_benchmark_prints_one_json_line_with_every_arm():
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, str(repo / "benchmarks" / "objectives.py"), "--quick", "--batch-size", "2",
                           "--rounds", "1", "--arms", "hybrid,mlm+mask0.3"], capture_output=True, text=True,
                          timeout=300, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["benchmark"] == "objectives" and result["unit"] == "tokens/s"
    assert result["baseline"]["name"] == "electra" and set(result["results"]) == {"electra", "hybrid", "mlm+mask0.3"}
    assert result["value"] == result["results"]["hybrid"]["tokens_per_s"] > 0 and result["ratio"] > 0
    r = result["results"]
    assert r["hybrid"]["flops_ratio"] > 1 and r["electra"]["study_steps_at_7.2e13"] == 2498  # the study's count
    assert {"machine", "config"} <= set(result)


def test_resume_continues_the_schedules_exactly(inputs, tmp_path, monkeypatch):
    """mlm_then_rtd with a temperature schedule, interrupted after its step-4 checkpoint and resumed:
    the device's step counter restarts at the checkpoint's step, so every line and weight equals an
    uninterrupted run's (the phase switch at step 6 and the temperature included)."""
    examples, tok = inputs
    cfg = presets.tiny()
    cfg = dataclasses.replace(cfg, objective=dataclasses.replace(cfg.objective, objective="mlm_then_rtd",
                                                                 mlm_phase=0.5, temperature_start=3.0),
                              train=dataclasses.replace(cfg.train, steps=12, batch_size=8, warmup_steps=2,
                                                        log_every=1, save_every=4, lr=3e-3))
    straight = tmp_path / "straight"
    train.pretrain(cfg, examples, tok, straight)

    class Boom(Exception):
        pass

    cut = tmp_path / "cut"
    resume_step = stop_in_step(monkeypatch, 7, Boom(), "mlm_then_rtd")
    with pytest.raises(Boom):
        train.pretrain(cfg, examples, tok, cut)
    resume_step()
    train.pretrain(cfg, examples, tok, cut, resume=True)

    def rows(out):
        return [{k: v for k, v in json.loads(x).items() if k not in ("tokens_per_s", "mfu")}
                for x in (out / "metrics.jsonl").read_text().splitlines()]

    a, b = rows(straight), rows(cut)
    assert a == b
    assert [r["temperature"] for r in a[:3]] == pytest.approx([3.0, 3.0 - 2 / 6, 3.0 - 4 / 6])
    assert "disc_mlm_loss" in a[5] and "disc_loss" in a[6] and "disc_mlm_loss" not in a[6]
    for role in ("discriminator", "generator"):
        assert (straight / "hf" / role / "model.safetensors").read_bytes() == \
            (cut / "hf" / role / "model.safetensors").read_bytes()


def test_the_flops_line_says_a_large_vocabulary_takes_the_compute():
    """tiny at 64 tokens with a 79,891-entry vocabulary: 84 % in the generator's head, and the line added
    "(a small vocabulary moves compute into the body)" (k4)."""
    m = presets.tiny().model
    parts = flops_by_part(m, 79_891, 64, 10)
    share = {k: round(v / sum(parts.values()), 4) for k, v in parts.items() if v}
    line = flops_line(share, 79_891)
    assert line.startswith("FLOPs per step 16% body, 84% generator head")
    assert line.endswith("(the generator's softmax over 79,891 entries: a smaller vocabulary, kolectra vocab "
                         "--vocab-size, moves compute into the body)")
    small = flops_by_part(m, 300, 64, 10)
    assert "softmax" not in flops_line({k: v / sum(small.values()) for k, v in small.items() if v}, 300)
