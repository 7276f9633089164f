"""What a run's last lines say of whether it learned (model/train_end.py's finish, model.health_standing.end_text), and what
the progress line and ``kolectra report``'s curves show for ``mlm``, which has no generator
(model.metrics.progress_text, pipeline.report.training_panels), and what the same
command says when it reuses the checkpoint (pipeline.stages.reused_health): real ``kolectra pretrain`` runs of
the tiny preset on the small templated examples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kolectra.pipeline.cli import main
from kolectra.pipeline.report import training_panels
from kolectra.pipeline.store.artifacts import Store
from tests.model_support import small_chain


@pytest.fixture(scope="module")
def examples(tmp_path_factory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("health-end")
    store = Store(root)
    small_chain(store, n=128, seq_len=64)
    return root, str(store.list("examples")[0].path)


def _run(examples, capsys, *sets: str, objective: str = "electra", force: bool = True,
         quiet: bool = False) -> tuple[list[str], Path]:
    root, ex = examples
    flags = [f"--set={s}" for s in ("train.batch_size=16", "train.warmup_steps=4", "train.log_every=5",
                                    "train.cpu_threads=1", "model.dropout=0", "model.attention_dropout=0", *sets)]
    assert main(["pretrain", "--examples", ex, "--out", str(root), "--preset", "tiny", "--objective", objective,
                 *(["--force"] if force else []), *(["-q"] if quiet else []), *flags]) == 0
    out = capsys.readouterr()
    return out.err.strip().splitlines(), Path(out.out.strip().splitlines()[-1])


def _health(art: Path) -> dict:
    return json.loads((art / "manifest.json").read_text(encoding="utf-8"))["stats"]["health"]


def test_a_run_warned_early_that_learned_nothing_says_so_in_its_last_line(examples, capsys):
    """lr 1e-12, 40 steps: warned at step 5, then 7 more progress lines; the last line read 'pretrain done: 40
    steps in 0m03s, final loss 39.6' as a run that learned does. It now ends with the verdict and its problems."""
    err, art = _run(examples, capsys, "train.lr=1e-12", "train.steps=40")
    warned = [i for i, ln in enumerate(err) if "WARNING: this run has not learned what it should (step 5)" in ln]
    assert warned and warned[0] < len(err) - 3, err  # the warning came early, lines above the end
    assert _health(art)["status"] == "not_learning"
    last = err[-1]
    assert last.startswith("[kolectra] pretrain done: 40 steps in "), err
    assert "; training health: NOT LEARNING (warned at step 5, standing at the end): the discriminator " in last
    assert "the generator has not left uniform guessing" in last


def test_a_run_that_learned_and_an_mlm_run_end_ok_and_mlm_shows_no_generator(examples, capsys):
    """The same grammar at lr 3e-3 learns (the checks pass at the end); mlm has no generator, and its progress
    line read 'loss 2.7002 (gen 0.000, mlm 2.700)', a generator that predicts every masked token."""
    err, art = _run(examples, capsys, "train.lr=3e-3", "train.steps=20", objective="mlm")
    assert _health(art)["status"] == "ok"
    assert err[-1].endswith("; training health: ok"), err
    lines = [json.loads(ln) for ln in (art / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    assert lines[-1]["gen_loss"] == 0.0  # the term it does not have, as logged
    progress = [ln for ln in err if "pretrain 20/20" in ln]
    assert progress and "(mlm " in progress[-1] and "gen " not in progress[-1], progress
    # kolectra report's curves: a flat "generator loss" at 0, and the MLM accuracy alone under "generator"
    panels = {p.title: p for p in training_panels(lines)}
    assert set(panels) == {"total loss", "MLM loss", "masked LM", "learning rate", "throughput"}, set(panels)
    assert set(panels["masked LM"].series) == {"MLM accuracy"}


def test_the_same_command_again_says_the_checkpoint_it_reuses_learned_nothing(examples, capsys, monkeypatch):
    """Run again, the command that built a run that learned nothing reused it saying 'checkpoint: reusing
    ROOT/checkpoint/NAME-ID (same request; --force rebuilds)' and the path alone, under -q nothing at all; the
    verdict is said, as a WARNING (-q keeps it). A run that learned is reused without a word of health."""
    monkeypatch.setenv("KOLECTRA_VERBOSITY", "1")  # -q sets it for the process (and its workers): put back after
    sets = ("train.lr=1e-12", "train.steps=12")
    _, art = _run(examples, capsys, *sets)
    said = f"[kolectra] checkpoint: WARNING: {art.name} (reused): learned nothing: {'; '.join(_health(art)['problems'])}"
    err, again = _run(examples, capsys, *sets, force=False)
    assert again == art and "reusing" in err[-2] and err[-1] == said, err
    _run(examples, capsys, "train.lr=3e-3", "train.steps=20", objective="mlm", force=False)
    err, _ = _run(examples, capsys, "train.lr=3e-3", "train.steps=20", objective="mlm", force=False)
    assert "reusing" in err[-1], err
    err, again = _run(examples, capsys, *sets, quiet=True, force=False)
    assert again == art and err[-1] == said, err
