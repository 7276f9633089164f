"""Standing warnings of the pretrain health check: which warning stands across a run's windows, and what
the run says of it as it goes, at its end and after a resume.

:mod:`model.health` judges a window's lines (a verdict: ok, not_learning or unchecked); the trainer
(``model.train.watch_health``, ``finish``) hands each verdict here. A part of the model (:data:`PARTS`: the
generator, the discriminator, ...) is warned of the first time a check of it fails, and withdrawn ("learning
now") once windows judge it again without a finding, each part on its own (:func:`watch`). At the end a part
neither withdrawn nor found again stands beside the last windows' verdict (:func:`final`), and the run's last
line says so (:func:`end_text`); a checkpoint keeps the standing warning, so that a resumed run ends as the
straight one does (:func:`saved_standing`). It reads verdicts only, never the metrics lines.
"""

from __future__ import annotations

from kolectra.model import health as health_checks  # MIN_CLASS_TOKENS read when used (tests set it)
from kolectra.model.health import DISC_MLM_STUCK, DISC_NOT_JUDGED, ENDED_IN_RTD_WARMUP, GENERATOR_FINDING, warning_text

# The part of the model each finding is about, by how its sentence opens (the first that fits), and the words a
# line names it by: a warning of each part stands, and is withdrawn, on its own (:func:`watch`).
PARTS = ((GENERATOR_FINDING, "generator", "the generator"),
         (DISC_MLM_STUCK, "disc_mlm", "the discriminator's MLM phase"),
         ("the discriminator ", "discriminator", "the discriminator"),
         ("the gradient norm ", "grad_norm", "the gradient norm"),
         ("", "lm", "the language model"))


def part(problem: str) -> str:
    """The part a finding is about: ``generator``, ``disc_mlm``, ``discriminator``, ``grad_norm`` or ``lm``."""
    return next(name for opening, name, _ in PARTS if problem.startswith(opening))


def _part_words(name: str) -> str:
    return next(words for _, n, words in PARTS if n == name)


def standing_since(standing: dict | None) -> dict[str, int | None]:
    """Each part a standing warning names, and the step it was warned at. A standing saved before the parts stood
    on their own (one verdict, no ``since``) maps each of its problems' parts to that verdict's step."""
    if not standing:
        return {}
    since = standing.get("since") if isinstance(standing.get("since"), dict) else {}
    step = standing.get("figures", {}).get("step")
    return {part(p): since.get(part(p), step) for p in standing.get("problems", ())}


def judges(health: dict, name: str) -> bool:
    """Whether the windows of ``health`` judged the part ``name`` again, so that no finding of it there withdraws
    a warning of it. The generator's figures are in every line past warm-up; the discriminator is judged where
    it scored both classes (an AUC: windows whose scored tokens were all replaced, as electra15's with a generator
    that replaced every masked slot, show no learning: a batch-2 run's said "learning now" three times in 120
    steps between warnings, m8), with :data:`model.health.MIN_CLASS_TOKENS` of each (``disc_judged`` False: none had); mlm_then_rtd's
    MLM phase by windows that judge the discriminator again, its MLM phase's or its RTD's (not the first RTD
    windows, in that phase's warm-up)."""
    f = health["figures"]
    if not f or health["status"] == "unchecked" and health.get("reason") not in (ENDED_IN_RTD_WARMUP, DISC_NOT_JUDGED):
        return False
    disc = "disc_auc" in f and f.get("disc_judged") is not False  # a window with enough of each class (_scored)
    if name == "generator":
        return "gen_loss" in f or "replaced_share" in f
    if name == "disc_mlm":
        return "disc_mlm_loss" in f or disc
    if name == "discriminator":
        return "disc_loss" not in f or disc
    return True


def _withdrawn(health: dict, since: dict[str, int | None]) -> list[str]:
    """The standing parts that ``health`` withdraws: judged again, with no finding of theirs."""
    found = {part(p) for p in health.get("problems", ())}
    return [name for name in since if name not in found and judges(health, name)]


