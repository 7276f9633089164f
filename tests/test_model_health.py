"""The training-health verdict (model/health.py) on metrics shaped like real runs of ``mini`` on
the review corpus: the identity-only plateau (AUC 0.58) is "at the prior", a discriminator that has
climbed past it is not, and the generator checks fire on their own figures."""

import dataclasses
import math

from kolectra.model import health, health_standing


def _ctx(**kw):
    base = dict(objective="electra", vocab_size=8000, warmup_steps=250, total_steps=2500, lr=1e-3,
                nonpad_tokens=10_000_000, padding_share=0.002)
    return health.Context(**{**base, **kw})


def _line(step, **kw):
    base = dict(disc_loss=0.3515, disc_auc=0.58, disc_recall=0.002, replaced_token_share=0.114,
                gen_loss=5.9, gen_acc=0.2, replaced_share=0.86)
    return {"step": step, **{**base, **kw}}


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


def test_recovery_line_names_the_step_and_auc():
    v = health.verdict([_line(s, disc_loss=0.32, disc_auc=0.69, disc_recall=0.04) for s in (2400, 2500)], _ctx())
    assert health_standing.recovery_text(v) == "learning now (step 2500): the earlier warning no longer holds (disc AUC 0.69)."


def test_the_trainer_warns_once_then_says_when_the_run_recovers(capsys):
    from types import SimpleNamespace

    from kolectra.model.train import watch_health

    run = SimpleNamespace(cfg=SimpleNamespace(train=SimpleNamespace(warmup_steps=250)), warned=False, expected_untrained=None,
                          health_context=_ctx)
    stuck = [_line(s) for s in (300, 400, 500)]
    climbing = [_line(s, disc_loss=0.32, disc_auc=0.69, disc_recall=0.04) for s in (600, 700)]
    lines = []
    for line in stuck + climbing:
        lines.append(line)
        watch_health(run, lines)
    err = capsys.readouterr().err
    assert err.count("WARNING: this run has not learned") == 1
    assert err.count("learning now (step 700)") == 1 and not run.warned


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


def test_windows_of_replaced_tokens_only_do_not_withdraw_a_warning(capsys):
    """electra15, tiny, batch 2, log every 3 steps on the sample (m8): between windows with an AUC came windows
    whose scored tokens were all replaced (no AUC, loss 0.000-0.001); each pair of them read ok, so a warning
    standing since step 60 was withdrawn at 63 ('learning now') and given again at 72: 11 such lines in 120
    steps. Such windows show no learning; a window with an AUC past the plateau withdraws it."""
    from types import SimpleNamespace

    from kolectra.model.train import watch_health

    ctx = _ctx(objective="electra15", vocab_size=9891, warmup_steps=3, total_steps=120)
    run = SimpleNamespace(cfg=SimpleNamespace(train=SimpleNamespace(warmup_steps=3)), warned=False,
                          expected_untrained=None, health_context=lambda: ctx)
    gen = dict(gen_loss=7.9, gen_acc=0.05, disc_recall=1.0)
    one_class = dict(disc_auc=None, replaced_token_share=1.0, disc_acc=1.0, replaced_share=1.0, **gen)
    lines = []
    for line in [_line(57, disc_loss=0.3797, disc_auc=0.5076, replaced_token_share=0.9588, disc_acc=0.9588,
                       replaced_share=0.9588, **gen),
                 _line(60, disc_loss=0.0002, **one_class), _line(63, disc_loss=0.0006, **one_class)]:
        lines.append(line)
        watch_health(run, lines[-3:])
    err = capsys.readouterr().err
    assert err.count("WARNING: this run has not learned") == 1 and "learning now" not in err and run.warned, err
    lines.append(_line(66, disc_loss=0.04, disc_auc=0.75, replaced_token_share=0.99, disc_acc=0.995,
                       replaced_share=0.99, **gen))
    watch_health(run, lines[-3:])
    assert "learning now (step 66): the earlier warning no longer holds (disc AUC 0.75)." in capsys.readouterr().err
    assert not run.warned


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


