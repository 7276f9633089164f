"""The pretrain stage: examples artifact + tokenizer -> ELECTRA checkpoint (hf/ + metrics.jsonl).

``pretrain(cfg, examples, tokenizer_dir, out_dir, resume=False)`` reads top to bottom: check
inputs (:mod:`model.pretrain_inputs`), fetch this rank's shards of the examples (a store root: only
those, :mod:`model.shard_order`), seed, build the generator/discriminator pair (or load it,
``train.init_from``), AdamW (no decay on biases and LayerNorm; fused where the device has it) with
linear warmup then linear decay (paper appendix A), optionally resume from the newest intact
checkpoint (:mod:`model.resume`), then the objective's step
(:mod:`model.objectives`: ELECTRA or one of the paper's ablations) with gradient accumulation,
averaging over ranks and clipping (with ``train.compile_mode=whole-step`` that update recorded once
as a CUDA graph and replayed, :mod:`model.step_graph`), metrics every ``log_every`` steps (:mod:`model.metrics`),
checkpoints every ``save_every`` (:mod:`model.checkpoint`), a last check that the examples did not
change under the run (:mod:`model.shard_guard`) and the Hugging Face export
(:mod:`model.export`), those two and the artifact's stats in :mod:`model.train_end`; what a run holds is
:class:`model.run_state.Run`. Which accelerator it runs on, and how many ranks, is
:mod:`model.device`'s business alone; work one rank may fail alone ends every rank (:mod:`model.rank_failures`).

``out_dir`` may be a lasting work directory: with ``resume`` the run continues from
``out_dir/checkpoints/``; everything else in it (metrics.jsonl beyond the checkpoint's step, a
half-written ``hf/``) is rewritten.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import time
from pathlib import Path
from typing import Callable

import torch

from kolectra.core import ctrl_c
from kolectra.core.config import to_dict
from kolectra.core.errors import Terminated
from kolectra.core.stage import StageOutput, progress
from kolectra.core.words import counted
from kolectra.model import checkpoint, data, health, health_standing, init, objectives, optim, rtd, runtime, shard_order
from kolectra.model.config import PretrainConfig, TrainConfig, disc_weight_warning, warmup_warning
from kolectra.model.device import Device, compiled
from kolectra.model.electra import ElectraPair, count_parameters, flops_by_part, flops_line
from kolectra.model.metrics import MetricsLog
from kolectra.model.preempt import StopAtStepEnd

# the checks of what a run reads, and resuming one: the stage's API, re-exported here
from kolectra.model.pretrain_inputs import (  # noqa: F401
    Inputs,
    PretrainInputError,
    nearest_batch,
    read_inputs,
    read_specials,
    vocab_fingerprint,
)
from kolectra.model.rank_failures import together
from kolectra.model.resume import agreed_checkpoint, lr_at, restore, saved_schedule, schedule_change  # noqa: F401
from kolectra.model.run_state import Run
from kolectra.model.step_graph import WARMUP_STEPS  # (not re-exported: the first step's line names it)
from kolectra.model.train_end import TrainingDiverged, diverged, examples_unchanged, finish  # noqa: F401  (the stage's error)

STAGE_VERSION = 23  # bump when the same request's bytes change; history: docs/artifacts.md


# The examples: a local directory, or a function that makes the artifact's files a filter accepts
# local and returns their directory (a store root's checked copy: Store.local(art, only=...)).
Examples = Path | Callable[[Callable[[str], bool]], Path]


def fetch_examples(examples: Examples, only: Callable[[str], bool]) -> Path:
    return Path(examples(only)) if callable(examples) else Path(examples)


def build_optimizer(model: torch.nn.Module, t: TrainConfig, fused: bool = False,
                    lr_on: torch.device | None = None) -> torch.optim.Optimizer:
    """Pretraining's AdamW (:mod:`kolectra.model.optim`: no decay on biases and LayerNorm; ``lr_on``:
    rates on the device, for a recorded update)."""
    return optim.build(model, t.lr, t.weight_decay, eps=t.adam_eps, fused=fused, lr_on=lr_on)


def start(cfg: PretrainConfig, inputs: Inputs, examples_dir: Path, out_dir: Path, dev: Device,
          resume: bool, t_start: float = 0.0) -> Run:
    """Model, data and optimizer on ``dev``; from the newest intact checkpoint with ``resume``."""
    t, obj, specials = cfg.train, cfg.objective, inputs.specials
    where = dev.describe() + (f" x {dev.world_size} ranks" if dev.world_size > 1 else "")
    # every micro-batch is split over the devices (on XLA the mesh's; a row count not divisible by
    # theirs aborted the process in XLA's SPMD partitioner)
    if t.batch_size % (unit := t.grad_accum * dev.chips):
        raise PretrainInputError(f"train.batch_size {t.batch_size} is not divisible by grad_accum "
                                 f"{t.grad_accum} x {dev.chips} devices ({dev.world_size} ranks); "
                                 + nearest_batch(t.batch_size, unit, inputs.index.examples, t.grad_accum))
    dev.seed(cfg.seed)  # the same initial weights on every rank
    model = ElectraPair(inputs.model_cfg, specials.vocab_size, specials.pad_id, obj.objective)
    if t.init_from:
        init.load_pair(model, Path(t.init_from), inputs.model_cfg, specials.vocab_size, specials.pad_id,
                       inputs.vocab)
    model = dev.place(model).train()  # .to(device), ties kept
    dev.seed(cfg.seed + 1 + dev.rank)  # masking and sampling differ between ranks
    loader = data.ExampleLoader(examples_dir, batch_size=t.batch_size // (t.grad_accum * dev.world_size),
                                seed=cfg.seed, rank=dev.rank, world_size=dev.world_size)
    # Device micro-batches with their host-counted tokens; state_dict() = the next step's position.
    batches = dev.batches(loader, t.grad_accum, specials.pad_id)
    step_fn = objectives.step_function(obj.objective)
    compile_mode = dev.compile_choice(t.compile, t.compile_mode, t.grad_accum)
    whole = compile_mode == "whole-step"
    optimizer = build_optimizer(model, t, fused=dev.fused_optimizer, lr_on=dev.torch_device if whole else None)
    seq_len = inputs.index.max_seq_length
    if dev.is_main and (line := warmup_warning(t)):
        progress(f"pretrain: {line}")
    if dev.is_main and (line := disc_weight_warning(obj)):
        progress(f"pretrain: {line}")
    if dev.is_main and dev.world_size > 1:
        progress("pretrain: " + shard_order.deal_note(inputs.index.shards, cfg.seed, dev.world_size))
    if dev.is_main:
        precision = "bf16 autocast (--set train.bf16=false: float32)" if t.bf16 else "float32"
        progress(f"pretrain: {cfg.preset} ({obj.objective}) on {where} in {precision}, "
                 f"{count_parameters(model.discriminator):,} discriminator parameters, {inputs.index.examples:,} "
                 f"examples of {seq_len} tokens, {counted(t.steps, 'step')} of {t.batch_size}")
        if note := dev.speed_note(compile_mode is not None):
            progress(f"pretrain: {note}")

    first, log_state, wall_before, standing = 0, None, 0.0, None
    found = agreed_checkpoint(out_dir, dev) if resume else None  # the newest every rank holds
    if found is not None:
        first, log_state = restore(cfg, inputs.fingerprint, *found, dev, model, optimizer, batches)
        wall_before = float(found[1]["state"].get("wall_seconds", 0.0))  # absent in older checkpoints
        standing = health_standing.saved_standing(found[1]["state"])
        if dev.is_main:
            progress(f"pretrain: resuming at step {first} from {found[0]}")
            if standing is not None:  # printed by an earlier process: this one's output says it too (-q as well)
                progress(f"pretrain: the warning printed at step {standing['figures'].get('step')}, before this "
                         f"checkpoint, stands until the checks pass again: " + "; ".join(standing["problems"]),
                         quiet_too=True)
            checkpoint.trim_log(out_dir / "metrics.jsonl", first)
    elif dev.is_main:
        if resume and checkpoint.checkpoints_dir(out_dir).is_dir():  # a new run's folder: the store said so
            progress(f"pretrain: no intact checkpoint in {checkpoint.checkpoints_dir(out_dir)}; starting fresh")
        checkpoint.clear(out_dir)
    if dev.is_main:
        shutil.rmtree(out_dir / "hf", ignore_errors=True)  # an export cut short is redone
    parts = flops_by_part(inputs.model_cfg, specials.vocab_size, seq_len, rtd.num_slots(obj.mask_prob, seq_len),
                          obj.objective)
    flops_per_step = t.batch_size * sum(parts.values())
    share = {k: round(v / sum(parts.values()), 4) for k, v in parts.items() if v}
    if dev.is_main:
        progress("pretrain: " + flops_line(share, specials.vocab_size))
    peak_flops = t.peak_tflops * 1e12 or dev.peak_flops()
    log = MetricsLog(out_dir / "metrics.jsonl", dev, t.steps, resume_step=first, flops_per_step=flops_per_step,
                     peak_flops=peak_flops)
    run = Run(cfg, inputs, dev, model, loader, batches, optimizer,
              [p for g in optimizer.param_groups for p in g["params"]],
              compiled(step_fn, compile_mode) if compile_mode else step_fn, log, first, flops_per_step, share,
              peak_flops, where, compile_mode, t_start=t_start or time.perf_counter(),
              wall_before=wall_before, warned=standing is not None, standing=standing)
    if log_state is not None:
        log.load_state_dict(log_state)
        if first == t.steps and log.steps:  # forced to end at the checkpoint's step, between log steps:
            # its open window is the run's last line, at the rate of its last update (the saved schedule's)
            run.last_window_lr = lr_at(first - 1, saved_schedule(found[1]["state"]["config"].get("train", {}), t))
    if objectives.knobs(obj, torch.zeros(()), max(t.steps, 1)) is not None:
        run.step_t = torch.full((), float(first), device=dev.torch_device)
    if obj.objective == "mlm_then_rtd" and dev.is_main:
        progress(f"pretrain: the discriminator trains as a masked LM for the first "
                 f"{counted(objectives.mlm_steps(obj, t.steps), 'step')} ({obj.mlm_phase:.0%}), then as ELECTRA's RTD")
    log.on_line = lambda line, lines: watch_health(run, lines)
    update = functools.partial(device_step, run)
    run.device_step = dev.whole_step(update) if whole else update
    return run


def watch_health(run: Run, lines: list[dict]) -> None:
    """Past warm-up, say in plain words when the run is not learning (:mod:`model.health`), and
    once more when it starts to (a discriminator often leaves its plateau well after warm-up): the
    warning that stands is :mod:`model.health_standing`'s."""
    if lines[-1]["step"] <= run.cfg.train.warmup_steps:
        return
    verdict = health.verdict(lines, run.health_context())
    # each part (generator, discriminator, ...) warned of and withdrawn on its own
    run.standing, said = health_standing.watch(verdict, run.standing if run.warned else None, run.expected_untrained)
    run.warned = run.standing is not None
    for line in said:  # a warning, or the line withdrawing one: -q, which shows the warning, shows it withdrawn
        progress("pretrain: " + line, quiet_too=True)


