"""The training-health verdict (model/health.py) on metrics shaped like real runs of ``mini`` on
the review corpus: the identity-only plateau (AUC 0.58) is "at the prior", a discriminator that has
climbed past it is not, and the generator checks fire on their own figures. A warning's course across a run
(given, withdrawn, standing at the end) is tests/test_model_health_standing.py's."""

import dataclasses
import math

from kolectra.model import health, health_standing
from tests.model_health_support import _ctx, _line


def test_plateau_at_token_identity_auc_is_at_the_prior():
    lines = [_line(s) for s in (100, 200, 2300, 2400)]  # the long pilot's steps 600-3000 (dropout 0.1)
    v = health.verdict(lines, _ctx(dropout=0.1))
    assert v["status"] == "not_learning"
    assert "class prior" in v["problems"][0] and "AUC 0.58" in v["problems"][0]
    causes = " ".join(v["likely_causes"])
    assert "too few tokens: 10.0 M non-padding tokens" in causes and "dropout 0.1" in causes
    few = " ".join(health.verdict(lines, _ctx(dropout=0.1, nonpad_tokens=40_960))["likely_causes"])
    assert "too few tokens: 41 k non-padding tokens" in few  # the demo's count, which read "0.0 M"
    assert "dropout 0" not in " ".join(health.verdict(lines, _ctx(dropout=0.0))["likely_causes"])


def test_discriminator_climbing_past_the_plateau_has_left_it():
    # the no-dropout pilot's last windows: AUC 0.69 with recall still 0.04 at the 0.5 threshold
    lines = [_line(s, disc_loss=0.322, disc_auc=0.69, disc_recall=0.035) for s in (2400, 2500)]
    assert health.verdict(lines, _ctx())["status"] == "ok"
    # the same loss and recall at the plateau's AUC: still at the prior
    lines = [_line(s, disc_loss=0.322, disc_auc=0.60, disc_recall=0.035) for s in (2400, 2500)]
    assert health.verdict(lines, _ctx())["status"] == "not_learning"


def test_electra15_at_the_prior_calls_every_masked_slot_replaced():
    """electra15 scores only the masked slots, most of them replaced (the share below is a generator
    that gets a quarter right): a discriminator at its prior calls every one replaced, recall 1.0,
    so the replaced tokens' recall cannot tell; the originals' recall (0 here) does."""
    share = 0.75
    stuck = [_line(s, disc_loss=health.binary_entropy(share), disc_auc=0.55, disc_recall=1.0, disc_acc=share,
                   replaced_token_share=share) for s in (2400, 2500)]
    v = health.verdict(stuck, _ctx(objective="electra15"))
    assert v["status"] == "not_learning"
    assert "calls nearly every token replaced (recall of original tokens 0.00" in v["problems"][0]
    # one that tells them apart: 60 % of the originals called original, 90 % of the replaced tokens
    good = [_line(s, disc_loss=0.45, disc_auc=0.80, disc_recall=0.9, disc_acc=0.9 * share + 0.6 * (1 - share),
                  replaced_token_share=share) for s in (2400, 2500)]
    assert health.verdict(good, _ctx(objective="electra15"))["status"] == "ok"


def test_only_windows_past_warm_up_count():
    lines = [_line(100), _line(200)]
    assert health.verdict(lines, _ctx())["status"] == "unchecked"
    good = [_line(s, disc_loss=0.2, disc_auc=0.9, disc_recall=0.5) for s in (300, 400)]
    assert health.verdict(lines + good, _ctx())["status"] == "ok"


def test_generator_stuck_and_too_strong():
    stuck = [_line(s, gen_loss=8.9, gen_acc=0.001, disc_loss=0.2, disc_auc=0.9, disc_recall=0.5) for s in (300, 400)]
    v = health.verdict(stuck, _ctx())
    assert v["status"] == "not_learning" and "uniform guessing" in v["problems"][0]
    strong = [_line(s, replaced_share=0.01, disc_loss=0.05, disc_auc=0.9, disc_recall=0.5) for s in (300, 400)]
    assert "generator too strong" in health.verdict(strong, _ctx())["problems"][0]


def test_mlm_ablation_has_no_discriminator_checks():
    lines = [{"step": s, "mlm_loss": 8.95} for s in (300, 400)]
    v = health.verdict(lines, _ctx(objective="mlm"))
    assert v["status"] == "not_learning" and "masked LM" in v["problems"][0]
    lines = [{"step": s, "mlm_loss": 4.0, "disc_loss": 0.36, "replaced_token_share": 0.114} for s in (300, 400)]
    assert health.verdict(lines, _ctx(objective="mlm"))["status"] == "ok"


