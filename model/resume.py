"""Continuing a pretraining run from a checkpoint: its state loaded into the run's objects, and the
refusal of one written under other settings (listing every difference) unless
``train.force_resume``; forced, what happens to the learning-rate schedule. Part of the pretrain
stage (:mod:`kolectra.model.train`); the checkpoint files themselves are :mod:`.checkpoint`'s.
"""

from __future__ import annotations

import dataclasses

from kolectra.core.config import to_dict
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
    if saved_order != data.ORDER:  # its position names other batches in this order
        diffs.append(f"training order: {saved_order} -> {data.ORDER} "
                     "(the same position, other batches)")
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
    _same_batches(step_dir, state["loader"], loader.state_dict())
    loader.load_state_dict(state["loader"])
    dev.set_rng_state(ck["own"]["rng"])
    return int(state["step"]), ck["own"]["log"]


def _same_batches(step_dir, saved: dict, mine: dict) -> None:
    """A forced resume under another micro-batch or rank count is refused in the user's terms: the
    saved data position counts one rank's micro-batches (the loader's own check names only its
    ``batch_size``, which no setting is called)."""
    ranks, rows = saved.get("world_size"), saved.get("batch_size")
    if (ranks, rows) != (mine["world_size"], mine["batch_size"]):
        raise PretrainInputError(
            f"{step_dir}: its data position counts micro-batches of {rows} rows on each of {ranks} rank(s); "
            f"this run's are {mine['batch_size']} rows on {mine['world_size']} (train.batch_size / train.grad_accum "
            "/ ranks): resume with the batch size, grad_accum and ranks it was written with, or leave out "
            "--resume to start over")


def schedule_change(saved: dict, t: TrainConfig, step: int) -> str | None:
    """How the learning rate changes from ``step`` on when a run resumes under another schedule."""
    keys = ("steps", "warmup_steps", "lr", "schedule")
    old = {k: saved.get(k, getattr(t, k)) for k in keys}
    if all(old[k] == getattr(t, k) for k in keys):
        return None
    before, after = lr_at(step, dataclasses.replace(t, **old)), lr_at(step, t)
    changed = ", ".join(f"{k} {old[k]} -> {getattr(t, k)}" for k in keys if old[k] != getattr(t, k))
    return (f"schedule changed ({changed}): from step {step} the learning rate follows the new schedule "
            f"({t.schedule}), {after:.3g} there instead of {before:.3g}, reaching 0 at step {t.steps}")
