"""Is pretraining learning? Plain-words verdicts from the metrics lines, where the user looks.

A run can finish with a falling total loss and still have learned nothing useful: the total is
dominated by the generator's MLM loss, while the discriminator may sit at its class prior (it
calls every token "original": recall near 0, AUC at the low plateau that token identity alone
gives, loss near the entropy of the replaced-token share) or the generator may never leave
uniform guessing. Fine-tuning such a model gives chance-level scores with no hint why. This
module reads the ``metrics.jsonl`` lines past warm-up and says so, naming likely causes from what
the run knows (tokens seen, padding, learning rate, warm-up, dropout). The trainer prints a
warning the first time a check of a part (the generator, the discriminator, ...) fails and one more line
if that part's checks pass again later, each part on its own; the final verdict, naming
every part still standing, goes into the artifact's stats (``health``) and the model cards. This module
judges a window's lines (:func:`verdict`) and words a verdict; which warning stands across a run's
windows, and what its last line says of it, is :mod:`model.health_standing`.

Thresholds (checked on the mean of the last two logged windows past warm-up, each weighted by its
steps):

- the discriminator is judged on windows that scored at least :data:`MIN_CLASS_TOKENS` (50) tokens of each
  class (replaced and original, all ranks: ``disc_replaced_tokens``, ``disc_original_tokens``): with fewer, the
  AUC and recall swing with a token or two (electra15, tiny, batch 2 on the sample: 1-2 original tokens a
  window, AUC 0.26 to 0.96, eight warning and "learning now" lines in 120 steps). At 50, the AUC's standard
  error on the plateau is about 0.04 (Hanley and McNeil), against the 0.07 between the plateau and 0.65, and
  a recall below 0.05 is at most 2 tokens. A run whose last windows judged it in none, and found nothing
  else, is ``unchecked`` (:data:`DISC_NOT_JUDGED`); the progress line marks such a window ("not judged").
  Lines written before the counts (a resumed run's earlier lines) are judged as they were.
- discriminator at the prior: loss within 10 % of the prior's entropy (either side), AUC below 0.65 and recall
  below 0.05 (the replaced tokens' recall; where most tokens it scores were replaced, as in
  ``electra15``, which scores only the masked slots, the original tokens'), judged on the windows that
  scored both classes alone (an AUC; a window of replaced tokens only, share 1.0, neither makes nor
  withdraws it). A stuck
  discriminator's AUC is not 0.5: once the generator samples roughly by
  frequency, a replaced token can still be told apart a little by its identity alone, so a stuck
  discriminator sits on a plateau below 0.65 for thousands of steps, and one that starts using
  context climbs past it while its recall at the 0.5 threshold stays low (few tokens are replaced).
  Where the plateau and the line were measured: docs/studies.md, "Where the discriminator leaves
  the prior".
- gradient norm not finite in every window read (logged null): clipping zeroed the updates.
- discriminator not even at the prior: loss above the prior's entropy and AUC below 0.65, whatever
  its recall (a run of a few steps: every token scored near 0.5, loss about ln 2, recall arbitrary); a loss
  more than 10 % above the prior's at a recall near 0 is this, not "at the prior" (electra15's step 9 on the
  small chain, loss 0.679 against 0.210, read "sits at the class prior");
  judged on the windows that scored both classes alone (a window of replaced tokens only has no AUC, and a
  prior of 0).
- ``mlm_then_rtd``: its discriminator starts RTD when its MLM phase ends, with a binary head that was idle
  until then, so the discriminator checks above wait the run's warm-up again from there (as a plain run's
  first RTD steps are not judged); a run that ends inside that wait is ``unchecked`` unless another check
  failed. Until then its discriminator is judged as the masked LM it was in its MLM phase, on the last two
  windows past warm-up that scored that phase (as the generator): stuck where its loss is above 90 % of
  ln|V| and its accuracy below 2 % (objective.disc_mlm_weight=0 leaves its vocabulary head untrained).
- generator stuck: loss above 90 % of ln|V| (uniform guessing) and accuracy below 2 %.
- generator too good: fewer than 2 % of masked slots replaced, so the discriminator sees almost no
  positives (the paper, section 3.2: a generator as strong as the discriminator hurts).
- an MLM ablation stuck: loss above 90 % of ln|V|. All-Tokens MLM scores every token through a
  copy mechanism, so its loss starts far below ln|V| (copying the input is right wherever it is
  the original); it is stuck when its loss is above 90 % of what copying alone gets: with ``r``
  the share of its inputs that are not the original, H(r) for when to copy plus r ln|V| for
  guessing the rest uniformly (the same 90 % of ln|V| at the replaced tokens).
"""

