"""What a study is asked to do (:class:`StudyPlan`), kept free of torch and Beam so the CLI can
describe its options without importing them. The study itself is :mod:`kolectra.pipeline.study.runner`.
"""

from __future__ import annotations

import dataclasses
import math
import re

from kolectra.core.config import ConfigError
from kolectra.model.config import EMBEDDING_SHARING, OBJECTIVES
from kolectra.model.presets import preset as model_preset
from kolectra.pipeline.configs import resolve

READOUTS = ("probe", "lowdata", "finetune")
FINETUNED = ("lowdata", "finetune")
# A readout recipe is a readout and switches, ``-<switch>`` after it, so that one study reads the same
# checkpoints and rows several ways, each recipe with its own floor (issue 44: the study's recipes
# under-rated early RTD checkpoints). ``probe-best-layer`` reads the layer whose probe scores best on
# dev rows carved from the probe's train rows; ``lowdata-reinit1`` re-initialises the top encoder
# layer before fine-tuning. Switch pattern -> (the readouts it applies to, its setting of that stage).
READOUT_SWITCHES = {r"best-layer": (("probe",), "layer=best"), r"layer(\d+)": (("probe",), "layer={}"),
                    r"cls": (("probe",), "pooling=cls"),
                    r"reinit(\d+)": (FINETUNED, "reinit_top_layers={}"),
                    r"nodecay": (FINETUNED, "optim.layerwise_lr_decay=1.0")}
_READOUT_SWITCH = re.compile("-(" + "|".join(f"(?:{k})" for k in READOUT_SWITCHES) + ")")
# An arm's recipe switches, ``+<name><number>`` after the objective (and its sharing suffix):
# ``mlm+mask0.3`` is MLM at 30 % masking, ``electra+gen0.5+temp2`` ELECTRA with a generator half as
# wide as the discriminator and replacements drawn at temperature 2 falling to 1.
RECIPE_SWITCHES = {"mask": "objective.mask_prob", "gen": "model.generator_width",
                   "temp": "objective.temperature_start", "dmlm": "objective.disc_mlm_weight",
                   "phase": "objective.mlm_phase"}
# Switches without a number: the precision of an arm's pretraining, so that one study can pair the
# same recipe in bf16 autocast and in float32 (same examples, seeds and readouts).
FLAG_SWITCHES = {"bf16": "train.bf16=true", "fp32": "train.bf16=false"}
_SWITCH = re.compile(r"([a-z]+)(\d+(?:\.\d+)?|\.\d+)")


def _known_switches(say_sets: bool = False) -> str:
    """Every switch an arm takes, for an error message (``+maskN``, ..., ``+bf16``, ``+fp32``)."""
    return ", ".join([*(f"+{k}N" + (f" sets {v}" if say_sets else "") for k, v in RECIPE_SWITCHES.items()),
                      *(f"+{k}" + (f" sets {v}" if say_sets else "") for k, v in FLAG_SWITCHES.items())])


def parse_arm(arm: str) -> tuple[str, str]:
    """``electra-gdes`` -> (objective, embedding sharing); a bare objective shares ELECTRA's way.
    Recipe switches (``+mask0.3``) are allowed and left to :func:`arm_switches`."""
    return arm_settings(arm)[:2]


def arm_switches(arm: str) -> list[str]:
    """The ``--set`` keys of an arm's recipe switches: ``mlm+mask0.3`` -> [objective.mask_prob=0.3]."""
    return arm_settings(arm)[2]


def arm_settings(arm: str) -> tuple[str, str, list[str]]:
    """``objective[-sharing][+switch...]`` -> (objective, embedding sharing, recipe ``--set`` keys)."""
    head, *switches = arm.split("+")
    objective, _, sharing = head.partition("-")
    sharing = sharing or "es"
    if objective not in OBJECTIVES or sharing not in EMBEDDING_SHARING:
        raise ConfigError(f"study: unknown arm {arm!r} (an objective of {', '.join(OBJECTIVES)}, optionally "
                            f"with -{'/-'.join(EMBEDDING_SHARING)} and recipe switches "
                            f"{_known_switches()})")
    sets = []
    for sw in switches:
        if sw in FLAG_SWITCHES:
            sets.append(FLAG_SWITCHES[sw])
            continue
        m = _SWITCH.fullmatch(sw)
        if not m or m.group(1) not in RECIPE_SWITCHES:
            raise ConfigError(f"study: arm {arm!r}: unknown recipe switch {'+' + sw!r} "
                              f"(known: {_known_switches(say_sets=True)})")
        sets.append(f"{RECIPE_SWITCHES[m.group(1)]}={m.group(2)}")
    return objective, sharing, sets


