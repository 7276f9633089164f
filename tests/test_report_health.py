"""Health reaches the scores (issue 46): ``kolectra report`` of an eval carries the pretraining verdict
of the checkpoint it fine-tuned, its own fine-tuning verdict and the train/test overlap warning; the
table of several evals marks a model whose pretraining learned nothing and a score measured on rows
of its training file. Driven through ``kolectra pretrain``, ``finetune nsmc`` and ``report``."""

from __future__ import annotations

from pathlib import Path

from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import Store
from tests.model_support import small_chain
from tests.test_faults_pretrain import SETS
from tests.test_finetune_e2e import nsmc_file


def _last(capsys) -> str:
    return capsys.readouterr().out.strip().splitlines()[-1]


def test_reports_carry_the_checkpoints_verdict_the_finetuning_verdict_and_the_overlap(tmp_path, capsys):
    store = Store(tmp_path / "root")
    examples = small_chain(store)[2]
    out = ["--out", str(store.root)]
    # a learning rate of 1e-9: the generator never leaves uniform guessing, so pretraining learned nothing
    flags = [f"--set={s}" for s in SETS if not s.startswith(("train.lr", "train.save_every"))]
    assert main(["pretrain", "--examples", str(examples.path), "--preset", "tiny", *flags, "--set", "train.lr=1e-9",
                 "-q", *out]) == 0
    ckpt = store.resolve(_last(capsys))
    assert ckpt.manifest["stats"]["health"]["status"] == "not_learning"

    train = nsmc_file(tmp_path / "train.txt", 40, 0)
    test = tmp_path / "test.txt"  # 20 rows of their own, then 5 of the training file's
    own = [f"{5000 + i}\t시험에만 있는 {i}번째 리뷰 문장입니다\t{i % 2}" for i in range(20)]
    test.write_text("\n".join(["id\tdocument\tlabel", *own, *train.read_text(encoding="utf-8").splitlines()[1:6]])
                    + "\n", encoding="utf-8")
    evals = []
    for seed, name in ((1, "nsmc-a"), (2, "nsmc-b")):
        assert main(["finetune", "nsmc", "--model", ckpt.id, "--train", str(train), "--test", str(test), "--preset",
                     "sample", "--set", "max_length=32", "--set", "epochs=1", "--set", "max_train_examples=0",
                     "--set", "max_eval_examples=0", "--name", name, "--seed", str(seed), "-q", *out]) == 0
        evals.append(store.resolve(_last(capsys)))

    # one eval's report: a Health section with both verdicts and the warning
    assert main(["report", evals[0].id, "--dest", str(tmp_path / "one"), *out]) == 0
    report = Path(_last(capsys)).read_text(encoding="utf-8")
    health = report.split("## Health\n\n")[1].split("\n## ")[0]
    # (its discriminator, near its initialisation too, is not judged: 2 steps of 8 rows of 32 tokens score fewer than
    # model.health.MIN_CLASS_TOKENS replaced tokens; checkpoint 20 as first written said it was worse than the prior)
    assert f"- pretraining (`{ckpt.path.name}`): **learned nothing**: the generator has not left uniform" in health
    assert f"- fine-tuning (`{evals[0].path.name}`): **" in health
    assert "WARNING: nsmc: 5 of 25 scored rows (20.0%)" in health and "also appear in the training file" in health

    # several: the model row says its pretraining learned nothing, each cell the overlap
    assert main(["report", evals[0].id, evals[1].id, "--dest", str(tmp_path / "table"), *out]) == 0
    printed = capsys.readouterr().out
    row = [ln for ln in printed.splitlines() if ln.startswith("| checkpoint/")][0]
    assert f"checkpoint/{ckpt.path.name} (pretraining: learned nothing)" in row
    assert row.count("20.0% of test rows in training") == 2
    table_md = Path(printed.strip().splitlines()[-1]).read_text(encoding="utf-8")
    assert row in table_md and "pretraining verdict" in table_md


def test_an_untrained_floor_is_said_to_be_untrained_not_unchecked(tmp_path, capsys):
    """A study's floor (pretraining of 0 steps, the random initialisation) stood in kolectra report's Health as
    '**unchecked: no metrics logged after warm-up**', in bold beside the arms, and in a score table as '(pretraining:
    unchecked: no metrics logged after warm-up)', as a run whose log missed its windows; it is said to be untrained."""
    from kolectra.pipeline import stages
    from kolectra.pipeline.scores import _pretraining_note
    from kolectra.pipeline.verdicts import health_lines

    store = Store(tmp_path / "root")
    examples = small_chain(store)[2]
    floor = stages.pretrain(store, examples, preset="tiny", sets=["train.steps=0", "train.warmup_steps=0"], seed=1,
                            name="study-floor")
    assert floor.manifest["stats"]["health"]["status"] == "unchecked"
    assert health_lines([floor]) == [f"- pretraining (`{floor.path.name}`): untrained (0 steps: the random "
                                     "initialisation, as a study's floor)"]
    probe = stages.probe(store, floor, nsmc_file(tmp_path / "train.txt", 40, 0), nsmc_file(tmp_path / "dev.txt", 20, 1),
                         seed=1, name="study-probe")
    assert _pretraining_note(store, probe) == " (pretraining: untrained (0 steps: the random initialisation, as a " \
                                              "study's floor))"
    capsys.readouterr()
    # kolectra artifacts show, the floor's own page, said 'health    training health unchecked: no metrics logged
    # after warm-up', as a run whose log missed its windows
    assert main(["artifacts", "show", floor.path.name, "--out", str(store.root)]) == 0
    shown = capsys.readouterr().out
    assert "  health    untrained (0 steps: the random initialisation, as a study's floor)" in shown, shown
    assert "unchecked" not in shown


def test_a_floor_s_card_and_last_line_say_untrained_not_a_nan_loss(tmp_path, capsys):
    """A study's floor (0 steps) ended 'pretrain done: 0 steps in 0m00s, final loss nan', once a pretraining seed
    in every study's output, and its cards' Training table said 'final loss | nan' and 'training health |
    unchecked: no metrics logged after warm-up': a divergence and a log that missed its windows, to a reader."""
    from kolectra.pipeline import stages

    store = Store(tmp_path / "root")
    examples = small_chain(store)[2]
    capsys.readouterr()
    floor = stages.pretrain(store, examples, preset="tiny", sets=["train.steps=0", "train.warmup_steps=0"], seed=1,
                            name="study-floor")
    err = capsys.readouterr().err
    assert "pretrain done: 0 steps, untrained (0 steps: the random initialisation, as a study's floor)" in err
    assert "nan" not in err
    for network in ("discriminator", "generator"):
        card = (floor.path / "hf" / network / "README.md").read_text(encoding="utf-8")
        assert "| final loss | none (0 steps: the random initialisation) |" in card, network
        assert "| training health | untrained (0 steps: the random initialisation, as a study's floor) |" in card
        assert "nan" not in card and "unchecked" not in card