def test_a_standing_warning_is_the_verdict_where_the_last_windows_judged_nothing():
    """health_standing.final (n2): a warning printed and not withdrawn stands at the end where the last windows did not
    judge the discriminator (no AUC), and says so; a verdict that withdraws it, or finds a problem, is the end's."""
    one_class = dict(disc_auc=None, replaced_token_share=1.0, disc_acc=1.0, disc_recall=1.0, replaced_share=1.0)
    ctx = _ctx(objective="electra15", vocab_size=100, warmup_steps=4, total_steps=39)
    stuck = _line(27, disc_loss=0.3, disc_auc=0.45, replaced_token_share=0.95, disc_acc=0.95, disc_recall=1.0)
    standing = health.verdict([stuck], ctx)
    assert standing["status"] == "not_learning"
    end = health.verdict([stuck, _line(36, disc_loss=0.003, **one_class), _line(39, disc_loss=0.002, **one_class)], ctx)
    assert end["status"] == "ok" and not health_standing.withdraws(end)
    v = health_standing.final(end, standing)
    assert v["status"] == "not_learning" and v["problems"] == standing["problems"] and v["figures"]["step"] == 27
    assert v["stands"] == ("It stands at the end: the windows after step 27, to step 39, did not judge the "
                           "discriminator again (every token they scored was replaced: no AUC).")
    assert v["stands"] in health.warning_text(v)
    assert health_standing.final(end, None) == end
    recovered = health.verdict([_line(36, disc_loss=0.05, disc_auc=0.8, replaced_token_share=0.95, disc_acc=0.97,
                                      disc_recall=1.0)], ctx)
    assert health_standing.final(recovered, standing) == recovered


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


def test_a_warning_about_the_generator_alone_is_withdrawn_by_windows_judging_the_generator():
    """electra15, tiny, batch 2, lr 5e-4 (q2): warned at step 6 that the generator had not left uniform guessing;
    from step 9 its accuracy was 0.05-0.35, but its windows scored replaced tokens only (no AUC), which do not
    withdraw a warning, so the run ended not_learning on the generator's problem of step 6 ('stands ... did not
    judge the discriminator again'). The generator is judged in every window: a warning of its alone goes once
    its checks pass; one naming the discriminator too still waits for an AUC."""
    one_class = dict(disc_auc=None, replaced_token_share=1.0, disc_acc=1.0, disc_recall=1.0, replaced_share=1.0)
    ctx = _ctx(objective="electra15", vocab_size=135, warmup_steps=4, total_steps=60)
    uniform = dict(gen_loss=4.9, gen_acc=0.0, disc_loss=0.68, disc_auc=0.89, replaced_token_share=0.95,
                   disc_acc=0.95, disc_recall=1.0, replaced_share=0.95)
    standing = health.verdict([_line(3, **uniform), _line(6, **uniform)], ctx)
    assert standing["problems"][0].startswith("the generator has not left uniform guessing"), standing
    end = health.verdict([_line(s, disc_loss=0.58, gen_loss=4.4, gen_acc=0.2, **one_class) for s in (57, 60)], ctx)
    assert end["status"] == "ok" and health_standing.withdraws(end, standing)  # before: False
    assert health_standing.final(end, standing) == end  # before: not_learning, 'It stands at the end'
    both = {**standing, "problems": [*standing["problems"], "the discriminator sits at the class prior: ..."]}
    assert not health_standing.withdraws(end, both) and health_standing.final(end, both)["status"] == "not_learning"
    still = health.verdict([_line(s, disc_loss=0.58, gen_loss=4.9, gen_acc=0.0, **one_class) for s in (57, 60)], ctx)
    assert still["status"] == "not_learning" and not health_standing.withdraws(still, standing)


