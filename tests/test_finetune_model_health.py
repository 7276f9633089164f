"""``kolectra finetune`` of a checkpoint whose pretraining learned nothing says so before it trains. Before, the
run's only word was its own verdict at the end ("the model predicts class 1 for all 1000 dev rows: it learned
nothing", an audit on NSMC with a tiny checkpoint at the class prior), which points at the fine-tuning settings,
not at the model: the checkpoint's verdict was in its manifest, cards and report alone. A model folder with no
verdict (a Hugging Face directory) gets no such line. Real ``kolectra pretrain`` and ``finetune nsmc`` runs."""

from __future__ import annotations

import shutil

from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import Store
from tests.model_support import small_chain
from tests.test_faults_pretrain import SETS
from tests.test_finetune_e2e import nsmc_file

FT = ["--preset", "sample", "--set", "max_length=32", "--set", "epochs=1", "--set", "max_train_examples=0",
      "--set", "max_eval_examples=0"]


def test_finetuning_a_checkpoint_that_learned_nothing_warns_before_it_trains(tmp_path, capsys):
    store = Store(tmp_path / "root")
    examples = small_chain(store)[2]
    out = ["--out", str(store.root)]
    # a learning rate of 1e-9: the generator never leaves uniform guessing, so pretraining learned nothing
    flags = [f"--set={s}" for s in SETS if not s.startswith(("train.lr", "train.save_every"))]
    assert main(["pretrain", "--examples", str(examples.path), "--preset", "tiny", *flags, "--set", "train.lr=1e-9",
                 "-q", *out]) == 0
    ckpt = store.resolve(capsys.readouterr().out.strip().splitlines()[-1])
    problems = "; ".join(ckpt.manifest["stats"]["health"]["problems"])
    train, test = nsmc_file(tmp_path / "train.txt", 40, 0), nsmc_file(tmp_path / "test.txt", 20, 1)

    # a run refused for its input (a missing file, a misspelt key, both --seed and --seeds, bad --seeds) says
    # only why: a WARNING of the model above the refusal read as its cause
    for bad in (["--train", str(tmp_path / "missing.txt"), "--test", str(test)],
                ["--train", str(train), "--test", str(test), "--set", "epohcs=1"],
                ["--train", str(train), "--test", str(test), "--seed", "1", "--seeds", "1-2"],
                ["--train", str(train), "--test", str(test), "--seeds", "2-1"],
                # the training file as the scored one (train_on_eval), warned of before 2026-12-02
                ["--train", str(train), "--test", str(train)]):
        assert main(["finetune", "nsmc", "--model", ckpt.id, *bad, *FT, "-q", *out]) == 2, bad
        err = capsys.readouterr().err
        assert "learned nothing in pretraining" not in err and err.count("\n") == 1, (bad, err)

    assert main(["finetune", "nsmc", "--model", ckpt.id, "--train", str(train), "--test", str(test), *FT,
                 "-q", *out]) == 0  # -q keeps it: a WARNING
    err = capsys.readouterr().err.splitlines()
    said = (f"[kolectra] WARNING: nsmc: the model, checkpoint {ckpt.path.name}, learned nothing in pretraining "
            f"({problems}): expect a score near chance, whatever the fine-tuning settings")
    assert err and err[0] == said, err

    # a Hugging Face folder (the same weights, no recorded verdict): nothing said of its pretraining
    hf = shutil.copytree(ckpt.path / "hf" / "discriminator", tmp_path / "hf-model")
    assert main(["finetune", "nsmc", "--model", str(hf), "--train", str(train), "--test", str(test), *FT, *out]) == 0
    assert "learned nothing in pretraining" not in capsys.readouterr().err
