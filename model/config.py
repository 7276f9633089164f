"""Pretraining settings: model shapes, the replaced-token-detection objective, the training loop.

Sits between the examples stage (fixed-length id arrays) and the checkpoint artifact. Everything
``model.train.pretrain`` needs is in one frozen :class:`PretrainConfig`; the presets that fill it
(``tiny`` ... ``base``) are :mod:`kolectra.model.presets`. ``vocab_size`` stays 0 in presets and is
filled from the tokenizer at run time.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

from kolectra.core.config import ConfigError
from kolectra.core.words import counted
from kolectra.model.schedule import warmup_end

# The paper's efficiency ablations (section 3.2, table 5) next to ELECTRA itself:
#   electra         replaced token detection on all tokens (the method)
#   electra15       the discriminator's loss only on the ~15% masked positions
#   mlm             BERT: the discriminator-sized encoder trained as a masked LM, no generator
#   replace_mlm     an MLM whose masked positions hold generator samples instead of [MASK]
#   all_tokens_mlm  like replace_mlm, but predicting every token, with the paper's copy mechanism
# and RTD-family objectives that give the discriminator a vocabulary head besides its RTD head
# (kolectra.model.objectives; the head is a pretraining device and is not exported):
#   hybrid          RTD on every token + a masked LM at the masked slots (objective.disc_mlm_weight)
#   corrective      RTD on every token + correcting the masked slots: which original token stood
#                   there, through a copy mechanism on the RTD head (COCO-LM's idea, Meng et al. 2021)
#   mlm_then_rtd    a masked LM on [MASK]-ed input for objective.mlm_phase of the steps, then RTD;
#                   the generator trains throughout
OBJECTIVES = ("electra", "electra15", "mlm", "replace_mlm", "all_tokens_mlm", "hybrid", "corrective", "mlm_then_rtd")
# Objectives whose main network is a masked LM (exported as ElectraForMaskedLM).
MLM_OBJECTIVES = ("mlm", "replace_mlm", "all_tokens_mlm")
# Objectives whose discriminator also carries a vocabulary head (exported as ElectraForPreTraining, without it).
DISC_LM_OBJECTIVES = ("hybrid", "corrective", "mlm_then_rtd")
# Replaced token detection and its family: the discriminator is an ElectraForPreTraining.
RTD_OBJECTIVES = ("electra", "electra15", *DISC_LM_OBJECTIVES)
DEVICES = ("cpu", "cuda", "xla")
EMBEDDING_SHARING = ("es", "gdes", "none")
SCHEDULES = ("warmup_then_decay", "warmup_times_decay")  # see kolectra.model.optim
# torch.compile's modes with a compiled step; "auto": the device's (model/device.py, Device.compile_choice);
# "whole-step": compiled without CUDA graphs, the whole update recorded as one (model/step_graph.py)
COMPILE_MODES = ("auto", "default", "reduce-overhead", "whole-step")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Discriminator and generator shapes; the two share one embedding module."""

    hidden: int = 256
    layers: int = 12
    heads: int = 4
    intermediate: int = 1024
    # Word/position/type embedding width shared by both networks; ElectraModel projects it to
    # each network's hidden size when they differ (``embeddings_project``).
    embedding_size: int = 128
    generator_hidden: int = 64
    generator_layers: int = 12
    generator_heads: int = 1
    generator_intermediate: int = 256
    # The generator's width as a share of the discriminator's (the paper: 1/4 to 1/2; ELECTRA-Small's
    # release used 1): 0 = the generator_* keys as given; e.g. 0.25, 0.5 or 1.0 sets generator_hidden,
    # generator_intermediate and generator_heads to that share of hidden, intermediate and heads
    # (heads at least 1), overriding them (:func:`generator_shape`).
    generator_width: float = 0.0
    max_position: int = 512
    type_vocab_size: int = 2
    dropout: float = 0.1
    attention_dropout: float = 0.1
    # 0 = take it from the tokenizer (the usual case); a non-zero value must match it.
    vocab_size: int = 0
    # How generator and discriminator share embeddings (kolectra.model.electra): "es" (ELECTRA's
    # one shared module), "gdes" (DeBERTaV3's gradient-disentangled sharing) or "none".
    embedding_sharing: str = "es"