def test_all_tokens_mlm_is_judged_against_copying_its_input():
    """All-Tokens MLM copies its input wherever that is the original, so its loss starts far below
    ln|V| (1.22 at initialisation with 50 entries): the uniform-guessing check could never fire. It
    is stuck when it does no better than copying and guessing uniformly at the replaced inputs."""
    share, ctx = 0.13, _ctx(objective="all_tokens_mlm")
    copying = health.binary_entropy(share) + share * math.log(8000)  # 1.555
    stuck = [{"step": s, "mlm_loss": 0.95 * copying, "input_replaced_share": share, "gen_loss": 5.9, "gen_acc": 0.2}
             for s in (2400, 2500)]
    v = health.verdict(stuck, ctx)
    assert v["status"] == "not_learning" and v["figures"]["copy_only_loss"] == round(copying, 4)
    assert "learned no more than copying its input (loss 1.477 against 1.555" in v["problems"][0]
    # one that predicts the originals at the replaced inputs (their loss 4.0 of ln|V| = 8.99)
    learning = [{**line, "mlm_loss": health.binary_entropy(share) + share * 4.0} for line in stuck]
    assert health.verdict(learning, ctx)["status"] == "ok"


def test_warning_text_is_plain_words():
    v = health.verdict([_line(s) for s in (300, 400)], _ctx(lr=3e-3))
    text = health.warning_text(v)
    assert text.startswith("WARNING: this run has not learned") and "learning rate 0.003" in text
    assert text.endswith("Fine-tuning this model will likely score near chance.")


def test_an_expected_short_run_says_why_instead_of_naming_settings():
    # kolectra run's demo: the user chose none of its settings, so no cause to "fix" is named
    v = health.verdict([_line(s) for s in (300, 400)], _ctx(lr=3e-3, dropout=0.1, nonpad_tokens=10_000))
    text = health.warning_text(v, "the demo trains for 600 steps")
    assert text.startswith("WARNING: this model has not learned") and text.endswith(
        "Expected here: the demo trains for 600 steps.")
    assert "dropout" not in text and "learning rate" not in text


def test_a_run_that_ends_in_warm_up_says_so():
    lines = [_line(s) for s in (100, 200)]
    v = health.verdict(lines, _ctx(warmup_steps=200, total_steps=200))
    assert v == {"status": "unchecked", "reason": "the run ended in warm-up", "figures": {}}
    assert health.status_text(v) == "unchecked: the run ended in warm-up"
    text = health.unchecked_text(v, _ctx(warmup_steps=200, total_steps=200))
    assert text.startswith("WARNING: training health unchecked: the run ended in warm-up (200 steps, warm-up 200)")
    assert health.status_text(health.verdict(lines, _ctx())) == "unchecked: no metrics logged after warm-up"


def test_a_short_last_window_weighs_by_its_steps():
    # the hybrid pilot on the review corpus (docs/studies.md): 1,104 steps logged every 55, so the last
    # window holds 4 steps; its AUC must not outweigh the full window before it
    lines = [_line(990, disc_loss=0.3472, disc_auc=0.6352, disc_recall=0.013, replaced_token_share=0.1216),
             _line(1045, disc_loss=0.3447, disc_auc=0.6484, disc_recall=0.016, replaced_token_share=0.1214),
             _line(1100, disc_loss=0.3429, disc_auc=0.6521, disc_recall=0.023, replaced_token_share=0.1213),
             _line(1104, disc_loss=0.3410, disc_auc=0.6473, disc_recall=0.026, replaced_token_share=0.1199)]
    ctx = _ctx(warmup_steps=110, total_steps=1104)
    assert health.verdict(lines[:3], ctx)["status"] == "ok"  # what the trainer said at step 1100
    v = health.verdict(lines, ctx)
    assert v["status"] == "ok" and v["figures"]["disc_auc"] == round((55 * 0.6521 + 4 * 0.6473) / 59, 4)
    # two full windows still count equally, and the figure is printed finely enough to read against 0.65
    stuck = [_line(s, disc_loss=0.3447, disc_auc=a) for s, a in ((990, 0.6352), (1045, 0.6484), (1100, 0.6473))]
    v = health.verdict(stuck, ctx)
    assert v["status"] == "not_learning" and "AUC 0.648," in v["problems"][0]