from __future__ import annotations

import dataclasses
import math

from kolectra.core.words import counted
from kolectra.model.config import RTD_OBJECTIVES  # noqa: F401  (the RTD family: the discriminator checks apply)
from kolectra.model.schedule import warmup_end

ENDED_IN_WARMUP = "the run ended in warm-up"
ENDED_IN_RTD_WARMUP = "the run ended in the warm-up of its RTD phase"  # mlm_then_rtd (rtd_judged_from)
# The lines a verdict reads: the last two windows past warm-up and the line before them (where the
# first of them starts). The trainer keeps only these (model.metrics.MetricsLog.lines), so a run's
# memory and its per-line checks do not grow with its steps; a verdict on more lines is the same.
LINES_READ = 3
AUC_LEFT_PRIOR = 0.65  # above the identity-only plateau: the discriminator uses context (docs/studies.md)
MIN_CLASS_TOKENS = 50  # of each class a window's discriminator scored, for it to be judged (the docstring says why)
# The reason of a verdict ``unchecked`` because no window read judged the discriminator (too few of a class)
DISC_NOT_JUDGED = "its last windows scored too few tokens of a class to judge the discriminator"


def binary_entropy(p: float) -> float:
    """Natural-log entropy of a coin with P(heads) = p: the loss of always guessing the prior."""
    if p <= 0.0 or p >= 1.0:
        return 0.0
    return -(p * math.log(p) + (1 - p) * math.log(1 - p))


@dataclasses.dataclass(frozen=True)
class Context:
    """What the run knows besides its metrics, for naming likely causes."""

    objective: str
    vocab_size: int
    warmup_steps: int
    total_steps: int
    lr: float
    nonpad_tokens: int = 0  # seen so far by the whole run: all ranks, earlier processes of a resumed run
    padding_share: float = 0.0  # of every global batch's slots up to the last logged step
    dropout: float = 0.0  # the model's hidden dropout
    schedule: str = "warmup_then_decay"  # train.schedule: where a run that ends in warm-up leaves the rate
    rtd_from: int = 0  # mlm_then_rtd: the step its RTD phase starts (objectives.mlm_steps); 0: RTD from the start
    disc_mlm_weight: float = 1.0  # objective.disc_mlm_weight: mlm_then_rtd's MLM phase learns nothing at 0


# The discriminator's RTD figures (mlm_then_rtd: read from the windows past rtd_judged_from alone).
DISC_KEYS = ("disc_loss", "disc_auc", "disc_recall", "disc_acc", "replaced_token_share")


def rtd_judged_from(ctx: Context) -> int:
    """The step after which the discriminator's RTD is judged: warm-up, counted again from the start of
    mlm_then_rtd's RTD phase. Its first RTD windows came straight after the phase change, from a binary
    head idle until then: a tiny run's first one (10 RTD steps) read 'has not learned even the share of
    replaced tokens (loss 0.584 ...)', which a plain run's first RTD steps, inside warm-up, never say."""
    return ctx.rtd_from + ctx.warmup_steps if ctx.rtd_from else ctx.warmup_steps


# How the generator's findings open: a warning of theirs alone is withdrawn by windows judging the generator again.
GENERATOR_FINDING = "the generator "
# How the MLM-phase finding opens: a warning it gave stands until the discriminator is judged again
# (health_standing.withdraws).
DISC_MLM_STUCK = "the discriminator's masked LM (its MLM phase"