def train_step(run: Run, step: int) -> None:
    """One optimizer update (``step`` is 0-based): the rate set, the micro-batches handed to the
    device's work (:func:`device_step`), its metric sums added to the log."""
    t = run.cfg.train
    optim.set_lr(run.optimizer, step, optim.lr_scale(step, t.warmup_steps, t.steps, t.schedule), t.bias_correction)
    micro = [next(run.batches) for _ in range(t.grad_accum)]
    micro_sums, step_sums = run.device_step([batch for batch, _ in micro])
    for sums in micro_sums:
        run.log.add(sums)
    run.log.add(step_sums, tokens=sum(n for _, n in micro))
    run.dev.step_done()
    done = step + 1
    run.log.step_done(done, lr_at(step, t), write=done % t.log_every == 0 or done == t.steps)


def device_step(run: Run, micro: list[dict[str, torch.Tensor]]) -> tuple[list[dict], dict]:
    """The device's work of one update, nothing read back: every micro-batch forward and backward, the
    gradients averaged over ranks and clipped, AdamW, the gradients dropped. Returns each micro-batch's
    metric sums and the update's own (gradient norm, scheduled temperature), all device tensors."""
    t, obj, specials = run.cfg.train, run.cfg.objective, run.inputs.specials
    # The step's masked slots and tokens, counted on the device: the micro-steps' losses then add
    # up to the loss of one batch of the whole step.
    norm_2 = sum(rtd.normalizers(b["input_ids"], specials, obj.mask_prob) for b in micro)
    # scheduled values (temperature, mlm_then_rtd's phase) from the device's step counter: no host copy
    knobs = objectives.knobs(obj, run.step_t, t.steps) if run.step_t is not None else None
    micro_sums = []
    for batch in micro:
        with run.dev.autocast():
            out = run.step_fn(run.model, batch["input_ids"], batch["token_type_ids"], specials, obj, norm_2,
                              batch.get("doc_ids"), knobs)  # packed rows: attention within each sequence
        out.loss.backward()
        micro_sums.append(out.sums)
    step_sums = {}
    if knobs is not None:
        if "temperature" in knobs:
            step_sums["temperature"] = knobs["temperature"]
        run.step_t.add_(1.0)
    run.dev.all_reduce_grads(run.params)
    step_sums["grad_norm"] = run.dev.clip_grads(run.params, t.clip if t.clip > 0 else float("inf")).detach()
    run.optimizer.step()
    run.optimizer.zero_grad(set_to_none=True)
    return micro_sums, step_sums