@dataclasses.dataclass(frozen=True)
class ObjectiveConfig:
    """Masking and loss weights (paper section 2 and appendix A)."""

    objective: str = "electra"  # one of OBJECTIVES
    mask_prob: float = 0.15
    # Of the masked positions: share replaced by [MASK], share by a random token; the rest keep
    # their original token (ELECTRA keeps BERT's 85/15 split without random replacement).
    mask_token_prob: float = 0.85
    random_token_prob: float = 0.0
    disc_weight: float = 50.0
    temperature: float = 1.0
    # Replacement-temperature schedule (Fast-ELECTRA's curriculum, Dong et al. 2023): 0 = none (a
    # constant ``temperature``); > 0: samples are drawn at temperature_start, falling linearly to
    # ``temperature`` over the first temperature_decay share of the steps, then staying there. Hotter
    # samples are flatter, so replacements are easier to spot early on.
    temperature_start: float = 0.0
    temperature_decay: float = 0.5
    # hybrid / corrective / mlm_then_rtd: the weight of the discriminator's vocabulary-head loss (its
    # masked LM, or the correction), next to generator 1 and RTD disc_weight.
    disc_mlm_weight: float = 1.0
    # mlm_then_rtd: the share of the steps in which the discriminator trains as a masked LM.
    mlm_phase: float = 0.25


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    steps: int = 1000
    # Global batch per optimizer step (all ranks, all accumulation micro-steps together),
    # the number papers report.
    batch_size: int = 128
    lr: float = 5e-4
    warmup_steps: int = 10000
    weight_decay: float = 0.01
    adam_eps: float = 1e-6
    # The reference recipe (google-research/electra) where it differs (see kolectra.model.optim):
    # Adam without bias correction, and warm-up multiplied into a linear decay over all steps
    # ("warmup_times_decay") instead of warm-up to the peak, then decay ("warmup_then_decay").
    bias_correction: bool = True
    schedule: str = "warmup_then_decay"
    clip: float = 1.0
    grad_accum: int = 1
    log_every: int = 100
    save_every: int = 0  # 0 = no periodic checkpoints, only the final export
    # Step directories kept in out_dir/checkpoints (the newest k; older ones are deleted).
    keep_checkpoints: int = 2
    # Resume even when the checkpoint was written with another config or vocabulary.
    force_resume: bool = False
    device: str = "cpu"
    # bf16 autocast (CUDA, XLA, and CPUs with bf16 instructions); weights and optimizer stay fp32.
    bf16: bool = False
    # torch.compile the objective's step (the step stays free of host syncs either way): "auto" =
    # the device's default (model/device.py: compiled on CUDA, eager on cpu and xla), true or false
    # to choose. Where and how the step runs, not what it trains: not part of the artifact id.
    compile: bool | Literal["auto"] = "auto"
    # torch.compile's mode for a compiled step: "reduce-overhead" also records it as CUDA graphs, one
    # launch per graph instead of one per kernel (CUDA only, one micro-step a step); "default"
    # compiles without them; "auto" = the device's choice (CUDA graphs on CUDA with grad_accum=1);
    # "whole-step" (CUDA, one process) records the whole update, forward to AdamW, as one CUDA graph.
    compile_mode: str = "auto"
    # Start from an existing Hugging Face ELECTRA pair: a directory holding discriminator/ and
    # generator/ (e.g. another checkpoint's hf/ or a downloaded KoELECTRA pair). "" = random init.
    init_from: str = ""
    # Peak FLOP/s of one device for MFU, in TFLOP/s; 0 = the device's own figure when it has one.
    peak_tflops: float = 0.0
    # Intra-op threads on the host (0 = torch's default). One thread is faster for tiny models
    # on a busy machine, where spinning OpenMP workers wait for each other.
    cpu_threads: int = 0
    # XLA only: persistent compilation cache directory (torch_xla.runtime.initialize_cache), so a
    # restarted or resumed run loads its compiled programs instead of compiling again; "" = none.
    xla_cache_dir: str = ""