def watch(health: dict, standing: dict | None, expected: str | None = None) -> tuple[dict | None, list[str]]:
    """A logged window's verdict ``health`` against the warning standing (None: none): the standing after it, and
    the lines to print. Each part (:data:`PARTS`) stands and is withdrawn on its own: a finding about a part
    that no warning stands for is warned of, and a standing part that the window judged again without a finding
    is withdrawn ("learning now"), the others standing: a warning about the generator does not silence a later
    one about the discriminator (electra15, tiny, lr 5e-4: the generator at uniform guessing at step 6, the
    discriminator at the class prior from step 9), nor waits for the discriminator to be withdrawn itself."""
    since = standing_since(standing)
    gone = _withdrawn(health, since)
    kept = {name: step for name, step in since.items() if name not in gone}
    new = [p for p in health.get("problems", ()) if health["status"] == "not_learning" and part(p) not in kept]
    said = []
    # the MLM phase's warning gives way to one about its RTD, which judges the discriminator again: not learning
    learnt = [n for n in gone if not (n == "disc_mlm" and any(part(p) == "discriminator" for p in new))]
    if learnt and not kept and not new and learnt == list(since):
        said.append(recovery_text(health))
    elif learnt:
        stands = f"; the one about {' and '.join(_part_words(n) for n in kept)} stands" if kept else ""
        said.append(f"learning now (step {health['figures'].get('step')}): the earlier warning about "
                    f"{' and '.join(_part_words(n) for n in learnt)} no longer holds{stands}.")
    if new:
        said.append(warning_text(health, expected))
    if not kept and not new:
        return None, said
    base = health if new else standing
    step = health["figures"].get("step")
    problems = [p for p in (standing or {}).get("problems", ()) if part(p) in kept] + new
    # a standing part these windows judged again is one they found again (else it was withdrawn): the step, so that
    # the verdict at the end does not say that the windows after the warning never judged it (:func:`final`)
    found_again = {**{n: s for n, s in ((standing or {}).get("judged") or {}).items() if n in kept},
                   **{n: step for n in kept if judges(health, n)}}
    out = {**{k: v for k, v in base.items() if k not in ("stands", "judged")}, "status": "not_learning",
           "problems": problems, "since": {**kept, **{part(p): step for p in new}}}
    return ({**out, "judged": found_again} if found_again else out), said


def warns_anew(health: dict, standing: dict | None) -> bool:
    """Whether a not-learning ``health`` is warned of while ``standing`` stands (:func:`watch`): when it names a
    part that no standing warning is about."""
    return health["status"] == "not_learning" and any(
        part(p) not in standing_since(standing) for p in health.get("problems", ()))


def withdraws(health: dict, standing: dict | None = None) -> bool:
    """Whether ``health`` withdraws the whole of a standing warning (``standing``, the verdict that gave it;
    None: judged as one about the discriminator): every part it names judged again without a finding
    (:func:`judges`). A warning about the generator alone is withdrawn by windows that judge the generator again,
    whatever the discriminator's scored: electra15, tiny, batch 2, lr 5e-4 warned 'the generator has not left
    uniform guessing (loss 4.90, accuracy 0.000)' at step 6, and with its accuracy at 0.05-0.35 from step 9 on,
    windows of replaced tokens only kept the warning, which ended the run as its verdict."""
    since = standing_since(standing) or {"discriminator": None}
    return health["status"] != "not_learning" and len(_withdrawn(health, since)) == len(since)