def _mlm_phase(lines: list[dict], ctx: Context) -> tuple[float | None, float | None]:
    """mlm_then_rtd: the discriminator's MLM loss and accuracy on the last two windows past warm-up that
    scored its MLM phase, each weighted by its MLM steps (a window across the phase change averages its
    MLM steps alone), while its RTD is not judged yet; (None, None) where nothing is judged. Before,
    ``disc_mlm_loss`` was never read: objective.disc_mlm_weight=0 kept it at ln|V| through the phase (tiny,
    40 steps, MLM for 20, warm-up 4) and the first warning came at step 26, six steps into RTD."""
    if not ctx.rtd_from or not lines or lines[-1].get("step", 0) > rtd_judged_from(ctx):
        return None, None
    past, weights = _last_windows(lines, ctx.warmup_steps)
    starts = [ln["step"] - w for ln, w in zip(past, weights)]
    phase = [(ln, max(1, min(ln["step"], ctx.rtd_from) - start)) for ln, start in zip(past, starts)
             if isinstance(ln.get("disc_mlm_loss"), (int, float))]
    if not phase:
        return None, None
    mlm_lines, mlm_steps = [ln for ln, _ in phase], [w for _, w in phase]
    return _mean(mlm_lines, mlm_steps, "disc_mlm_loss"), _mean(mlm_lines, mlm_steps, "disc_mlm_acc")


def _mean(lines: list[dict], weights: list[int], key: str) -> float | None:
    pairs = [(ln[key], w) for ln, w in zip(lines, weights) if isinstance(ln.get(key), (int, float))]
    total = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / total if total else None


def _last_windows(lines: list[dict], warmup_steps: int) -> tuple[list[dict], list[int]]:
    """The last two windows past warm-up and the steps each covers. A run whose steps are not a
    multiple of ``log_every`` ends in a window of a few steps; weighted by steps, that window no
    longer counts as much as a full one, so a verdict on the line does not flip on its noise
    (docs/studies.md, "Pilots on the review corpus")."""
    past = [i for i, ln in enumerate(lines) if ln.get("step", 0) > warmup_steps][-2:]
    steps = [max(1, lines[i]["step"] - (lines[i - 1]["step"] if i else 0)) for i in past]
    return [lines[i] for i in past], steps


def _enough(line: dict) -> bool:
    """Whether a window scored :data:`MIN_CLASS_TOKENS` tokens of each class (a line without the counts, written
    before them: yes)."""
    counts = [line.get(k) for k in ("disc_replaced_tokens", "disc_original_tokens")]
    return all(n >= MIN_CLASS_TOKENS for n in counts if isinstance(n, (int, float)))


def _scored(past: list[dict], weights: list[int]) -> tuple[list[dict], list[int]]:
    """The windows that scored both classes (an AUC), :data:`MIN_CLASS_TOKENS` of each, and their steps: the
    discriminator is judged on these alone. A window whose scored tokens were all replaced (electra15's, with a
    generator that replaced every masked slot) has share 1.0, recall 1.0 and no AUC: averaged in, it lowers the
    loss and blends the share with which the other window is set against its prior. One with an original token
    or two has an AUC that swings from 0.26 to 0.96 window to window."""
    scored = [(ln, w) for ln, w in zip(past, weights) if isinstance(ln.get("disc_auc"), (int, float)) and _enough(ln)]
    return [ln for ln, _ in scored], [w for _, w in scored]


def _worse_than_prior(past: list[dict], weights: list[int]) -> str | None:
    """Not even at the prior: loss above the prior's and AUC below 0.65. A discriminator a few steps from its
    initialisation scores every token near 0.5 (loss about ln 2), so its recall at the 0.5 threshold says
    nothing. Judged on the windows that scored both classes (an AUC) alone: with every scored token replaced
    (electra15's first windows) the prior's loss is 0, so any loss is above it, even one calling every token
    replaced (recall 1.00); averaged in beside a window with an AUC, such a window's loss was set against a
    prior that its share of 1 had lowered too."""
    lines, steps = _scored(past, weights)
    if not lines:
        return None
    loss, auc, share = (_mean(lines, steps, k) for k in ("disc_loss", "disc_auc", "replaced_token_share"))
    if loss is None or not share:
        return None
    prior = binary_entropy(share)
    if loss <= prior or auc >= AUC_LEFT_PRIOR:
        return None
    return (f"the discriminator has not learned even the share of replaced tokens (loss {loss:.3f}, above the "
            f"{prior:.3f} of always guessing the prior; AUC {auc:.3f})")


