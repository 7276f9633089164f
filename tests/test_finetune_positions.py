"""A fine-tuning run whose max_length reaches past the rows the model was pretrained on says so before training."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from kolectra.finetune import nsmc
from kolectra.finetune.config import KorquadConfig, sample_nsmc
from kolectra.finetune.positions import pretrained_length, untrained_text
from tests.model_support import build_tokenizer
from tests.test_finetune_e2e import nsmc_file


@pytest.fixture(scope="module")
def pretrained_at_32(tmp_path_factory) -> Path:
    """A checkpoint's discriminator folder as the trainer exports it: 64 positions, its card saying it was
    pretrained on rows of 32 tokens."""
    from kolectra.model import presets
    from kolectra.model.electra import ElectraPair
    from kolectra.model.export import export_pair

    root = tmp_path_factory.mktemp("pretrained")
    tok = build_tokenizer(root / "tok")
    base = presets.tiny()
    cfg = dataclasses.replace(base, model=dataclasses.replace(base.model, max_position=64))
    vocab = len(json.loads((tok / "tokenizer.json").read_text())["model"]["vocab"])
    export_pair(ElectraPair(cfg.model, vocab, 0), tok, root / "hf", {"preset": "tiny", "sequence length": 32})
    return root / "hf" / "discriminator"


def _nsmc(model_dir: Path, tmp_path: Path, max_length: int, **sets) -> None:
    cfg = dataclasses.replace(sample_nsmc(), max_length=max_length, batch_size=16, epochs=1, dev_fraction=0.2,
                              max_train_examples=0, max_eval_examples=0, **sets)
    out = tmp_path / f"out{max_length}{''.join(sets)}"
    out.mkdir()
    nsmc.run(cfg, model_dir, nsmc_file(tmp_path / "train.txt", 40, 0), nsmc_file(tmp_path / "test.txt", 10, 1), out)


def test_a_max_length_past_the_pretrained_rows_is_warned_of_once_before_training(pretrained_at_32, tmp_path, capsys):
    """kolectra run's demo pretrains at 128 tokens with 512 positions and `kolectra finetune korquad` reads 512:
    positions 128-511 were never trained, and fine-tuning said nothing (the card says it since 14c0587) (w9).
    Now one warning before training names the positions, the pretrained length and max_length; a run within
    the pretrained length, or of random_init, says nothing."""
    _nsmc(pretrained_at_32, tmp_path, 64)
    err = capsys.readouterr().err
    said = (f"WARNING: max_length 64 reaches past the 32 tokens a row {pretrained_at_32} was pretrained on (its "
            "README.md's sequence length): positions 32-63 were never trained by its pretraining (they are random, "
            "from the initialisation), so every input longer than 32 tokens reads position embeddings pretraining "
            "never shaped; fine-tuning trains them on this task's rows alone. To keep to the pretrained positions, "
            "--set max_length=32\n")
    assert err.count(said) == 1
    assert err.index(said) < err.index("epoch 1")  # before training
    _nsmc(pretrained_at_32, tmp_path, 32)
    _nsmc(pretrained_at_32, tmp_path, 64, random_init=True)
    assert "reaches past" not in capsys.readouterr().err


def test_what_the_warning_reads_from_a_card_and_tells_a_korquad_run(pretrained_at_32, tmp_path):
    assert pretrained_length(pretrained_at_32) == (32, False)
    assert pretrained_length(tmp_path) == (None, False)  # another project's folder: no card, not judged
    card = tmp_path / "README.md"
    card.write_text("| sequence length | 128 |\n| initialised from | /data/base/hf |\n", encoding="utf-8")
    assert pretrained_length(tmp_path) == (128, True)
    text = untrained_text(512, 512, 128, True, tmp_path, KorquadConfig())  # the demo's model, korquad's defaults
    assert "positions 128-511 were never trained by its pretraining (they hold what the model it was initialised " \
           "from had)" in text
    assert text.endswith("--set max_length=128 --set doc_stride=32")  # 128 a window: a stride under 128 - 64 - 3
    assert untrained_text(128, 512, 128, False, tmp_path) == ""  # within the pretrained rows


def test_a_probe_past_the_pretrained_rows_is_warned_of_once_and_says_its_encoder_is_frozen(pretrained_at_32, tmp_path,
                                                                                            capsys):
    """`kolectra probe --set max_length=64` on a model pretrained at 32 tokens read positions 32-63, never trained and
    never trained by the probe either (its encoder frozen), without a word; fine-tuning has said it since w9 (z6).
    Now the same warning, once before any row is encoded, says nothing trains them; 32 says nothing."""
    from kolectra.finetune import probe

    train, test = nsmc_file(tmp_path / "train.txt", 40, 0), nsmc_file(tmp_path / "test.txt", 10, 1)
    for length in (64, 32):
        out = tmp_path / f"probe{length}"
        out.mkdir()
        probe.run(probe.ProbeConfig(max_length=length), pretrained_at_32, train, test, out)
        err = capsys.readouterr().err
        said = (f"WARNING: max_length 64 reaches past the 32 tokens a row {pretrained_at_32} was pretrained on (its "
                "README.md's sequence length): positions 32-63 were never trained by its pretraining (they are "
                "random, from the initialisation), so every input longer than 32 tokens reads position embeddings "
                "pretraining never shaped; the probe's encoder is frozen, so nothing trains them. To keep to the "
                "pretrained positions, --set max_length=32\n")
        assert err.count(said) == (length == 64)
        if length == 64:
            assert err.index(said) < err.index("probe: accuracy")
        else:
            assert "reaches past" not in err


def test_a_probe_records_its_untrained_positions_warning_in_its_stats(pretrained_at_32, tmp_path, capsys):
    """The probe says the warning as fine-tuning does, and (probe 6; before 2026-12-02 on stderr alone) records the
    same words in its stats' warnings, which ``artifacts show``, ``kolectra report`` and ``kolectra run`` list.
    Within the pretrained length it says and records nothing."""
    from kolectra.finetune import probe  # noqa: PLC0415

    train, scored = nsmc_file(tmp_path / "train.txt", 40, 0), nsmc_file(tmp_path / "eval.txt", 10, 1)
    stats = {}
    for n in (64, 32):
        (out := tmp_path / f"probe{n}").mkdir()
        stats[n] = probe.run(probe.ProbeConfig(max_length=n, batch_size=64), pretrained_at_32, train, scored, out).stats
    err = capsys.readouterr().err
    said = [w for w in stats[64].get("warnings", []) if "reaches past" in w]
    assert len(said) == 1 and said[0].startswith("max_length 64 reaches past the 32 tokens a row"), stats[64]
    assert err.count(f"WARNING: {said[0]}\n") == 1
    assert "warnings" not in stats[32], stats[32]