def test_a_discriminator_worse_than_the_prior_has_learned_nothing():
    # tiny, 3 steps of 16 on the sample (k4): every token scored near 0.5, loss about ln 2, so the recall at
    # the 0.5 threshold is arbitrary (0.23); the generator's 3 % accuracy passes its check. Was "ok".
    three_steps = [_line(3, disc_loss=0.6813, disc_auc=0.5064, disc_recall=0.2253, disc_acc=0.6779,
                         replaced_token_share=0.1297, gen_loss=9.1389, gen_acc=0.0316, replaced_share=1.0)]
    v = health.verdict(three_steps, _ctx(warmup_steps=0, total_steps=3, vocab_size=9891))
    assert v["status"] == "not_learning"
    assert v["problems"] == ["the discriminator has not learned even the share of replaced tokens (loss 0.681, "
                             "above the 0.386 of always guessing the prior; AUC 0.506)"]
    # above the prior but past the plateau's AUC: it uses context (ok); below the prior at the plateau: the
    # "at the prior" check's business, unchanged (its recall here is too high for it: ok)
    assert health.verdict([{**three_steps[0], "disc_auc": 0.7}], _ctx(warmup_steps=0))["status"] == "ok"
    assert health.verdict([{**three_steps[0], "disc_loss": 0.38}], _ctx(warmup_steps=0))["status"] == "ok"


def test_a_window_of_replaced_tokens_only_is_not_worse_than_the_prior():
    """electra15, tiny, 30 steps on the sample (m1): its first windows past warm-up scored replaced tokens only
    (the generator replaced every masked slot), so no AUC and a prior of loss 0: loss 0.554 then 0.191, calling
    96 % then 100 % of them replaced, read 'has not learned even the share of replaced tokens (loss 0.373, above
    the 0.000 of always guessing the prior)', a warning mid-run and, for a run ending there, the verdict."""
    gen = dict(gen_loss=8.8, gen_acc=0.078, replaced_share=1.0, replaced_token_share=1.0, disc_auc=None)
    windows = [_line(10, disc_loss=0.5542, disc_acc=0.9611, disc_recall=0.9611, **gen),
               _line(20, disc_loss=0.1913, disc_acc=1.0, disc_recall=1.0, **gen)]
    ctx = _ctx(objective="electra15", vocab_size=9891, warmup_steps=3, total_steps=30)
    assert health.verdict(windows[:1], ctx)["status"] == "ok"
    assert health.verdict(windows, ctx)["status"] == "ok"
    # a window with an original token among them has an AUC, and the checks read it (a line without the class
    # counts, as written before them); its loss, 17 times the prior's, is worse than the prior, not at it
    v = health.verdict([windows[0], {**windows[1], "disc_auc": 0.4375, "replaced_token_share": 0.9996,
                                     "disc_loss": 0.0634, "disc_acc": 0.9996}], ctx)
    assert v["status"] == "not_learning" and v["problems"][0].startswith(
        "the discriminator has not learned even the share of replaced tokens (loss 0.063, above the 0.004"), v


def test_a_window_of_replaced_tokens_only_beside_one_with_an_auc_is_left_out_of_the_prior_check():
    """Only the windows with an AUC are set against the prior (m8): beside a window of replaced tokens only
    (loss 0.300, its prior 0), a window that beat its prior (loss 0.090 against H(0.98) = 0.098, AUC 0.55,
    a quarter of the originals called original) read 'has not learned even the share of replaced tokens
    (loss 0.195, above the 0.056 ...)': the two windows' mean loss against the prior of their mean share."""
    gen = dict(gen_loss=5.0, gen_acc=0.2, replaced_share=0.99)
    one_class = _line(20, disc_loss=0.30, disc_auc=None, replaced_token_share=1.0, disc_acc=0.99, disc_recall=0.99, **gen)
    both = _line(40, disc_loss=0.09, disc_auc=0.55, replaced_token_share=0.98, disc_acc=0.97, disc_recall=0.985, **gen)
    ctx = _ctx(objective="electra15", vocab_size=9891, warmup_steps=3, total_steps=40)
    assert health.verdict([both], ctx)["status"] == "ok"
    assert health.verdict([one_class, both], ctx)["status"] == "ok"  # before: not_learning
    worse = {**both, "disc_loss": 0.12}  # above its own prior: found, with that window's figures
    v = health.verdict([one_class, worse], ctx)
    assert v["problems"] == ["the discriminator has not learned even the share of replaced tokens (loss 0.120, "
                             "above the 0.098 of always guessing the prior; AUC 0.550)"], v