def _at_prior(past: list[dict], weights: list[int], figures: dict) -> str | None:
    """At the class prior: loss within 10 % of the prior's entropy, AUC below 0.65 and the rarer class's recall
    below 0.05, on the windows that scored both classes alone (:func:`_scored`); where they are not all the
    windows read, ``figures['disc_prior_loss']`` is their prior. Beside a window of replaced tokens only
    (electra15: loss 0.001, share 1.0) a window at the prior (loss 0.325 against H(0.9) = 0.325, AUC 0.53) read
    loss 0.163 against the 0.199 of the mean share 0.95, under 90 %: its warning was withdrawn ("learning now")."""
    lines, steps = _scored(past, weights)
    m = {k: _mean(lines, steps, k) for k in DISC_KEYS}
    if m["disc_loss"] is None or m["disc_auc"] is None or not m["replaced_token_share"]:
        return None
    share = m["replaced_token_share"]
    prior = binary_entropy(share)
    figures["disc_prior_loss"] = round(prior, 4)
    # At the prior it calls every token by the commoner class, so the rarer class's recall is near 0:
    # the replaced tokens' where it scores every token, the originals' where most tokens it scores were
    # replaced (electra15 scores the masked slots only; there a stuck one has recall 1): the originals
    # it calls original are acc - recall x share of its tokens, of 1 - share originals.
    called, rare = "original", "recall"
    recall = m["disc_recall"] or 0.0
    if share > 0.5 and m["disc_acc"] is not None and share < 1.0:
        called, rare = "replaced", "recall of original tokens"
        recall = max(0.0, m["disc_acc"] - recall * share) / (1.0 - share)
    # within 10 % of the prior's loss: above that it does worse than the prior (:func:`_worse_than_prior`)
    if not (0.9 * prior <= m["disc_loss"] <= 1.1 * prior and m["disc_auc"] < AUC_LEFT_PRIOR and recall < 0.05):
        return None
    return (f"the discriminator sits at the class prior: it calls nearly every token {called} ({rare} "
            f"{recall:.2f}, AUC {m['disc_auc']:.3f}, loss {m['disc_loss']:.3f} against {prior:.3f} for always "
            f"guessing the prior)")


def findings(lines: list[dict], ctx: Context) -> tuple[list[str], dict]:
    """Problems (plain sentences) seen in the last two windows past warm-up, and the figures used."""
    past, weights = _last_windows(lines, ctx.warmup_steps)
    if not past:
        return [], {}
    m = {k: _mean(past, weights, k) for k in ("disc_loss", "disc_auc", "disc_recall", "disc_acc",
                                               "replaced_token_share", "gen_loss", "gen_acc", "replaced_share",
                                               "mlm_loss", "input_replaced_share")}
    disc_past, disc_weights = past, weights
    if ctx.rtd_from:  # mlm_then_rtd: the discriminator's windows past the warm-up of its RTD phase alone
        disc_past, disc_weights = _last_windows(lines, rtd_judged_from(ctx))
        m.update({k: _mean(disc_past, disc_weights, k) for k in DISC_KEYS})
    figures = {"step": past[-1]["step"], **{k: round(v, 4) for k, v in m.items() if v is not None}}
    out = []
    uniform = math.log(max(ctx.vocab_size, 2))
    if ctx.objective in RTD_OBJECTIVES:
        _class_counts(disc_past, disc_weights, figures)
    if ctx.objective in RTD_OBJECTIVES and m["disc_loss"] is not None and m["replaced_token_share"]:
        figures["disc_prior_loss"] = round(binary_entropy(m["replaced_token_share"]), 4)
        at_prior = _at_prior(disc_past, disc_weights, figures)
        if at_prior is not None:
            out.append(at_prior)
        elif (worse := _worse_than_prior(disc_past, disc_weights)) is not None:
            out.append(worse)
    if all("grad_norm" in ln and ln["grad_norm"] is None for ln in past):
        # logged null: not finite. With train.clip > 0 torch scales every gradient by max_norm / inf = 0, so the
        # weights did not move while the loss stayed finite (objective.disc_weight=1e30: 4 steps, no change)
        out.append("the gradient norm was not finite (logged null) in the last windows: clipping scaled every "
                   "gradient to 0, so those steps changed nothing (an extreme objective.disc_weight?)")
    if m["gen_loss"] is not None and m["gen_loss"] > 0.9 * uniform and (m["gen_acc"] or 0.0) < 0.02:
        out.append(f"the generator has not left uniform guessing (loss {m['gen_loss']:.2f} of ln|V| = "
                   f"{uniform:.2f}, accuracy {m['gen_acc'] or 0:.3f})")
    mlm_loss, mlm_acc = _mlm_phase(lines, ctx)
    if mlm_loss is not None:
        figures.update(disc_mlm_loss=round(mlm_loss, 4), **({} if mlm_acc is None else
                                                          {"disc_mlm_acc": round(mlm_acc, 4)}))
        if mlm_loss > 0.9 * uniform and (mlm_acc or 0.0) < 0.02:
            unused = " (objective.disc_mlm_weight is 0: its vocabulary head gets no gradient)" \
                if ctx.disc_mlm_weight == 0 else ""
            out.append(f"{DISC_MLM_STUCK}, to step {ctx.rtd_from}) has not left uniform guessing (loss "
                       f"{mlm_loss:.2f} of ln|V| = {uniform:.2f}, accuracy {mlm_acc or 0:.3f}){unused}")
    if ctx.objective in RTD_OBJECTIVES and m["replaced_share"] is not None and m["replaced_share"] < 0.02:
        out.append(f"the generator reproduces the original at {1 - m['replaced_share']:.0%} of masked slots, so "
                   f"the discriminator sees almost no replaced tokens (generator too strong?)")
    if ctx.objective == "all_tokens_mlm" and m["mlm_loss"] is not None and m["input_replaced_share"] is not None:
        r = m["input_replaced_share"]
        copying = binary_entropy(r) + r * uniform
        figures["copy_only_loss"] = round(copying, 4)
        if m["mlm_loss"] > 0.9 * copying:
            out.append(f"the all-tokens LM has learned no more than copying its input (loss {m['mlm_loss']:.3f} "
                       f"against {copying:.3f} for copying and guessing uniformly at the {r:.0%} of "
                       f"tokens that were replaced)")
    elif ctx.objective not in RTD_OBJECTIVES and m["mlm_loss"] is not None and m["mlm_loss"] > 0.9 * uniform:
        out.append(f"the masked LM has not left uniform guessing (loss {m['mlm_loss']:.2f} of ln|V| = {uniform:.2f})")
    return out, figures


