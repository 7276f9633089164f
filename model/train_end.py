"""The end of a pretraining run (:func:`model.train.pretrain`): the last checks before anything is exported
(every rank's examples unchanged under the run, the weights finite: :class:`TrainingDiverged` otherwise, a check
the loop also makes after a failed step), the Hugging Face export of the pair with its model cards, and the
artifact's stats and compute record (:func:`finish`). The run it ends: :class:`model.run_state.Run`.
"""

from __future__ import annotations

from pathlib import Path

import torch

from kolectra.core.errors import KolectraError
from kolectra.core.stage import StageOutput, progress
from kolectra.core.words import counted
from kolectra.model import card, checkpoint, data, export, health, health_standing, rtd
from kolectra.model.config import recipe as config_recipe
from kolectra.model.electra import attention_bias, count_parameters
from kolectra.model.metrics import MEAN_KEYS, RATIOS, eta_text
from kolectra.model.rank_failures import together
from kolectra.model.run_state import Run


class TrainingDiverged(KolectraError):
    """The loss or the weights became NaN or infinite; the message names the step and a likely cause."""


def examples_unchanged(run: Run) -> None:
    """Before the export: every rank's shards are still the files it pinned (a change after a
    file's last read too), agreed over the ranks, so no rank exports from examples that changed."""
    try:
        run.loader.check_unchanged()
        problem = None
    except data.ExamplesError as e:
        problem = e
    changed = run.dev.mean_over_ranks({"changed": torch.tensor(float(problem is not None))})["changed"]
    if problem is not None:
        raise problem
    if float(changed) > 0:
        raise data.ExamplesError("the examples changed under another rank of this run (its error names the "
                                 "file); nothing is exported: `kolectra artifacts verify` them, then --resume")


def diverged(run: Run, step: int, probe: bool = False) -> TrainingDiverged | None:
    """The error for a run whose logged loss or weights are no longer finite, else None.

    The logged loss is read back every ``log_every`` steps anyway; the weights (one host sync) are
    looked at only before the export and after a failed step, then with a ``probe`` forward too."""
    if run.log.last.get("loss", 0.0) is None:
        what = "the logged loss"
    else:
        try:
            finite = bool(torch.stack([torch.isfinite(p.detach()).all() for p in run.params]).all())
            if finite and (not probe or _outputs_finite(run)):
                return None
        except Exception:  # noqa: BLE001 - the device is unusable after the failure: leave the original error
            return None
        what = "the weights"
    t = run.cfg.train
    return TrainingDiverged(
        f"loss is NaN at step {step} ({what} became NaN or infinite): training diverged; likely "
        f"cause: the learning rate is too high (train.lr={t.lr:g}, warm-up {counted(t.warmup_steps, 'step')}); lower "
        "train.lr or lengthen train.warmup_steps")


def _outputs_finite(run: Run) -> bool:
    """Whether each network's hidden states are finite on a probe sequence: weights can be finite
    yet so large (a learning rate far too high) that attention overflows to NaN."""
    ids = torch.full((1, run.inputs.index.max_seq_length), run.inputs.specials.first_regular_id,
                     dtype=torch.long, device=run.dev.torch_device)
    with torch.no_grad(), run.dev.autocast():
        for net in run.model.networks().values():
            h = net.electra(input_ids=ids, attention_mask=attention_bias(torch.ones_like(ids)),
                            token_type_ids=torch.zeros_like(ids)).last_hidden_state
            if not bool(torch.isfinite(h).all()):
                return False
    return True