def save_checkpoint(run: Run, out_dir: Path, done: int) -> Path:
    """Every rank's RNG and log state; rank 0 also the weights, the optimizer and the loader position."""
    main, t = run.dev.is_main, run.cfg.train
    # Log lines whose values the device still holds back (XLA: the next step's closure) are written
    # first, so the log state below counts their tokens: a checkpoint at a log step resumes exactly.
    run.dev.flush()
    return checkpoint.save(
        out_dir, done,
        run.model.state_dict(keep_vars=True) if main else None, run.optimizer.state_dict() if main else None,
        {"config": to_dict(run.cfg), "vocab": run.inputs.fingerprint, "loader": run.batches.state_dict(),
         "schedule": {"next_step": done, "next_lr": lr_at(done, t)}, "wall_seconds": run.wall_seconds(),
         "health": {"standing": run.standing if run.warned else None}}  # (health_standing.saved_standing)
        if main else None,
        {"rng": run.dev.rng_state(), "log": run.log.state_dict()},
        rank=run.dev.rank, barrier=run.dev.barrier, save_fn=run.dev.save, keep=t.keep_checkpoints,
        agree=run.dev.ranks_with)  # a rank whose part fails ends every rank, at once


def pretrain(cfg: PretrainConfig, examples: Examples, tokenizer_dir: Path, out_dir: Path,
             resume: bool = False, lineage: list[str] | None = None, clear_checkpoints: bool = True,
             checkpoint_saved: Callable[[Path], None] | None = None,
             expected_untrained: str | None = None) -> StageOutput:
    """Train and export; with ``resume`` continue from the newest intact checkpoint in ``out_dir``.

    ``examples``: the examples directory, or a function fetching the files a filter accepts (a
    store root): index.json first, then, once the device knows this process's rank, its shards only.

    ``lineage``: the artifact tree (text lines) for the model cards, from the artifact store.
    ``clear_checkpoints=False`` leaves ``checkpoints/`` after the export: the artifact store
    deletes it once the artifact is published, so a kill before that can still resume.
    ``checkpoint_saved(step_dir)`` is called on every process after each checkpoint is complete (the
    artifact store mirrors it to a store root, so ``--resume`` works on another machine).
    ``expected_untrained``: why the caller planned a run too short to learn (the demo); a
    not-learning warning then says that instead of naming settings to change.

    A Ctrl-C once a step is done stops at a step's end with a checkpoint, as SIGTERM does; one (or a
    SIGTERM, SIGHUP) in the last step or after it lets the export (and the store's publish, whose window is
    the outer one) finish, then raises :class:`KeyboardInterrupt` (:class:`Terminated`) saying so
    (:mod:`kolectra.core.ctrl_c`)."""
    with ctrl_c.window() as window:  # (inside kolectra pretrain, the store's build is the outer window)
        window.words = f"after the run's last step: the run was done, so its export {Path(out_dir) / 'hf'} was completed first"
        return _pretrain(cfg, examples, tokenizer_dir, out_dir, resume, lineage, clear_checkpoints, checkpoint_saved,
                         expected_untrained)


