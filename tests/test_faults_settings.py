"""Settings and inputs that reached numpy, torch or tokenizers before kolectra checked them (a
traceback there): refused up front, naming the key or the file."""

from __future__ import annotations

import pytest

from kolectra.core.config import ConfigError, override
from kolectra.corpus.examples import load_tokenizer
from kolectra.model.config import preset, validate


@pytest.mark.parametrize("sets, key", [(["seed=-1"], "seed"), ([f"seed={2**40}"], "seed"),
                                       (["train.cpu_threads=-2"], "train.cpu_threads")])
def test_settings_numpy_or_torch_would_refuse_are_refused_by_name(sets, key):
    with pytest.raises(ConfigError, match=rf"^{key}: must be"):
        validate(override(preset("tiny"), sets))
    validate(override(preset("tiny"), ["seed=0", "train.cpu_threads=0"]))  # the edges are fine


@pytest.mark.parametrize("garbage", ["{not json", "", '{"model": 5}'])
def test_a_garbled_tokenizer_is_named_by_the_examples_stage(tmp_path, garbage):
    (tmp_path / "tokenizer.json").write_text(garbage)
    with pytest.raises(ValueError, match=rf"{tmp_path / 'tokenizer.json'}: not a loadable tokenizer"):
        load_tokenizer(tmp_path)