@dataclasses.dataclass(frozen=True)
class PretrainConfig:
    preset: str = "small"
    model: ModelConfig = ModelConfig()
    objective: ObjectiveConfig = ObjectiveConfig()
    train: TrainConfig = TrainConfig()
    # The sequence length the preset was designed for; the examples artifact decides the real
    # one (pretrain rejects examples longer than model.max_position).
    max_seq_length: int = 128
    # The one seed of the stage: initialisation, data order, masking and sampling derive from it.
    seed: int = 0

    @property
    def device(self) -> str:
        return self.train.device

    def validate(self) -> None:
        """Reject inconsistent settings up front with a ConfigError naming the key."""
        m, o, t = self.model, self.objective, self.train
        if o.objective not in OBJECTIVES:
            raise ConfigError(f"objective.objective: expected one of {list(OBJECTIVES)}, got {o.objective!r}")
        if t.device not in DEVICES:
            raise ConfigError(f"train.device: expected one of {list(DEVICES)}, got {t.device!r}")
        if not 0.0 < o.mask_prob < 1.0:
            raise ConfigError(f"objective.mask_prob: must be in (0, 1), got {o.mask_prob}")
        if o.mask_token_prob < 0 or o.random_token_prob < 0 or o.mask_token_prob + o.random_token_prob > 1.0:
            raise ConfigError("objective.mask_token_prob + objective.random_token_prob must lie in [0, 1]")
        if o.temperature <= 0:
            raise ConfigError(f"objective.temperature: must be > 0, got {o.temperature}")
        if o.temperature_start < 0 or not math.isfinite(o.temperature_start):
            raise ConfigError(f"objective.temperature_start: must be 0 (no schedule) or > 0, got {o.temperature_start}")
        if not 0.0 < o.temperature_decay <= 1.0:
            raise ConfigError(f"objective.temperature_decay: must be in (0, 1], got {o.temperature_decay}")
        if not 0.0 < o.mlm_phase < 1.0:
            raise ConfigError(f"objective.mlm_phase: must be in (0, 1), got {o.mlm_phase}")
        if not 0.0 <= m.generator_width <= 1.0:
            raise ConfigError(f"model.generator_width: must be 0 (the generator_* keys) or in (0, 1], "
                              f"got {m.generator_width}")
        if m.embedding_sharing not in EMBEDDING_SHARING:
            raise ConfigError(f"model.embedding_sharing: expected one of {list(EMBEDDING_SHARING)}, "
                              f"got {m.embedding_sharing!r}")
        if m.embedding_sharing == "gdes" and o.objective in MLM_OBJECTIVES:
            raise ConfigError(f"model.embedding_sharing=gdes: DeBERTaV3's sharing is for replaced token detection "
                              f"(objective electra or electra15), not {o.objective!r}")
        for key in ("hidden", "layers", "heads", "intermediate", "embedding_size", "generator_hidden",
                    "generator_layers", "generator_heads", "generator_intermediate", "max_position", "type_vocab_size"):
            if getattr(m, key) < 1:
                raise ConfigError(f"model.{key}: must be >= 1, got {getattr(m, key)}")
        for key in ("dropout", "attention_dropout"):
            if not 0.0 <= getattr(m, key) < 1.0:
                raise ConfigError(f"model.{key}: must be in [0, 1), got {getattr(m, key)}")
        for key in ("lr", "adam_eps"):  # Adam's eps 0 divides by a zero second moment: NaN loss, then a crash
            if not (math.isfinite(getattr(t, key)) and getattr(t, key) > 0):
                raise ConfigError(f"train.{key}: must be a finite number > 0, got {getattr(t, key)}")
        for group, key in (("train", "clip"), ("train", "weight_decay"), ("objective", "disc_weight"),
                           ("objective", "disc_mlm_weight")):
            value = getattr(t if group == "train" else o, key)
            if not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"{group}.{key}: must be a finite number >= 0, got {value}")
        if m.hidden % m.heads:
            raise ConfigError(f"model.hidden ({m.hidden}) must be divisible by model.heads ({m.heads})")
        if m.generator_width:
            m = generator_shape(m)
        if m.generator_hidden % m.generator_heads:
            raise ConfigError(
                f"model.generator_hidden ({m.generator_hidden}) must be divisible by "
                f"model.generator_heads ({m.generator_heads})"
            )
        if t.steps < 0:  # 0: export the initialisation untrained (a study's random-init floor)
            raise ConfigError(f"train.steps: must be >= 0, got {t.steps}")
        for key in ("batch_size", "grad_accum", "log_every", "keep_checkpoints"):
            if getattr(t, key) < 1:
                raise ConfigError(f"train.{key}: must be >= 1, got {getattr(t, key)}")
        if t.batch_size % t.grad_accum:
            raise ConfigError(f"train.batch_size ({t.batch_size}) must be divisible by train.grad_accum "
                              f"({t.grad_accum}){batch_sizes_near(t)}")
        if t.save_every < 0:
            raise ConfigError(f"train.save_every: must be >= 0 (0: no periodic checkpoints), got {t.save_every}")
        if not (math.isfinite(t.peak_tflops) and t.peak_tflops >= 0):  # NaN passed a "< 0" test
            raise ConfigError(f"train.peak_tflops: must be a finite number >= 0 (0: the device's own figure), "
                              f"got {t.peak_tflops}")
        if t.compile not in (True, False, "auto"):
            raise ConfigError(f"train.compile: expected true, false or auto, got {t.compile!r}")
        if t.compile is True and t.device == "xla":  # Inductor cannot lower XLA tensors: it failed deep in its stack
            raise ConfigError("train.compile=true is for cpu and cuda: on xla, torch-xla already compiles the step "
                              "(one program per step, reused); leave train.compile at auto (eager there) or false")
        if t.compile_mode not in COMPILE_MODES:
            raise ConfigError(f"train.compile_mode: expected one of {list(COMPILE_MODES)}, got {t.compile_mode!r}")
        if t.compile_mode != "auto" and t.compile is False:
            raise ConfigError(f"train.compile_mode={t.compile_mode} applies to a compiled step: leave train.compile "
                              "at auto or set it to true")
        if t.compile_mode in ("reduce-overhead", "whole-step") and t.device != "cuda":
            raise ConfigError(f"train.compile_mode={t.compile_mode} records CUDA graphs: it needs train.device=cuda, "
                              f"not {t.device!r} (train.compile_mode=default compiles without CUDA graphs)")
        if t.compile_mode == "whole-step" and not t.bias_correction:
            raise ConfigError("train.compile_mode=whole-step replays AdamW's epsilon and decay as recorded, but "
                              "train.bias_correction=false changes them every step: use reduce-overhead with it")
        if t.compile_mode == "reduce-overhead" and t.grad_accum != 1:
            raise ConfigError(f"train.compile_mode=reduce-overhead replays each micro-step into the same buffers, so "
                              f"gradients cannot accumulate across them: it needs train.grad_accum=1, got {t.grad_accum}")
        if t.schedule not in SCHEDULES:
            raise ConfigError(f"train.schedule: expected one of {list(SCHEDULES)}, got {t.schedule!r}")
        for key in ("warmup_steps", "cpu_threads"):  # cpu_threads 0: torch's default
            if getattr(t, key) < 0:
                raise ConfigError(f"train.{key}: must be >= 0, got {getattr(t, key)}")
        if not 0 <= self.seed < 2**31:  # numpy's and every device's generators take it (plus the rank)
            raise ConfigError(f"seed: must be in [0, 2**31), got {self.seed}")


    # --- short runs ------------------------------------------------------------------------------
    # A run whose warm-up covers more than this share of its steps ends at or near its peak learning
    # rate (a 200-step mini run with the preset's 200-step warm-up never decays at all).