def _pretrain(cfg: PretrainConfig, examples: Examples, tokenizer_dir: Path, out_dir: Path, resume: bool,
              lineage: list[str] | None, clear_checkpoints: bool, checkpoint_saved: Callable[[Path], None] | None,
              expected_untrained: str | None) -> StageOutput:
    cfg.validate()
    t_start = time.perf_counter()
    out_dir, t = Path(out_dir), cfg.train
    out_dir.mkdir(parents=True, exist_ok=True)
    # stats.json: its count of second segments, against model.type_vocab_size (read_inputs)
    inputs = read_inputs(cfg, fetch_examples(examples, lambda f: f in ("index.json", "stats.json")), tokenizer_dir)
    dev = runtime.resolve(t.device, t.bf16, t.cpu_threads, t.xla_cache_dir)
    try:
        # dev.rank and dev.world_size: a torchrun rank, or an XLA host's process index and count (model.xla)
        # what one rank may fail alone (its shards, its part of the checkpoint, rank 0's metrics log)
        # ends every rank here, not in the first step's all-reduce (model/rank_failures.py)
        with together(dev, "to start (its shards, checkpoint or metrics log)"):
            examples_dir = fetch_examples(examples, shard_order.rank_files(inputs.index.shards, cfg.seed, dev.rank,
                                                                           dev.world_size).__contains__)
            run = start(cfg, inputs, examples_dir, out_dir, dev, resume, t_start)
        run.expected_untrained = expected_untrained
        try:
            if run.last_window_lr is not None:
                run.log.end_window(run.first_step, run.last_window_lr)
            train_loop(run, out_dir, range(run.first_step, t.steps), checkpoint_saved)
        except BaseException:  # a crash, a divergence, a stop: its files and threads closed now, not when collected
            with contextlib.suppress(Exception):  # the run's own error is the one raised
                dev.flush()  # lines the device still holds (XLA's step closures) written before their file closes
            run.log.abandon()
            run.loader.close()
            raise
        with together(dev, "to close its metrics log"):
            run.log.close()
            run.loader.close()  # stop the read-ahead thread now, not whenever the loader is collected
        examples_unchanged(run)
        return finish(run, tokenizer_dir, out_dir, lineage, clear_checkpoints)
    finally:
        dev.close()