def test_a_standing_warning_over_a_run_whose_last_windows_were_all_in_warm_up_names_the_run_s_end():
    """A run resumed with train.force_resume and a warm-up past its end (q2): no window past warm-up was read, so
    the verdict's 'stands' said 'the windows after step 27, to step None, did not judge ...' in stats.health and
    both cards. It names the run's last step; without one, none."""
    ctx = _ctx(objective="electra15", vocab_size=100, warmup_steps=50, total_steps=39)
    standing = health.verdict([_line(27, disc_loss=0.3, disc_auc=0.45, replaced_token_share=0.95, disc_acc=0.95,
                                     disc_recall=1.0)], _ctx(objective="electra15", vocab_size=100, warmup_steps=4))
    end = health.verdict([_line(s) for s in (27, 30, 33, 36, 39)], ctx)
    assert end["status"] == "unchecked" and end["figures"] == {} and end["reason"] == health.ENDED_IN_WARMUP
    assert health_standing.final(end, standing, 39)["stands"] == (
        "It stands at the end: the windows after step 27, to step 39, did not judge the discriminator again (the "
        "run ended in warm-up).")  # before: 'to step None'
    assert "None" not in health_standing.final(end, standing)["stands"]


def test_a_warning_about_the_mlm_phase_does_not_silence_the_rtd_s(capsys):
    """mlm_then_rtd with objective.disc_mlm_weight=0 (q2): warned at step 6 that its MLM phase had not left uniform
    guessing, the run never said that its RTD discriminator sat at the class prior (warned at step 30 before the
    MLM phase was judged, e196c85): a standing warning silenced every later one, and the MLM phase is not judged
    again once the RTD is. Another problem is now warned of (and, q12, a problem of any part no warning stands
    for: test_each_part_s_warning_stands_and_is_withdrawn_on_its_own)."""
    from types import SimpleNamespace

    from kolectra.model.train import watch_health

    ctx = _ctx(objective="mlm_then_rtd", vocab_size=100, warmup_steps=4, total_steps=60, rtd_from=24,
               disc_mlm_weight=0.0)
    run = SimpleNamespace(cfg=SimpleNamespace(train=SimpleNamespace(warmup_steps=4)), warned=False, standing=None,
                          expected_untrained=None, health_context=lambda: ctx)
    rtd = dict(disc_loss=None, disc_auc=None, disc_recall=None, replaced_token_share=None)
    lines = [{k: v for k, v in _line(s, **rtd, disc_mlm_loss=4.9, disc_mlm_acc=0.0).items() if v is not None}
             for s in (6, 8)]
    for n in (1, 2):
        watch_health(run, lines[:n])
    assert "(step 6): the discriminator's masked LM" in capsys.readouterr().err
    at_prior = [_line(s, disc_loss=0.35, disc_auc=0.53, disc_recall=0.02) for s in (28, 30)]
    for n in (1, 2):
        watch_health(run, [*lines, *at_prior[:n]])
    err = capsys.readouterr().err
    assert "WARNING: this run has not learned what it should (step 30): the discriminator sits at the class prior" \
           in err, err  # before: nothing
    assert run.standing["problems"][0].startswith("the discriminator sits at the class prior")
    watch_health(run, [*lines, *at_prior, _line(32, disc_loss=0.35, disc_auc=0.53, disc_recall=0.02, gen_loss=4.9,
                                                gen_acc=0.0)])
    assert capsys.readouterr().err == ""  # a warning standing about the RTD: not said again
    assert not health_standing.warns_anew(health.verdict(lines, ctx), health.verdict(lines, ctx))


def _watched(run, lines: list[dict], ctx) -> list[str]:
    """What the trainer does at each logged line (model.train.watch_health): the lines it prints."""
    run.standing, said = health_standing.watch(health.verdict(lines, ctx), run.standing)
    return said