def finish(run: Run, tokenizer_dir: Path, out_dir: Path, lineage: list[str] | None,
           clear_checkpoints: bool = True) -> StageOutput:
    """Export the pair (rank 0), then the artifact's stats and compute record. Wall times are the
    whole run's: a resumed run adds what its earlier processes spent up to its checkpoint."""
    cfg, t, dev, model = run.cfg, run.cfg.train, run.dev, run.model
    specials, index = run.inputs.specials, run.inputs.index
    seq_len = index.max_seq_length
    flops = t.steps * run.flops_per_step
    final = {k: v for k, v in run.log.last.items() if k in MEAN_KEYS or k in RATIOS or k == "disc_auc"}
    # a warning printed and not withdrawn stands in the verdict, where the last windows did not judge again
    verdict = health_standing.final(health.verdict(list(run.log.lines), run.health_context()),
                                    run.standing if run.warned else None, t.steps)
    if verdict["status"] == "not_learning" and dev.is_main and not run.warned:
        progress("pretrain: " + health.warning_text(verdict, run.expected_untrained))
    if verdict["status"] == "unchecked" and dev.is_main and t.steps:
        progress("pretrain: " + health.unchecked_text(verdict, run.health_context()))
    recipe = config_recipe(cfg)
    facts = card.facts(cfg, recipe=recipe, seq_len=seq_len, vocab_size=specials.vocab_size,
                       parameters=count_parameters(model.discriminator), flops=flops, wall_seconds=run.wall_seconds(),
                       where=run.where, final=final, first_step=run.first_step, flops_share=run.flops_share,
                       verdict=verdict)
    warnings = ([f"{health.warning_text(verdict)} {card.warning_figures(verdict)}"]
                if verdict["status"] == "not_learning" else [])
    if verdict.get("reason") in (health.ENDED_IN_WARMUP, health.ENDED_IN_RTD_WARMUP, health.DISC_NOT_JUDGED):
        warnings.append(health.unchecked_text(verdict, run.health_context()))
    if (error := diverged(run, t.steps)) is not None:  # one check of the final weights: never export NaN
        raise error
    with together(dev, "to export the model (hf/)"):  # the others do not wait in a barrier for a failed export
        if dev.is_main:
            model.eval()
            export.export_pair(model, tokenizer_dir, out_dir / "hf", facts, lineage, warnings)
            if clear_checkpoints:
                checkpoint.clear(out_dir)
    if not dev.ranks_can_agree:  # an XLA pod's hosts (no host group): they wait for rank 0's export, as before
        dev.barrier()
    dealt = run.loader.batches_per_epoch * run.loader.global_batch  # all ranks' rows an epoch reads
    stats = {
        "steps": t.steps, "objective": cfg.objective.objective, "recipe": recipe, "final": final,
        # passes over the data as the loader deals them: each rank drops the tail of its epoch's order that
        # fills no batch, so an epoch reads fewer rows than the artifact holds and steps x batch / examples
        # undercounts the passes
        "examples_seen": t.steps * t.batch_size, "epochs": t.steps * t.grad_accum / run.loader.batches_per_epoch,
        "examples_per_epoch": dealt, "examples_left_out_per_epoch": index.examples - dealt,
        "tokens_seen": t.steps * t.batch_size * seq_len, "max_seq_length": seq_len,
        # the whole run's, all ranks, earlier processes of a resumed run included (MetricsLog.nonpad_tokens)
        "nonpad_tokens_seen": run.log.nonpad_tokens, "health": verdict,
        "masked_slots": rtd.num_slots(cfg.objective.mask_prob, seq_len),
        "vocab_size": specials.vocab_size, "ranks": dev.world_size, "resumed_from_step": run.first_step,
    }
    wall = run.wall_seconds()
    compute = {"parameters": count_parameters(model.discriminator),
               # the generator as exported: its embeddings (shared in training) included
               "generator_parameters": count_parameters(model.generator) if model.generator is not None else 0,
               "trained_parameters": count_parameters(model), "flops": flops, "flops_share": run.flops_share,
               "wall_seconds": round(wall, 3), "device": run.where,
               "step": f"compiled ({run.compile_mode})" if run.compile_mode else "eager",
               **({"wall_seconds_before_resume": round(run.wall_before, 3)} if run.first_step else {}),
               **({"peak_flops": run.peak_flops, "mfu": flops / wall / (run.peak_flops * dev.chips)}
                  if run.peak_flops else {})}
    if dev.is_main:
        resumed = (f" ({eta_text(wall - run.wall_before)} of them in this process, resumed at step {run.first_step})"
                   if run.first_step else "")
        # the verdict ends the line a user reads last (a warning of step 20 is hours of lines above it)
        said = health_standing.end_text(verdict, run.standing if run.warned else None, run.expected_untrained)
        verdict_words = f"; {said}" if t.steps else ""
        progress(f"pretrain done: {counted(t.steps, 'step')} in {eta_text(wall)}{resumed}, "
                 f"final loss {card.loss_text(final)}{verdict_words}" if t.steps else
                 f"pretrain done: 0 steps, {card.UNTRAINED}")  # "final loss nan" read as a divergence
    return StageOutput(stats=stats, compute=compute)