def train_loop(run: Run, out_dir: Path, steps: range,
               checkpoint_saved: Callable[[Path], None] | None = None) -> None:
    """The 0-based ``steps`` of the run (the first of the run timed): metrics at log steps, a
    checkpoint every ``save_every``. Between log steps nothing here waits for the device (no host
    sync: tests/test_model_loop_syncs.py), so on a GPU the host runs ahead queueing the next steps."""
    t = run.cfg.train
    # a SIGTERM (SIGHUP), or a first Ctrl-C, ends the step, saves it, then stops (model/preempt.py)
    with StopAtStepEnd(run.dev, t.steps, t.log_every) as sigterm:
        for step in steps:
            sigterm.at = step + 1
            try:
                if step == run.first_step:
                    first_step(run, step, done=sigterm.armed)
                else:
                    train_step(run, step)
            except (RuntimeError, IndexError, TypeError) as e:  # NaN makes garbage indices, None loss lines
                if (error := diverged(run, step + 1, probe=True)) is None:
                    raise
                raise error from e
            sigterm.armed()
            done = step + 1
            if done % t.log_every == 0 and run.log.last.get("loss", 0.0) is None:  # read back for the log anyway
                raise diverged(run, done)
            # a Ctrl-C from here on (the agreement's all-reduce included: it reads the flag first) stops after the next step
            sigterm.at = done + 1
            # rank 0's lines of a log step (a full disk) failed: every rank learns it here, where they agree anyway
            stop = sigterm.agreed(log_step=done % t.log_every == 0 or done == t.steps, failed=run.log.failed,
                                  doing=f"to log step {done} (metrics.jsonl, TensorBoard's events)")
            # a Ctrl-C, SIGTERM or SIGHUP in the last step: the run is done, and is exported and published before
            if stop and done == t.steps and ctrl_c.can_finish():  # it stops (StopAtStepEnd's exit, core/ctrl_c.py)
                break
            if (t.save_every and done % t.save_every == 0 and done < t.steps) or stop:
                saved = save_checkpoint(run, out_dir, done)
                if checkpoint_saved is not None:  # (mirrored to a store root: each rank its part)
                    with together(run.dev, f"to copy checkpoint {saved.name} to the store"):
                        try:
                            checkpoint_saved(saved)
                        except KeyboardInterrupt as e:  # a second SIGTERM or Ctrl-C (bare): the step is saved
                            if str(e):  # here all the same
                                raise
                            raise sigterm.stopped(done, t.steps, saved.name, isinstance(e, Terminated)) from None
            if stop:
                raise sigterm.stopped(done, t.steps, saved.name, sigterm.signalled)