def generator_shape(m: ModelConfig) -> ModelConfig:
    """``m`` with the generator's hidden size, intermediate size and heads set from
    ``generator_width`` (unchanged when it is 0). Heads: the share of the discriminator's, rounded, at
    least 1, and a divisor of the generator's hidden size (mini at 0.25: 32 hidden, 1 head, 128; small
    at 0.25: 64, 1, 256, the paper's ELECTRA-Small generator; base at 1/3: 256, 4, 1024)."""
    w = m.generator_width
    if not w:
        return m
    hidden = max(1, math.floor(w * m.hidden + 0.5))
    heads = math.gcd(hidden, max(1, math.floor(w * m.heads + 0.5)))
    return dataclasses.replace(m, generator_hidden=hidden, generator_heads=heads,
                               generator_intermediate=max(1, math.floor(w * m.intermediate + 0.5)))


def recipe(cfg: PretrainConfig) -> dict:
    """What sets the objective's recipe apart, for the model card and the manifest's stats: the
    objective, mask rate, generator shape, replacement temperature and the objective's own weights."""
    o, m = cfg.objective, generator_shape(cfg.model)
    out: dict = {"objective": o.objective, "mask_prob": o.mask_prob}
    if o.objective != "mlm":
        heads = f"{m.generator_heads} head" + ("s" if m.generator_heads != 1 else "")
        out["generator"] = (f"{m.generator_hidden} hidden x {m.generator_layers} layers, {heads}"
                            + (f" (width {m.generator_width:g} of the discriminator)" if m.generator_width else ""))
        out["temperature"] = (f"{o.temperature_start:g} falling to {o.temperature:g} over the first "
                              f"{o.temperature_decay:.0%} of the steps" if o.temperature_start else f"{o.temperature:g}")
    if o.objective in RTD_OBJECTIVES:
        out["disc_weight"] = o.disc_weight
    if o.objective in DISC_LM_OBJECTIVES:
        out["disc_mlm_weight"] = o.disc_mlm_weight
    if o.objective == "mlm_then_rtd":
        out["mlm_phase"] = o.mlm_phase
    return out