def test_each_part_s_warning_stands_and_is_withdrawn_on_its_own():
    """A generator warning standing silenced a later discriminator at the class prior (q2 noticed; q12): electra,
    warned at step 6 that the generator had not left uniform guessing, said nothing when its discriminator sat
    at the prior from step 12, which only the verdict named. Each part now stands and goes on its own: the
    discriminator is warned of, the generator withdrawn once it learns while the discriminator's stands, and
    the end's verdict names every part still standing."""
    from types import SimpleNamespace

    ctx = _ctx(vocab_size=100, warmup_steps=4, total_steps=40)
    run, said = SimpleNamespace(standing=None), []
    stuck_gen, gen_ok = dict(gen_loss=4.9, gen_acc=0.0), dict(gen_loss=3.0, gen_acc=0.3)
    disc_ok, at_prior = dict(disc_auc=0.8, disc_recall=0.3, disc_loss=0.2), dict(disc_auc=0.53, disc_recall=0.02)
    lines = []
    for step, kw in ((6, {**stuck_gen, **disc_ok}), (8, {**stuck_gen, **disc_ok}), (10, {**stuck_gen, **at_prior}),
                     (12, {**stuck_gen, **at_prior})):
        lines.append(_line(step, **kw))
        said += _watched(run, lines, ctx)
    err = "\n".join(said)
    assert "(step 6): the generator has not left uniform guessing" in err
    assert "WARNING: this run has not learned what it should (step 12): the discriminator sits at the class " \
           "prior" in err, err  # before: nothing after step 6
    assert [health_standing.part(p) for p in run.standing["problems"]] == ["generator", "discriminator"]
    assert run.standing["since"] == {"generator": 6, "discriminator": 12}
    said = []
    for step in (14, 16):
        lines.append(_line(step, **gen_ok, **at_prior))
        said += _watched(run, lines, ctx)
    assert said == ["learning now (step 14): the earlier warning about the generator no longer holds; the one "
                    "about the discriminator stands."]
    assert [health_standing.part(p) for p in run.standing["problems"]] == ["discriminator"]
    # windows of replaced tokens only (no AUC) judge the generator alone: a generator stuck again is warned of,
    # and the end's verdict names it and the discriminator's warning, which they did not judge again
    one_class = dict(disc_auc=None, replaced_token_share=1.0, disc_acc=1.0, disc_recall=1.0, replaced_share=1.0)
    last = health.verdict([_line(step, disc_loss=0.5, **stuck_gen, **one_class) for step in (18, 20)], ctx)
    standing, said = health_standing.watch(last, run.standing)
    assert len(said) == 1 and "(step 20): the generator has not left uniform guessing" in said[0]
    assert standing["since"] == {"discriminator": 12, "generator": 20}
    end = health_standing.final(last, standing, 20)
    assert [health_standing.part(p) for p in end["problems"]] == ["generator", "discriminator"], end  # before: generator
    # (the windows at 14 and 16 judged the discriminator and found it at the prior still: not 'after step 12')
    assert end["stands"] == ("It stands at the end: warned at step 12 and found again by the windows to step 16; the "
                             "windows after that, to step 20, did not judge the discriminator again (every token they "
                             "scored was replaced: no AUC).")
    # a standing saved before the parts stood alone (one verdict, no 'since') maps to its step
    old = {k: v for k, v in standing.items() if k != "since"}
    assert health_standing.standing_since(old) == {"discriminator": 20, "generator": 20}
    assert health_standing.saved_standing({"health": {"standing": old}}) == old
    assert health_standing.watch(health.verdict(lines[:2], ctx), old)[0]["since"] == {"generator": 20}  # disc AUC 0.8


def test_the_end_s_verdict_names_a_standing_part_its_last_windows_did_not_judge():
    """electra15 (q12): a warning that the discriminator sat at the class prior stood (printed at step 12), and the
    last windows, of replaced tokens only (no AUC), found the generator stuck: the verdict was theirs alone, the
    generator's, and the discriminator's warning, never withdrawn, was said nowhere at the end."""
    ctx = _ctx(objective="electra15", vocab_size=100, warmup_steps=4, total_steps=20)
    standing = health.verdict([_line(s, disc_auc=0.53, disc_recall=0.02) for s in (10, 12)], ctx)  # as saved
    assert standing["problems"][0].startswith("the discriminator sits at the class prior")
    one_class = dict(disc_auc=None, replaced_token_share=1.0, disc_acc=1.0, disc_recall=1.0, replaced_share=1.0)
    last = health.verdict([_line(s, disc_loss=0.5, gen_loss=4.9, gen_acc=0.0, **one_class) for s in (18, 20)], ctx)
    assert len(last["problems"]) == 1 and last["problems"][0].startswith("the generator has not left uniform")
    end = health_standing.final(last, standing, 20)
    assert end["problems"] == [*last["problems"], standing["problems"][0]], end  # before: last["problems"]
    assert end["stands"].startswith("It stands at the end: the windows after step 12, to step 20, did not judge "
                                    "the discriminator again")
    assert end["figures"] == last["figures"] and end["likely_causes"] == last["likely_causes"]


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
