"""Typed configs: dotted overrides parse by type, unknown keys are errors."""

import dataclasses

import pytest

from kolectra.core.config import ConfigError, flat_keys, from_dict, override, to_dict


@dataclasses.dataclass(frozen=True)
class Inner:
    lr: float = 1e-3
    steps: int = 10
    bf16: bool = False


@dataclasses.dataclass(frozen=True)
class Outer:
    name: str = "x"
    sizes: tuple[int, ...] = (1, 2)
    maybe: int | None = None
    train: Inner = Inner()


def test_override_parses_by_declared_type():
    cfg = override(Outer(), ["train.lr=5e-4", "train.steps=7", "train.bf16=true", "sizes=3,4", "maybe=9"])
    assert cfg.train == Inner(lr=5e-4, steps=7, bf16=True)
    assert cfg.sizes == (3, 4) and cfg.maybe == 9
    assert override(cfg, ["maybe=none"]).maybe is None


@pytest.mark.parametrize(
    "assignment, fragment",
    [
        ("train.lrr=1", "unknown config key 'train.lrr'"),
        ("nope=1", "unknown config key 'nope'"),
        ("train.steps=ten", "expected an integer"),
        ("train.bf16=maybe", "expected a boolean"),
        ("train=3", "is a group"),
        ("name.x=3", "not a group"),
        ("novalue", "key=value"),
        # NaN passed every "< 0" check (objective.temperature=nan trained and was published)
        ("train.lr=nan", "train.lr: expected a number, got nan"),
        ("train.lr= NaN", "got NaN"),
        # inf is not JSON: it reached the manifest as Infinity (and every setting's "off" is 0)
        ("train.lr=inf", "train.lr: expected a finite number, got inf"),
        ("train.lr=-Infinity", "train.lr: expected a finite number, got -Infinity"),
        # a table, a list or null in a list was taken as its Python text: keep_fields ("{'a': 1}",)
        ('sizes=[1, [2, 3]]', "sizes: a list of plain values, got "),
        ('sizes=[{"a": 1}]', 'got {"a": 1}'),
        ("sizes=[1, null]", "got null"),
    ],
)
def test_bad_overrides_are_errors(assignment, fragment):
    with pytest.raises(ConfigError, match=fragment.replace(".", r"\.").replace("(", r"\(")):
        override(Outer(), [assignment])


def test_round_trip_and_strict_loading():
    cfg = override(Outer(), ["train.lr=0.5", "sizes=[5, 6]"])
    assert from_dict(Outer, to_dict(cfg)) == cfg
    with pytest.raises(ConfigError, match="train.oops"):
        from_dict(Outer, {"train": {"oops": 1}})
    assert flat_keys(cfg)["train.lr"] == 0.5


@pytest.mark.parametrize("order", [["min_chars=200000", "max_chars=300000"], ["max_chars=300000", "min_chars=200000"]])
def test_settings_that_bound_each_other_may_come_in_any_order(order):
    from kolectra.corpus.config import default_config

    cfg = override(default_config(), order)  # checked once, after every assignment
    assert (cfg.min_chars, cfg.max_chars) == (200000, 300000)
    with pytest.raises(ConfigError, match="min_chars <= max_chars"):
        override(default_config(), [*order, "max_chars=100000"])


@pytest.mark.parametrize("stage, kw", [("corpus", {"preset": "nope"}), ("pretrain", {"preset": "nope"}),
                                       ("finetune", {"task": "nsmc", "preset": "nope"}),
                                       ("finetune", {"task": "nope", "preset": "koelectra"})])
def test_a_bad_request_is_the_same_error_for_a_run_and_for_print_config(tmp_path, stage, kw):
    """``--print-config`` and a run resolve a config on one path (pipeline/configs.py), so a bad preset
    or task is one ConfigError, with one message, on both."""
    from kolectra.pipeline import configs, stages
    from kolectra.pipeline.store.artifacts import Store

    with pytest.raises(ConfigError) as printed:
        configs.resolve(stage, **kw)
    store = Store(tmp_path)
    run = {"corpus": lambda: stages.corpus(store, ["in.txt"], preset=kw.get("preset")),
           "pretrain": lambda: stages.pretrain(store, "nothing", preset=kw["preset"]),
           "finetune": lambda: stages.finetune(store, kw["task"], "m", "t.txt", "e.txt", preset=kw["preset"])}[stage]
    with pytest.raises(ConfigError) as ran:
        run()
    assert str(ran.value) == str(printed.value)
