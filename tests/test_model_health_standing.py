"""A training-health warning across a run (model/health_standing.py, model.train.watch_health): the trainer
warns once and says when the run recovers, windows that judged nothing neither withdraw a warning nor end it,
each part's (generator, discriminator, its MLM phase) warning stands and goes on its own, and the end's verdict
names a warning still standing. The verdict on one set of windows is tests/test_model_health.py's."""

from kolectra.model import health, health_standing
from tests.model_health_support import _ctx, _line


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