def test_a_gradient_norm_that_is_not_finite_says_the_steps_changed_nothing():
    # objective.disc_weight=1e30 (k4): the norm overflowed, clipping scaled the gradients by 0; losses stayed
    # finite and unchanged, grad_norm logged null in every line
    good = dict(disc_loss=0.2, disc_auc=0.9, disc_recall=0.5)
    stuck = [_line(s, grad_norm=None, **good) for s in (2400, 2500)]
    v = health.verdict(stuck, _ctx())
    assert v["status"] == "not_learning" and v["problems"] == [
        "the gradient norm was not finite (logged null) in the last windows: clipping scaled every gradient to 0, "
        "so those steps changed nothing (an extreme objective.disc_weight?)"]
    # one window with an overflow among finite ones, or lines without the key (older logs): no finding
    assert health.verdict([_line(2400, grad_norm=1.5, **good), stuck[1]], _ctx())["status"] == "ok"
    assert health.verdict([_line(s, **good) for s in (2400, 2500)], _ctx())["status"] == "ok"


def test_mlm_then_rtd_ending_in_the_warm_up_of_its_rtd_phase_is_unchecked():
    """mlm_then_rtd's RTD is judged past the warm-up counted again from its phase's start (n2): its first RTD
    window (2 steps, loss 0.696 against H(0.11) = 0.35) read 'has not learned even the share of replaced tokens'.
    A run ending before that is unchecked, saying why; the checks made there (the generator's) still count."""
    mlm = dict(disc_loss=None, disc_auc=None, disc_recall=None, replaced_token_share=None, disc_mlm_loss=3.3)
    first_rtd = dict(disc_loss=0.696, disc_auc=0.524, disc_recall=0.698, replaced_token_share=0.111, disc_acc=0.35)
    lines = [{k: v for k, v in _line(s, **mlm).items() if v is not None} for s in (18, 20)] + [_line(22, **first_rtd)]
    ctx = _ctx(objective="mlm_then_rtd", vocab_size=100, warmup_steps=4, total_steps=22, rtd_from=20)
    v = health.verdict(lines, ctx)
    assert v["status"] == "unchecked" and v["reason"] == health.ENDED_IN_RTD_WARMUP, v  # before: not_learning
    assert "disc_loss" not in v["figures"] and health_standing.withdraws(v)  # a generator's warning from the MLM phase goes
    assert health.unchecked_text(v, ctx) == (
        "WARNING: training health unchecked: the discriminator's RTD phase began after step 20 and its checks wait "
        "the warm-up's 4 steps from there, to step 24; the run ended at step 22, so whether its discriminator "
        "learned RTD was not checked; give more steps or a smaller objective.mlm_phase")
    stuck_generator = [{**ln, "gen_loss": 4.6, "gen_acc": 0.001} for ln in lines]
    assert health.verdict(stuck_generator, ctx)["status"] == "not_learning"
    # past step 24 the same window is judged; a plain run (rtd_from 0) judges it past warm-up alone
    later = [*lines[:2], {**lines[2], "step": 26}]
    assert health.verdict(later, _ctx(objective="mlm_then_rtd", vocab_size=100, warmup_steps=4, total_steps=40,
                                      rtd_from=20))["status"] == "not_learning"
    assert health.verdict(lines, _ctx(objective="electra", vocab_size=100, warmup_steps=4))["status"] == "not_learning"