def readout_recipe(recipe: str) -> tuple[str, list[str]]:
    """``lowdata-reinit1`` -> (the readout, its stage's ``--set`` keys): ("lowdata", [reinit_top_layers=1])."""
    base = recipe.split("-", 1)[0]
    known = (f"a readout of {', '.join(READOUTS)} and switches "
             + ", ".join("-" + k.replace(r"(\d+)", "N") for k in READOUT_SWITCHES))
    if base not in READOUTS:
        raise ConfigError(f"study: unknown readout {recipe!r} ({known})")
    sets, pos = [], len(base)
    while pos < len(recipe):
        m = _READOUT_SWITCH.match(recipe, pos)
        if m is None:
            raise ConfigError(f"study: readout {recipe!r}: cannot read {recipe[pos:]!r} ({known})")
        for pattern, (applies, setting) in READOUT_SWITCHES.items():
            sw = re.fullmatch(pattern, m.group(1))
            if sw:
                if base not in applies:
                    raise ConfigError(f"study: readout {recipe!r}: -{m.group(1)} applies to {', '.join(applies)} only")
                sets.append(setting.format(*sw.groups()))
                break
        pos = m.end()
    return base, sets


def arm_sets(arm: str, pretrain_sets: tuple[str, ...] = ()) -> list[str]:
    """Every ``--set`` an arm's pretraining runs with: the study's own, the objective, the sharing, the switches."""
    objective, sharing, switches = arm_settings(arm)
    return [*pretrain_sets, f"objective.objective={objective}", f"model.embedding_sharing={sharing}", *switches]


@dataclasses.dataclass(frozen=True)
class StudyPlan:
    flops: float
    points: int = 2
    preset: str = "mini"
    arms: tuple[str, ...] = ("electra", "mlm", "electra-gdes")
    pretrain_seeds: int = 2
    finetune_seeds: int = 3
    readouts: tuple[str, ...] = ("probe", "lowdata")
    pretrain_sets: tuple[str, ...] = ()
    finetune_preset: str = "electra"
    # Fine-tuning of the lowdata/finetune readouts. At 1,000 rows, 4 epochs at 3e-4 left an untrained
    # mini at chance (train loss 0.69 in every epoch, dev 48.6 %): a floor that learns nothing makes
    # every arm "beat" it. 10 epochs at 1e-3 let the floor learn (65.1 %), so the comparison means
    # something (docs/studies.md, the pilot).
    finetune_sets: tuple[str, ...] = ("max_length=64", "batch_size=32", "epochs=10", "optim.lr=1e-3")
    vocab_size: int = 8000  # when the study builds the vocabulary (--corpus)
    dev_rows: int = 5000  # held-out rows every readout is scored on
    probe_rows: int = 4000
    lowdata_rows: int = 1000
    finetune_rows: int = 20000
    bootstrap: int = 2000
    seed: int = 0

    def budgets(self) -> list[float]:
        return [self.flops / 2 ** (self.points - 1 - k) for k in range(self.points)]

    def validate(self) -> None:
        if not self.arms:
            raise ConfigError("study: --arms must not be empty")
        trains: list = []  # (resolved config, the arm that trains it)
        for arm in self.arms:
            try:  # a switch out of range is refused now, not after the points before it were trained
                cfg = resolve("pretrain", preset=self.preset, sets=arm_sets(arm, self.pretrain_sets))[1]  # as a run resolves it
            except ConfigError as e:
                raise ConfigError(f"study: arm {arm!r}: {e}") from None
            same = next((other for c, other in trains if c == cfg), None)
            if same is not None:  # the same checkpoints under two names: compared with themselves, counted twice
                raise ConfigError(f"study: arms {same!r} and {arm!r} train the same model with the same "
                                  "settings: give one of them")
            trains.append((cfg, arm))
        if not self.readouts or len(set(self.readouts)) != len(self.readouts):
            raise ConfigError(f"study: --readouts must be distinct and not empty, got {list(self.readouts)}")
        layers = model_preset(self.preset).model.layers
        for recipe in self.readouts:
            for setting in readout_recipe(recipe)[1]:  # a layer the model lacks: refused before any training
                key, _, value = setting.partition("=")
                if key in ("layer", "reinit_top_layers") and value.isdigit() and int(value) > layers:
                    raise ConfigError(f"study: readout {recipe!r}: the {self.preset} model has {layers} layers")
        if not (self.flops > 0 and math.isfinite(self.flops)) or self.points < 1:
            raise ConfigError(f"study: need a finite --flops > 0 and --points >= 1 (got {self.flops}, {self.points})")
        if self.pretrain_seeds < 1 or self.finetune_seeds < 1:
            raise ConfigError("study: --pretrain-seeds and --finetune-seeds must be >= 1")
        rows = {"--dev-rows": self.dev_rows, "--probe-rows": self.probe_rows, "--lowdata-rows": self.lowdata_rows,
                "--finetune-rows": self.finetune_rows}
        for flag, n in rows.items():  # --dev-rows -5 held out all but 5 rows (a slice from the end)
            if n < 1:
                raise ConfigError(f"study: {flag} must be >= 1, got {n}")
        if self.bootstrap < 1:
            raise ConfigError(f"study: bootstrap must be >= 1, got {self.bootstrap}")