WARMUP_MAX_SHARE = 0.2
WARMUP_SHARE = 0.1  # what a preset's warm-up is scaled to then (the presets' own ratio for mini)


def warmup_too_long(t: TrainConfig) -> bool:
    """Warm-up covers more than a fifth of the run (or all of it); a run of 0 steps has none."""
    return t.steps > 0 and t.warmup_steps > WARMUP_MAX_SHARE * t.steps


def fit_warmup(cfg: PretrainConfig, explicit: bool) -> tuple[PretrainConfig, str | None]:
    """A preset's warm-up, written for the preset's own steps, scaled to a tenth of a shorter run.

    When ``train.warmup_steps`` comes from the preset (``explicit`` False) and covers more than a
    fifth of ``train.steps`` (``--steps 200`` on ``mini``, whose warm-up is 200), it becomes
    round(steps / 10), and the line returned says so; the resolved config, and with it the artifact
    id, holds the scaled value. A warm-up the user set is kept as given: the trainer then warns in
    one line (:func:`warmup_warning`). Returns (config, line or None)."""
    t = cfg.train
    if explicit or not warmup_too_long(t):
        return cfg, None
    scaled = int(math.floor(WARMUP_SHARE * t.steps + 0.5))
    line = (f"warm-up scaled to {counted(scaled, 'step')} ({WARMUP_SHARE:.0%} of {t.steps}): the {cfg.preset} preset's "
            f"{t.warmup_steps} would cover {min(1.0, t.warmup_steps / t.steps):.0%} of the run; set "
            f"train.warmup_steps to choose")
    return dataclasses.replace(cfg, train=dataclasses.replace(t, warmup_steps=scaled)), line