def first_step(run: Run, step: int, done: Callable[[], None] | None = None) -> None:
    """The run's first step, timed (one wait for the device, once per run): a line within seconds
    says it trains and how long a step takes, instead of silence until the first log line (on a
    busy CPU that was minutes). On XLA, and with a compiled step (``train.compile``), the first step
    also compiles; the line then says how long that took and how to turn it off."""
    t, mode = run.cfg.train, run.compile_mode
    compiling = run.dev.static_shapes or mode is not None
    if run.dev.is_main and run.dev.static_shapes:
        progress("pretrain: compiling the training step (XLA traces and compiles it in the first step; "
                 "minutes for a large model, then it is reused)")
    elif run.dev.is_main and mode is not None:
        how = "" if t.compile is True and t.compile_mode != "auto" else f", {run.dev.name}'s default"
        graphs = {"reduce-overhead": " with CUDA graphs",
                  "whole-step": f", the whole update recorded as one CUDA graph after {WARMUP_STEPS} "
                                "updates"}.get(mode, "")
        progress(f"pretrain: compiling the training step (torch.compile, mode {mode}{graphs}{how}, in the first "
                 "step; a minute or more, then it is reused; --set train.compile=false runs it eagerly)")
    t0 = time.perf_counter()
    train_step(run, step)
    run.dev.synchronize()
    seconds = time.perf_counter() - t0
    if done is not None:  # before the line that says the run trains
        done()
    nxt = min(t.steps, (step // t.log_every + 1) * t.log_every)
    if run.dev.is_main:
        progress(f"pretrain: step {step + 1} took {seconds:.2f} s"
                 + (" (with compilation)" if compiling else "")
                 + (f"; the next line comes at step {nxt}" if nxt > step + 1 else ""))
