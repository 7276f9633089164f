"""Continuing a pretraining run from a checkpoint: its state loaded into the run's objects, and the
refusal of one written under other settings (listing every difference) unless
``train.force_resume``; forced, what happens to the learning-rate schedule. Part of the pretrain
stage (:mod:`kolectra.model.train`); the checkpoint files themselves are :mod:`.checkpoint`'s.
"""

from __future__ import annotations

import contextlib
import dataclasses

from kolectra.core.config import to_dict
from kolectra.core.errors import UserInputError
from kolectra.core.stage import progress
from kolectra.model import checkpoint, data, optim, rank_failures
from kolectra.model.config import TrainConfig
from kolectra.model.pretrain_inputs import PretrainInputError


def lr_at(step: int, t: TrainConfig) -> float:
    """Learning rate for optimizer update ``step`` (0-based), as the schedule gives it."""
    return t.lr * optim.lr_scale(step, t.warmup_steps, t.steps, t.schedule)


def restore(cfg, fingerprint, step_dir, ck, dev, model, optimizer, loader) -> tuple[int, dict]:
    """Load a checkpoint into the run's objects: (its step, its metrics window). Refuse another config
    or vocabulary unless forced, and a checkpoint already past ``train.steps`` even then."""
    state = ck["state"]
    diffs = checkpoint.differences(state["config"], to_dict(cfg))
    if state.get("vocab") != fingerprint:
        diffs.append(f"vocabulary: sha256 {str(state.get('vocab'))[:12]}... -> {fingerprint[:12]}...")
    saved_order = state.get("loader", {}).get("order", "one permutation of all rows")
    settings_differ = bool(diffs)
    if saved_order != data.ORDER:  # its position names other batches in this order
        diffs.append(f"training order: {saved_order} -> {data.ORDER} "
                     "(the same position, other batches)")
    if diffs and not cfg.train.force_resume and not settings_differ:
        # the same settings: another kolectra's checkpoint (one permutation of all rows: stage version 9 or before)
        raise PretrainInputError(
            f"{step_dir}: written by an earlier kolectra, whose training order was {saved_order} (this one's: "
            f"{data.ORDER}), so its data position names other batches here: "
            "set train.force_resume=true to go on from its weights in this version's order, or leave out "
            "--resume to start over")
    if diffs and not cfg.train.force_resume:
        raise PretrainInputError(f"{step_dir}: written by a run with other settings, cannot resume: "
                                 + "; ".join(diffs) + " (set train.force_resume=true to resume anyway)")
    if int(state["step"]) > cfg.train.steps:  # forced or not: the weights would claim fewer steps than they had
        raise PretrainInputError(f"{step_dir}: the checkpoint is at step {int(state['step'])}, past "
                                 f"train.steps={cfg.train.steps}; nothing is left to train (give --steps "
                                 f"{int(state['step'])} or more to continue it, or leave out --resume to start over)")
    if diffs and dev.is_main:
        progress(f"pretrain: resuming despite differences (train.force_resume): {'; '.join(diffs)}")
        change = schedule_change(state["config"].get("train", {}), cfg.train, int(state["step"]))
        if change:
            progress(f"pretrain: {change}")
    try:
        model.load_state_dict(ck["model"])
        # The implementation flags are placement, not state: a checkpoint written with fused AdamW
        # (CPU, CUDA) resumes on XLA with the traced loop, and back; one written by a recorded update
        # (capturable, rates on the device: model/step_graph.py) resumes without one, and back.
        # Set before loading: they decide where the loaded step counters go. The rate itself is
        # set before every update (optim.set_lr), so the run's own (a float or a device tensor) stays.
        saved = ck["optimizer"]
        groups = [{**g, **{k: now[k] for k in ("fused", "foreach", "capturable", "lr") if k in now}}
                  for g, now in zip(saved["param_groups"], optimizer.param_groups)]
        optimizer.load_state_dict({**saved, "param_groups": groups})
    except (RuntimeError, ValueError, KeyError) as e:
        raise PretrainInputError(f"{step_dir}: the saved weights do not fit this model: {e}") from None
    try:
        loader.load_state_dict(state["loader"])
    except UserInputError as e:  # its data position does not fit this run's loader
        raise PretrainInputError(f"{step_dir}: {e}") from None
    dev.set_rng_state(ck["own"]["rng"])
    return int(state["step"]), ck["own"]["log"]


STARTING = "to start (its shards, checkpoint or metrics log)"  # the pretrain stage's agreement at its start
SCHEDULE = ("steps", "warmup_steps", "lr", "schedule")  # the train settings the learning rate follows