def _class_counts(past: list[dict], weights: list[int], figures: dict) -> None:
    """Into ``figures``: the tokens of each class the discriminator's windows read scored (where their lines
    count them), and ``disc_judged`` False where none of them had :data:`MIN_CLASS_TOKENS` of each."""
    counted = [ln for ln in past if isinstance(ln.get("disc_original_tokens"), (int, float))]
    for key in ("disc_replaced_tokens", "disc_original_tokens"):
        if counted:
            figures[key] = int(sum(ln.get(key) or 0 for ln in counted))
    if counted and not _scored(past, weights)[0]:
        figures["disc_judged"] = False


def _count(n: int) -> str:
    """41 k, 9.4 M: a token count read at a glance (a demo's 40,960 tokens are not "0.0 M")."""
    return f"{n / 1e6:.1f} M" if n >= 1e6 else f"{n / 1e3:.0f} k" if n >= 1e3 else str(n)


def likely_causes(ctx: Context) -> list[str]:
    """What commonly makes a run learn nothing, as far as this run shows it."""
    causes = []
    if ctx.nonpad_tokens and ctx.nonpad_tokens < 20_000_000:
        causes.append(f"too few tokens: {_count(ctx.nonpad_tokens)} non-padding tokens so far (ELECTRA-Small "
                      f"saw ~130 B; docs/studies.md says how many the mini preset needed to leave the prior)")
    if ctx.dropout > 0 and ctx.nonpad_tokens and ctx.nonpad_tokens < 20_000_000:
        causes.append(f"dropout {ctx.dropout:g} on a short run: it delays leaving the prior (docs/studies.md; "
                      f"model.dropout=0 and model.attention_dropout=0, as the mini preset has)")
    if ctx.padding_share > 0.3:
        causes.append(f"padding: {ctx.padding_share:.0%} of every row is [PAD] (rebuild examples with document "
                      f"packing, the default)")
    if ctx.lr >= 3e-3:
        causes.append(f"learning rate {ctx.lr:g} may be too high for this model (try train.lr 5e-4 to 1e-3)")
    elif ctx.lr <= 5e-5:
        causes.append(f"learning rate {ctx.lr:g} may be too low for pretraining (ELECTRA uses 5e-4 to 2e-4)")
    if ctx.warmup_steps >= 0.5 * ctx.total_steps:
        causes.append(f"warm-up takes {ctx.warmup_steps} of {counted(ctx.total_steps, 'step')} (ELECTRA warms up for ~1 %)")
    return causes


