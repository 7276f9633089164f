"""``kolectra report CHECKPOINT`` says the pretraining recipe: preset, objective, steps, batch, lr, warm-up, seed, dropout,
sharing, the sequence length and the tokens seen. Before 2026-12-02 its section held the compute and the last logged line
alone, so a 150-step run of seed 2 read like the demo's 600 steps of seed 42, and the compute's ``step | eager`` (how the
step ran) stood where a step number is read."""

from __future__ import annotations

from pathlib import Path

from kolectra.core.stage import StageOutput
from kolectra.pipeline.report import checkpoint_section
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.request import Request


def test_a_checkpoints_section_gives_its_recipe_and_names_how_the_step_ran(tmp_path):
    store = Store(tmp_path / "root")
    config = {"preset": "tiny", "seed": 2, "max_seq_length": 128,
              "model": {"dropout": 0.1, "embedding_sharing": "es"}, "objective": {"objective": "electra"},
              "train": {"steps": 150, "batch_size": 16, "lr": 1e-5, "warmup_steps": 15}}

    def produce(out: Path) -> StageOutput:
        (out / "weights.txt").write_text("w", encoding="utf-8")
        return StageOutput(stats={"max_seq_length": 128, "nonpad_tokens_seen": 306496},
                           compute={"flops": 469175500800, "step": "eager"})

    ckpt = store.build(Request(kind="checkpoint", name="s2", stage_version=1, config=config), produce)
    lines = checkpoint_section(ckpt, tmp_path)
    body = "\n".join(lines)
    for row in ("| preset | tiny |", "| objective | electra |", "| steps | 150 |", "| batch size | 16 |",
                "| lr | 1e-05 |", "| warm-up steps | 15 |", "| seed | 2 |", "| dropout | 0.1 |",
                "| embedding sharing | es |", "| sequence length | 128 |", "| tokens seen (non-padding) | 306,496 |",
                "| step (eager or compiled) | eager |"):
        assert row in body, (row, body)
    assert body.index("| recipe | value |") < body.index("| compute | value |")