def saved_schedule(saved: dict, t: TrainConfig) -> TrainConfig:
    """``t`` with the schedule a checkpoint's train settings (``saved``) ran under."""
    return dataclasses.replace(t, **{k: saved[k] for k in SCHEDULE if k in saved})


def schedule_change(saved: dict, t: TrainConfig, step: int) -> str | None:
    """How the learning rate changes from ``step`` on when a run resumes under another schedule."""
    ran = saved_schedule(saved, t)
    if all(getattr(ran, k) == getattr(t, k) for k in SCHEDULE):
        return None
    before, after = lr_at(step, ran), lr_at(step, t)
    changed = ", ".join(f"{k} {getattr(ran, k)} -> {getattr(t, k)}" for k in SCHEDULE if getattr(ran, k) != getattr(t, k))
    return (f"schedule changed ({changed}): from step {step} the learning rate follows the new schedule "
            f"({t.schedule}), {after:.3g} there instead of {before:.3g}, reaching 0 at step {t.steps}")


def _ranks_at(steps: list[int]) -> str:
    """'step-00000008 on rank 0, none on ranks 1, 2': the checkpoint each rank found, by step."""
    said = []
    for step in sorted(set(steps), reverse=True):
        ranks = [r for r, s in enumerate(steps) if s == step]
        names = ", ".join(map(str, ranks[:4])) + (f" and {len(ranks) - 4} more" if len(ranks) > 4 else "")
        said.append(f"{f'step-{step:08d}' if step >= 0 else 'none'} on rank{'s' * (len(ranks) > 1)} {names}")
    return ", ".join(said)


def agreed_checkpoint(out_dir, dev) -> tuple:
    """(step directory, :func:`checkpoint.load`) of the checkpoint every rank resumes from, or None: the
    newest one all ranks hold. Collective. Each rank reads its own folder, and on separate machines these
    differ: a rank after the first holds only what it fetched from the store, so a copy to the store cut
    short (a preemption, a second SIGTERM) left rank 0 a newer step of its own than the others'. Each rank
    resumed from its newest, at different steps with different weights: the ranks paired steps they
    did not share and, one done before the other, waited on each other for ever. Ranks holding nothing
    in common start fresh together; a rank that no longer holds the common step is refused on all."""
    found = checkpoint.load_latest(out_dir, dev.rank)  # a rank failing here meets the others below
    # 3: none, 4 + step; never rank_failures.FAILED (2), which a rank that failed to start (its shards, its
    # part of the checkpoint) sends from the start's agreement (model.rank_failures.together): it meets this one
    states = dev.rank_states(3 if found is None else 4 + int(found[1]["state"]["step"]))
    if states is None or len(set(states)) == 1:  # an XLA pod's hosts cannot agree: as before
        return found
    if rank_failures.FAILED in states:
        try:
            rank_failures.settle([rank_failures.FAILED * (s == rank_failures.FAILED) for s in states], None, STARTING)
        except rank_failures.AnotherRankFailed as e:
            e.agreed = True  # with the failing rank, which is gone: the start's agreement is not made again
            raise
    steps = [s - 4 for s in states]
    common, held = min(steps), _ranks_at(steps)
    if common < 0:
        if dev.is_main:
            progress(f"pretrain: the ranks' newest checkpoints differ ({held}); with none common to every rank, "
                     f"every rank starts fresh (rank 0's are removed from {checkpoint.checkpoints_dir(out_dir)})")
            checkpoint.clear(out_dir)  # as a fresh start does: no second line saying none was found
        return None
    if found is not None and int(found[1]["state"]["step"]) != common:
        found = None
        for d in checkpoint.intact(out_dir):
            if d.name == f"step-{common:08d}":
                with contextlib.suppress(Exception):  # as one not loading in load_latest: this rank lacks it
                    found = d, checkpoint.load(d, dev.rank)
    lacking = dev.ranks_with(found is None)
    if lacking:
        raise PretrainInputError(
            f"cannot resume: the ranks' newest checkpoints differ ({held}) and rank{'s' * (len(lacking) > 1)} "
            f"{', '.join(map(str, lacking))} no longer hold{'s' * (len(lacking) == 1)} step-{common:08d}, the "
            "newest common to every rank; leave out --resume to start over")
    if dev.is_main:
        progress(f"pretrain: the ranks' newest checkpoints differ ({held}: a copy to the store cut short leaves "
                 f"the other machines an older one); every rank resumes from step-{common:08d}, the newest they "
                 "all hold")
    return found
