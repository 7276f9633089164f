"""Continuing a pretraining run from a checkpoint: its state loaded into the run's objects, and the
refusal of one written under other settings (listing every difference) unless
``train.force_resume``; forced, what happens to the learning-rate schedule. Part of the pretrain
stage (:mod:`kolectra.model.train`); the checkpoint files themselves are :mod:`.checkpoint`'s.
"""

from __future__ import annotations

import dataclasses

from kolectra.core.config import to_dict
from kolectra.core.errors import UserInputError
from kolectra.core.stage import progress
from kolectra.model import checkpoint, data, optim
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