def verdict(lines: list[dict], ctx: Context) -> dict:
    """The ``health`` entry of the checkpoint's stats: ``status`` ok / not_learning / unchecked."""
    found, figures = findings(lines, ctx)
    if figures and ctx.nonpad_tokens:  # the run's whole: every rank, every process of a resumed run
        figures.update(nonpad_tokens=ctx.nonpad_tokens, padding_share=round(ctx.padding_share, 4))
    if not figures:
        reason = ENDED_IN_WARMUP if 0 < ctx.total_steps <= ctx.warmup_steps else "no metrics logged after warm-up"
        return {"status": "unchecked", "reason": reason, "figures": {}}
    if not found and ctx.objective in RTD_OBJECTIVES and ctx.rtd_from and figures["step"] <= rtd_judged_from(ctx):
        # the checks made passed; the discriminator's RTD was not judged yet (health_standing.withdraws: such a
        # verdict does)
        return {"status": "unchecked", "reason": ENDED_IN_RTD_WARMUP, "figures": figures}
    if not found and figures.get("disc_judged") is False:  # the other checks passed; the discriminator's not made
        return {"status": "unchecked", "reason": DISC_NOT_JUDGED, "figures": figures}
    if not found:
        return {"status": "ok", "figures": figures}
    return {"status": "not_learning", "problems": found, "likely_causes": likely_causes(ctx), "figures": figures}


def not_judged_text(f: dict) -> str:
    """Why the discriminator was not judged: the counts of its last windows, and what gives more."""
    return (f"the discriminator was not judged at the end: its last windows, to step {f.get('step')}, scored "
            f"{f.get('disc_original_tokens', 0):,} original and {f.get('disc_replaced_tokens', 0):,} replaced "
            f"tokens, and a window is judged only with {MIN_CLASS_TOKENS} of each (with fewer its AUC and recall "
            f"swing with a token or two); a larger train.batch_size or train.log_every gives a window more")


def status_text(health: dict) -> str:
    """The verdict in a few words, for the model card: ``ok``, ``not_learning``, ``unchecked: <why>``."""
    if health["status"] == "unchecked" and health.get("reason"):
        return f"unchecked: {health['reason']}"
    return health["status"]


def unchecked_text(health: dict, ctx: Context) -> str:
    """The one line a run whose health went unchecked ends with."""
    if health.get("reason") == ENDED_IN_WARMUP:
        return (f"WARNING: training health unchecked: the run ended in warm-up ({counted(ctx.total_steps, 'step')}, warm-up "
                f"{ctx.warmup_steps}): {warmup_end(ctx.warmup_steps, ctx.total_steps, ctx.schedule)}, and whether "
                f"the model learned was not checked; give more steps or a shorter train.warmup_steps")
    if health.get("reason") == ENDED_IN_RTD_WARMUP:
        return (f"WARNING: training health unchecked: the discriminator's RTD phase began after step {ctx.rtd_from} "
                f"and its checks wait the warm-up's {counted(ctx.warmup_steps, 'step')} from there, to step "
                f"{rtd_judged_from(ctx)}; the run ended at step {ctx.total_steps}, so whether its discriminator "
                f"learned RTD was not checked; give more steps or a smaller objective.mlm_phase")
    if health.get("reason") == DISC_NOT_JUDGED:
        return f"WARNING: training health unchecked: {not_judged_text(health['figures'])}"
    return f"training health unchecked: {health.get('reason', 'no metrics')}"


def warning_text(health: dict, expected: str | None = None) -> str:
    """The plain-words warning for the progress output and the model card.

    ``expected``: why the caller planned a run too short to learn (``kolectra run``'s demo); it
    then stands in for the likely causes, which would send the user after settings the caller
    chose, not they (the model card keeps the causes: it describes the model, not the demo)."""
    step = health["figures"].get("step")
    if expected:
        return (f"WARNING: this model has not learned what it should (step {step}): "
                + "; ".join(health["problems"]) + f". Expected here: {expected}.")
    lines = [f"WARNING: this run has not learned what it should (step {step}): "
             + "; ".join(health["problems"]) + "."]
    if health.get("stands"):
        lines.append(health["stands"])
    if health.get("likely_causes"):
        lines.append("Likely causes: " + "; ".join(health["likely_causes"]) + ".")
    lines.append("Fine-tuning this model will likely score near chance.")
    return " ".join(lines)