def final(health: dict, standing: dict | None, end_step: int | None = None) -> dict:
    """The run's verdict at its end, ``health`` (its last windows'), where ``standing`` is the warning printed and
    never withdrawn (None: none stands). Each part it names that the last windows neither withdrew nor found
    again stands in the verdict beside theirs (:func:`watch`), ``stands`` saying why: electra15, tiny, batch 2,
    42 steps on the sample warned at step 36 and ended 'ok' in its stats and both cards, its windows at 39 and
    42 having scored replaced tokens only. ``end_step``: the run's last step, said where no window past warm-up
    was read (a run resumed with train.force_resume and a warm-up past its end read 'to step None')."""
    since = standing_since(standing)
    gone = set(_withdrawn(health, since))
    found = {part(p) for p in health.get("problems", ())} if health["status"] == "not_learning" else set()
    kept = {name: step for name, step in since.items() if name not in gone and name not in found}
    if not kept:
        return health
    steps = [s for s in kept.values() if s is not None]
    first, last = (min(steps) if steps else None), health["figures"].get("step", end_step)
    # windows after the warning that judged a standing part found it again: the windows not judging it are those after
    # the last of them (the mlm_then_rtd run of tiny, 60 steps of 8: warned at step 36, its windows at 42 and 52
    # found it again, those at 54 to 60 scored fewer than 50 replaced tokens; "the windows after step 36 did not judge
    # the discriminator again" was said)
    judged = standing.get("judged") or {}
    lasts = [judged.get(n, s) for n, s in kept.items() if judged.get(n, s) is not None]
    after = max(lasts) if lasts and judged else first
    why = (f"each scored fewer than {health_checks.MIN_CLASS_TOKENS} tokens of a class" if health.get("reason") == DISC_NOT_JUDGED
           or health["figures"].get("disc_judged") is False else health.get("reason")
           or "every token they scored was replaced: no AUC")
    to = f", to step {last}," if last is not None else ""
    words = " and ".join(dict.fromkeys("the discriminator" if n in ("discriminator", "disc_mlm") else _part_words(n)
                                       for n in kept))
    if after != first:
        stands = (f"It stands at the end: warned at step {first} and found again by the windows to step {after}; the "
                  f"windows after that{to} did not judge {words} again ({why}).")
    else:
        stands = f"It stands at the end: the windows after step {first}{to} did not judge {words} again ({why})."
    problems = [p for p in standing["problems"] if part(p) in kept]
    if found:
        return {**health, "problems": [*health["problems"], *problems], "stands": stands}
    return {**{k: v for k, v in standing.items() if k not in ("since", "judged")}, "problems": problems,
            "stands": stands}


def end_text(health: dict, standing: dict | None, expected: str | None = None) -> str:
    """The verdict as the run's last line ends (``pretrain done: ...; training health: ...``). A warning printed
    during the run was the only word of it: a run that learned nothing ended, hours of progress lines later,
    like one that did (``pretrain done: 120 steps in 0m15s, final loss 43.6478``). ``standing``: the warning
    printed during the run and never withdrawn (None: the end printed it, the line above, or none stands);
    ``expected``: why the caller planned a run too short to learn (:func:`model.health.warning_text`)."""
    status = health["status"]
    if status == "ok":
        return "training health: ok"
    if status == "unchecked":
        return f"training health: unchecked ({health.get('reason') or 'no metrics'})"
    if standing is None:
        return "training health: NOT LEARNING (the WARNING above)"
    since = [s for s in standing_since(standing).values() if s is not None]
    first = f"warned at step {min(since)}, " if since else ""
    said = f"training health: NOT LEARNING ({first}standing at the end): " + "; ".join(health["problems"])
    return said + (" (expected here, as the warning said)" if expected else "")



def recovery_text(health: dict) -> str:
    """The line that withdraws an earlier warning once the checks pass."""
    f = health["figures"]
    auc = f" (disc AUC {f['disc_auc']:.2f})" if "disc_auc" in f and f.get("disc_judged") is not False else ""
    return f"learning now (step {f.get('step')}): the earlier warning no longer holds{auc}."


def saved_standing(state: dict) -> dict | None:
    """The verdict of a warning a checkpoint's run had printed and not withdrawn (``model.train.watch_health``), or None.
    Saved so that a resumed run ends with the verdict the straight run gives (:func:`final`): kept
    per process only, a warning at step 27 of electra15 (tiny, batch 2) was lost by a
    resume from step 30, whose windows of replaced tokens only judged nothing, and the run ended ``ok``. A
    checkpoint written before it has no ``health``: nothing stands; one written before each part stood on its
    own has no ``since``: each part it names stands from its step (:func:`standing_since`)."""
    standing = (state.get("health") or {}).get("standing")
    if isinstance(standing, dict) and standing.get("status") == "not_learning" and standing.get("problems"):
        return standing
    return None
