"""A stage's resolved config before it runs: what ``--print-config`` shows.

A stage's config is its preset (a function returning a frozen dataclass), then the ``--set``
overrides and the stage's flags, then ``--seed``. :func:`configure` is that order; the stages
(:mod:`pipeline.stages`) resolve their requests with it, so what is printed is what a run would
record in its manifest and hash into its id: :func:`resolve` is the only path from a request to
its config. Torch- and Beam-free: ``kolectra pretrain
--print-config`` answers in well under a second.

    resolve("pretrain", preset="small", sets=["train.steps=1000"])  -> (PretrainConfig, dict)
    render(cfg, doc, "keys")   # every settable key, one a line: key = value  (type)
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any, Callable, Sequence

from kolectra.core.config import ConfigError, flat_keys, override, to_dict
from kolectra.corpus import config as corpus_config

CORPUS_PRESETS = {"default": corpus_config.default_config, "production": corpus_config.production_config}
STYLES = ("json", "keys")


def configure(cfg: Any, sets: Sequence[str], seed: int | None) -> Any:
    """``cfg`` with the ``key=value`` overrides applied in order, then the seed; checked once at the
    end (:func:`kolectra.core.config.override` calls the config's ``validate``)."""
    cfg = override(cfg, sets)
    if seed is not None:
        cfg = override(cfg, [f"{seed_key(cfg)}={seed}"])
    return cfg


def fit_pretrain_warmup(cfg: Any, sets: Sequence[str]) -> tuple[Any, str | None]:
    """A pretrain config with the preset's warm-up scaled to a short run, unless ``sets`` names
    ``train.warmup_steps`` (:func:`kolectra.model.config.fit_warmup`); and the line saying so."""
    from kolectra.model.config import fit_warmup

    return fit_warmup(cfg, _user_set(sets, "train.warmup_steps"))


def fit_pretrain_precision(cfg: Any, sets: Sequence[str]) -> Any:
    """A pretrain config in bf16 autocast on a CPU with native bf16, unless ``sets`` names
    ``train.bf16`` (:func:`kolectra.model.config.fit_precision`)."""
    from kolectra.core.host import native_bf16
    from kolectra.model.config import fit_precision

    return fit_precision(cfg, _user_set(sets, "train.bf16"), native_bf16())


def _user_set(sets: Sequence[str], key: str) -> bool:
    """Whether one of the ``key=value`` overrides sets ``key`` (the user chose it, not the preset)."""
    return any(s.split("=", 1)[0].strip() == key for s in sets)


def seed_key(cfg: Any) -> str:
    """The dotted key of a config's seed (top level, or one level down for grouped configs)."""
    if hasattr(cfg, "seed"):
        return "seed"
    for group in vars(cfg):
        if hasattr(getattr(cfg, group), "seed"):
            return f"{group}.seed"
    raise ConfigError(f"{type(cfg).__name__} has no seed field")


def _base(stage: str, preset: str | None, task: str | None) -> Any:
    """The preset's config of ``stage`` (a finetune task's presets are the task's)."""
    if stage == "corpus":
        if preset not in CORPUS_PRESETS:
            raise ConfigError(f"corpus: unknown preset {preset!r} (known: {', '.join(CORPUS_PRESETS)})")
        return CORPUS_PRESETS[preset]()
    if stage == "vocab":
        from kolectra.vocab.config import default_config

        return default_config()
    if stage == "examples":
        from kolectra.corpus.examples_config import default_config

        return default_config()
    if stage == "pretrain":
        from kolectra.model.presets import preset as model_preset

        return model_preset(preset or "tiny")
    if stage == "probe":
        from kolectra.finetune.probe import ProbeConfig

        return ProbeConfig()
    if stage == "finetune":
        from kolectra.finetune.tasks import TASKS

        if task not in TASKS:
            raise ConfigError(f"unknown fine-tuning task {task!r} (known: {', '.join(TASKS)})")
        presets = TASKS[task].presets
        if preset not in presets:
            raise ConfigError(f"{task}: unknown preset {preset!r} (known: {', '.join(presets)})")
        return presets[preset]()
    raise ConfigError(f"{stage}: has no config to print")


def resolve(stage: str, *, preset: str | None = None, sets: Sequence[str] = (), seed: int | None = None,
            task: str | None = None, say: Callable[[str], None] | None = None) -> tuple[Any, dict]:
    """(the typed config, the config as the manifest records it), checked as a run checks it: the one
    path from a request's preset, overrides and seed to its config, for a run and ``--print-config``.
    ``say`` receives what was adjusted (a pretraining warm-up scaled to a short run)."""
    if stage == "pretrain":  # a preset named in a file or a --set is the base, not only a label
        from kolectra.model.presets import requested_preset

        preset = requested_preset(preset, sets)
    if stage in ("finetune", "probe"):
        sets = without_labels(sets, {"task": task or stage, **({"preset": preset} if stage == "finetune" else {})})
    cfg = configure(_base(stage, preset, task), sets, seed)
    if stage == "pretrain":
        from kolectra.model.presets import check_applied

        check_applied(cfg)
        cfg, scaled = fit_pretrain_warmup(cfg, sets)
        cfg = fit_pretrain_precision(cfg, sets)
        cfg.validate()
        if scaled and say is not None:
            say(f"pretrain: {scaled}")
    if stage == "finetune":
        return cfg, {"task": task, "preset": preset, **to_dict(cfg)}
    if stage == "probe":
        return cfg, {"task": "probe", **to_dict(cfg)}
    return cfg, to_dict(cfg)


def without_labels(sets: Sequence[str], labels: dict) -> list[str]:
    """``sets`` less the labels a fine-tuning config records beside its settings (``task`` and
    ``preset``, as ``--print-config`` prints them, so a saved one reads back as a ``--config`` file):
    the command's own are left out, another is refused (the command's task and ``--preset`` choose)."""
    kept = []
    for s in sets:
        key, _, value = str(s).partition("=")
        if key.strip() not in labels:
            kept.append(s)
            continue
        if value.strip() != labels[key.strip()]:
            source = getattr(s, "source", None)  # a --config file's line names its file
            flag = "the command's task" if key.strip() == "task" else "--preset"
            raise ConfigError(f"{source + ': ' if source else ''}{key.strip()} = {value.strip()!r}, but this command "
                              f"runs {labels[key.strip()]!r} ({flag} chooses it): leave the key out, or run that one")
        # the command's own: a label, recorded as it is, not a setting
    return kept


def type_name(tp: Any) -> str:
    """A field's type as a user types its value: ``int``, ``one of a|b``, ``list of str``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return "one of " + "|".join(str(a) for a in args)
    if origin in (tuple, list):
        return f"list of {type_name(args[0]) if args else 'str'}"
    if origin in (typing.Union, types.UnionType):
        inner = [type_name(a) for a in args if a is not type(None)]
        return " or ".join(inner) + (" or none" if type(None) in args else "")
    return getattr(tp, "__name__", str(tp))


def key_types(cfg: Any, prefix: str = "") -> dict[str, str]:
    """Dotted key -> :func:`type_name`, for every settable field of ``cfg``."""
    hints = typing.get_type_hints(type(cfg))
    out: dict[str, str] = {}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            out.update(key_types(value, prefix + f.name + "."))
        else:
            out[prefix + f.name] = type_name(hints[f.name])
    return out


def render(cfg: Any, doc: dict, style: str = "json") -> str:
    """``json``: the config as the manifest will hold it; ``keys``: one ``--set`` key a line with
    its value and type (the keys before the fields are fixed by the command, not settable)."""
    if style == "json":
        return json.dumps(doc, indent=2, ensure_ascii=False)
    if style != "keys":
        raise ConfigError(f"--print-config: expected one of {', '.join(STYLES)}, got {style!r}")
    fixed = [f"# {k}: {v} (from the command)" for k, v in doc.items() if not isinstance(v, dict) and k not in
             flat_keys(cfg)]
    types = key_types(cfg)
    width = max((len(k) for k in types), default=0)
    lines = [f"{k:<{width}} = {json.dumps(v, ensure_ascii=False)}  ({types[k]})" for k, v in flat_keys(cfg).items()]
    return "\n".join(fixed + lines)