def test_mlm_then_rtd_judges_its_mlm_phase_until_its_rtd_is_judged():
    """mlm_then_rtd's discriminator MLM (n14): never read before, so a head left at ln|V| through its MLM phase
    was not warned. Judged as the generator is (above 90 % of ln|V|, accuracy under 2 %) on the last windows
    past warm-up that scored the phase, weighted by their MLM steps, until the RTD is judged; a warning it gave
    is withdrawn by windows that judge the discriminator again, not by the RTD warm-up's."""
    ctx = _ctx(objective="mlm_then_rtd", vocab_size=100, warmup_steps=4, total_steps=40, rtd_from=21)
    rtd = dict(disc_loss=None, disc_auc=None, disc_recall=None, replaced_token_share=None)
    mlm = [{k: v for k, v in _line(s, **rtd, disc_mlm_loss=4.5, disc_mlm_acc=0.0).items() if v is not None}
           for s in (6, 8)]
    stuck = health.verdict(mlm, ctx)
    assert stuck["status"] == "not_learning", stuck  # before: unchecked
    assert stuck["problems"] == ["the discriminator's masked LM (its MLM phase, to step 21) has not left uniform "
                                 "guessing (loss 4.50 of ln|V| = 4.61, accuracy 0.000)"]
    in_warm_up = health.Context(**{**dataclasses.asdict(ctx), "warmup_steps": 8})
    assert health.verdict(mlm, in_warm_up)["status"] == "unchecked"  # no false alarm inside warm-up
    learnt = [{**ln, "disc_mlm_loss": 3.0, "disc_mlm_acc": 0.2} for ln in mlm]
    assert health.verdict(learnt, ctx)["status"] == "unchecked"
    assert health_standing.withdraws(health.verdict(learnt, ctx), stuck)
    # a window across the phase change (steps 21-24: one MLM step) weighs 1 beside the last MLM window's 10
    across = [{**learnt[0], "step": 10}, {**learnt[0], "step": 20},
              {**_line(24, disc_loss=0.69, disc_auc=None), "disc_mlm_loss": 4.6, "disc_mlm_acc": 0.0}]
    assert health.verdict(across, ctx)["figures"]["disc_mlm_loss"] == round((3.0 * 10 + 4.6) / 11, 4)
    # RTD warm-up windows judge neither phase: they keep the warning (a generator's warning goes, as before)
    warm = [{k: v for k, v in _line(s, **rtd).items() if v is not None} for s in (22, 24)]
    assert not health_standing.withdraws(health.verdict(warm, ctx), stuck)
    assert health_standing.final(health.verdict(warm, ctx), stuck)["status"] == "not_learning"
    assert health_standing.withdraws(health.verdict(warm, ctx), health.verdict([{**learnt[0], "gen_loss": 4.6, "gen_acc": 0}], ctx))
    # past step 25 the RTD decides: a stuck MLM line there is not read
    judged = [{**_line(s, disc_auc=0.8, disc_recall=0.3), "disc_mlm_loss": 4.6, "disc_mlm_acc": 0.0} for s in (28, 30)]
    assert health.verdict(judged, ctx)["status"] == "ok" and health_standing.withdraws(health.verdict(judged, ctx), stuck)


def test_a_window_of_replaced_tokens_only_neither_makes_nor_withdraws_the_at_prior_warning():
    """electra15 (q12 noticed; r1): the "at the class prior" check averaged the last two windows even where one had
    scored replaced tokens only (no AUC, share 1.0, recall 1.0, loss near 0). Beside such a step-18 window the
    step-16 window at the prior (loss 0.325 = H(0.9), AUC 0.53, every token called replaced) read loss 0.163
    against the 0.199 of the mean share 0.95, under 90 %: its warning was withdrawn ("learning now"). It is now
    judged on the windows that scored both classes alone, as the "worse than the prior" check is."""
    ctx = _ctx(objective="electra15", vocab_size=100, warmup_steps=4, total_steps=40)
    share = 0.9
    at_prior = dict(disc_loss=health.binary_entropy(share), disc_auc=0.53, disc_recall=1.0, disc_acc=share,
                    replaced_token_share=share)
    one_class = dict(disc_loss=0.001, disc_auc=None, disc_recall=1.0, disc_acc=1.0, replaced_token_share=1.0)
    standing = health.verdict([_line(s, **at_prior) for s in (14, 16)], ctx)
    assert standing["problems"][0].startswith("the discriminator sits at the class prior")
    lines = [_line(14, **at_prior), _line(16, **at_prior), _line(18, **one_class)]  # two windows of 2 steps
    v = health.verdict(lines, ctx)
    assert v["status"] == "not_learning", v  # before: ok, the mixed pair's loss 0.163 against 0.199
    assert v["problems"] == ["the discriminator sits at the class prior: it calls nearly every token replaced "
                             "(recall of original tokens 0.00, AUC 0.530, loss 0.325 against 0.325 for always "
                             "guessing the prior)"], v
    assert v["figures"]["disc_prior_loss"] == round(health.binary_entropy(share), 4)
    assert v["figures"]["disc_loss"] == round((at_prior["disc_loss"] + 0.001) / 2, 4)  # the figures: both windows
    kept, said = health_standing.watch(v, health_standing.watch(standing, None)[0])
    assert said == [] and kept["since"] == {"discriminator": 16}, said  # before: "learning now (step 18): ..."
    # nor does it make one: a window past the plateau beside it is ok, and two of them judge nothing
    learnt = dict(disc_loss=0.25, disc_auc=0.80, disc_recall=0.95, disc_acc=0.95 * share + 0.6 * (1 - share),
                  replaced_token_share=share)
    assert health.verdict([_line(14, **learnt), _line(16, **learnt), _line(18, **one_class)], ctx)["status"] == "ok"
    assert health.verdict([_line(s, **one_class) for s in (14, 16, 18)], ctx)["status"] == "ok"
