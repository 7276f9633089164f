"""``kolectra pretrain`` refused for its ``--examples`` (ambiguous, or not there) says why alone: before 2026-12-02 a
short run's ``warm-up scaled to 1 step ...`` line came first, a notice about a run that never started."""

from __future__ import annotations

from pathlib import Path

from kolectra.core.stage import StageOutput
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.request import Request


def test_an_ambiguous_examples_ref_is_refused_in_its_one_line(tmp_path, capsys):
    store = Store(tmp_path / "root")

    def produce(out: Path) -> StageOutput:
        (out / "index.json").write_text("{}", encoding="utf-8")
        return StageOutput(stats={})

    for n in (64, 128):
        store.build(Request(kind="examples", name="sample", stage_version=1, config={"max_seq_length": n}), produce)
    assert main(["pretrain", "--examples", "sample", "--steps", "5", "--out", str(store.root)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'sample' is ambiguous" in err[0], err