def fit_precision(cfg: PretrainConfig, explicit: bool, native: str | None) -> PretrainConfig:
    """bf16 autocast on a CPU that runs it natively (``native``: the flag that says so, from
    :func:`kolectra.core.host.native_bf16`), unless ``train.bf16`` was set (``explicit``).

    On such a CPU, ``mini`` pretrains 1.6x faster in bf16 and its curve (losses, discriminator AUC,
    the probe) stays within fp32's seed-to-seed spread (docs/studies.md, "bf16 against fp32"). The
    resolved config, and with it the artifact id, records the choice, and the trainer's first line
    names the precision. Other devices keep the preset's value."""
    t = cfg.train
    if explicit or t.bf16 or t.device != "cpu" or native is None:
        return cfg
    return dataclasses.replace(cfg, train=dataclasses.replace(t, bf16=True))


def warmup_warning(t: TrainConfig) -> str | None:
    """One line when warm-up covers more than a fifth of the run (the trainer prints it)."""
    if not warmup_too_long(t):
        return None
    if t.warmup_steps >= t.steps:
        return (f"WARNING: warm-up ({counted(t.warmup_steps, 'step')}) is not shorter than the run "
                f"({counted(t.steps, 'step')}): "
                f"{warmup_end(t.warmup_steps, t.steps, t.schedule)}, and its health goes unchecked; lower "
                f"train.warmup_steps (e.g. {max(1, t.steps // 10)})")
    return (f"WARNING: warm-up ({counted(t.warmup_steps, 'step')}) covers {t.warmup_steps / t.steps:.0%} of the "
            f"run ({counted(t.steps, 'step')}), more than a fifth; consider train.warmup_steps={max(1, t.steps // 10)}")


def disc_weight_warning(o: ObjectiveConfig) -> str | None:
    """One line when ``objective.disc_weight`` is 0 under an objective with a replaced-token loss: the
    setting is accepted (an ablation may want it), but the run's health would blame too few tokens."""
    if o.disc_weight or o.objective not in RTD_OBJECTIVES:
        return None
    head = "WARNING: objective.disc_weight=0 gives the discriminator's replaced-token loss no weight (ELECTRA's is 50): "
    if o.objective in ("electra", "electra15"):
        what = ("nothing trains the discriminator (only where the generator shares its embeddings do its weights "
                "move)")
    elif o.objective == "mlm_then_rtd":
        what = "its RTD head never trains, and after the MLM phase nothing trains the discriminator"
    else:
        what = "its RTD head never trains; its encoder learns from its vocabulary head alone"
    return head + what + ", so its health will read not learned; set objective.disc_weight above 0 unless that is meant"


def batch_sizes_near(t: TrainConfig) -> str:
    """The sizes next to ``t.batch_size`` that train.grad_accum divides, and so do the launcher's ranks (torchrun's
    WORLD_SIZE; each micro-batch is split over them, :func:`kolectra.model.train.start`): the refusal named the
    rule alone, so under 2 ranks batch 10 with grad_accum 4 was refused, then the 12 that fits the rule was refused
    again ('not divisible by grad_accum 4 x 2 devices'). An XLA mesh's devices are known only once it is built."""
    from kolectra.core.errors import UserInputError  # noqa: PLC0415 - as the launcher raises it
    from kolectra.model.launcher import launcher_rank_and_world  # noqa: PLC0415 - the environment, read at the refusal

    try:
        ranks = 1 if t.device == "xla" else launcher_rank_and_world()[1]
    except UserInputError:  # a broken launcher environment: its own refusal comes when the run starts
        ranks = 1
    unit = t.grad_accum * ranks
    sizes = [n for n in (t.batch_size // unit * unit, (t.batch_size // unit + 1) * unit) if n > 0]
    what = f"train.grad_accum {t.grad_accum}" + (f" x {ranks} ranks" if ranks > 1 else "")
    also = "; on XLA also of train.grad_accum x the mesh's devices" if t.device == "xla" else ""
    return f": set it to {' or '.join(f'{n:,}' for n in sizes)} (a multiple of {what}{also})"
