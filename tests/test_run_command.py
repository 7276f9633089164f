"""``kolectra run``'s own words: the line a failed run ends with, and the model it points to on a bucket.

The chain itself runs in tests/test_end_to_end.py; here its stages are stand-ins, so each test takes
a fraction of a second.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from kolectra.core.stage import StageOutput
from kolectra.pipeline import stages
from kolectra.pipeline.cli import main
from kolectra.pipeline.run import next_steps, timed_stage
from kolectra.pipeline.store.artifacts import ArtifactError
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.request import Request
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)


def _standin(store, kind: str, name: str, parents: tuple = ()):
    def produce(out: Path) -> StageOutput:
        (out / "stats.json").write_text("{}")
        return StageOutput(stats={})
    return store.build(Request(kind=kind, name=name, stage_version=1, config={"name": name}, parents=parents),
                       produce)


@pytest.mark.parametrize("failure, says", [
    (OSError(errno.ENOSPC, "No space left on device", "/x/shard"), "no space left on the device"),
    (ArtifactError("examples: refused"), "examples: refused"),
])
def test_a_run_failing_midway_names_the_stage_and_what_it_kept(tmp_path, monkeypatch, capsys, failure, says):
    monkeypatch.setattr(stages, "corpus", lambda store, *a, **k: _standin(store, "corpus", "sample"))
    monkeypatch.setattr(stages, "vocab", lambda store, corpus, **k: _standin(store, "vocab", "sample", (corpus,)))

    def examples(*a, **k):
        raise failure

    monkeypatch.setattr(stages, "examples", examples)
    assert main(["run", "--out", str(tmp_path)]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    # the line named neither the stage that failed nor the two kept: a failure is no interrupt
    assert line.startswith("kolectra run: error: ") and says in line
    assert "kolectra run stopped at examples; done before it and kept: corpus, vocab (the same `kolectra run` without --force reuses them)" \
        in line


def test_an_interrupt_during_the_summary_says_every_stage_was_kept(tmp_path, monkeypatch):
    from kolectra.pipeline import run

    _standins(monkeypatch)

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "summary", interrupted)
    # in this process, not through main: the command's handler silences threads for the rest of the process
    with pytest.raises(KeyboardInterrupt) as e:  # the command's line said "interrupted; nothing was published"
        run.run_sample(open_store(tmp_path))
    assert e.value.__notes__ == ["while writing the summary; every stage was done and kept: corpus, vocab, examples, "
                                 "pretrain, finetune nsmc, finetune korquad (the same `kolectra run` without --force reuses them)"]


def test_a_failure_in_the_first_stage_names_it_and_keeps_nothing():
    def failing():
        raise ArtifactError("no input")

    with pytest.raises(ArtifactError) as e:
        timed_stage({}, "corpus", failing)
    assert e.value.__notes__ == ["kolectra run stopped at corpus"]


def test_the_model_in_a_bucket_is_pointed_to_through_export(bucket, monkeypatch, tmp_path):
    """from_pretrained reads no s3:// URL: the summary said it would load the bucket's folder."""
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))
    store = open_store(f"{bucket}/r")
    ckpt = _standin(store, "checkpoint", "sample")
    text = "\n".join(next_steps(store, ckpt))
    assert f"{ckpt.path}/hf/discriminator (in the store)" in text
    assert f"kolectra export {ckpt.id} --to DIR --out {bucket}/r writes it to a local folder" in text
    assert "from_pretrained(<that directory>)" not in text
    local = open_store(tmp_path / "root")
    text = "\n".join(next_steps(local, _standin(local, "checkpoint", "sample")))
    assert "from_pretrained(<that directory>) loads it" in text and "kolectra export" not in text


def _standins(monkeypatch) -> None:
    """Every stage of run_sample replaced by one that writes a file (an eval's metrics.json)."""
    from kolectra.pipeline import run

    def standin(kind):
        def stage(store, *args, force=False, name=None, **kwargs):
            parents = tuple(a for a in args if hasattr(a, "manifest"))

            def produce(out: Path) -> StageOutput:
                (out / "metrics.json").write_text('{"task": "nsmc", "accuracy_pct": 50.0}')
                return StageOutput(stats={})
            return store.build(Request(kind=kind, name=name or "sample", stage_version=1, config={"k": name},
                                       parents=parents), produce, force)
        return stage

    for fn, kind in (("corpus", "corpus"), ("vocab", "vocab"), ("examples", "examples"),
                     ("pretrain", "checkpoint"), ("finetune", "eval")):
        monkeypatch.setattr(stages, fn, standin(kind))
    monkeypatch.setattr(run, "demo_budget", lambda sets: "")


def test_a_forced_rerun_on_the_same_store_is_not_called_reused(tmp_path, monkeypatch, capsys):
    """run_sample twice on one Store object (a library caller, a test), the second with force: every
    stage was built again, and the summary marked each "reused" (its id was built before, in the process)."""
    from kolectra.pipeline import run

    _standins(monkeypatch)
    store = open_store(tmp_path)
    for force, reused in ((False, 0), (False, 6), (True, 0)):
        run.run_sample(store, force=force)
        times = capsys.readouterr().out.split("== wall time")[1].split("\n\n")[0].splitlines()[1:]
        assert len(times) == 6 and sum("reused" in line for line in times) == reused, (force, times)


def test_the_warnings_header_says_when_they_were_printed(tmp_path):
    """A rerun reuses every stage and prints none of their warnings, yet the header said "printed above"."""
    from kolectra.pipeline.run import summary

    store = open_store(tmp_path)

    def art(kind, name, parents=(), stats=None, files=None):
        def produce(out: Path) -> StageOutput:
            for rel, text in (files or {"stats.json": "{}"}).items():
                (out / rel).write_text(text)
            return StageOutput(stats=stats or {})
        return store.build(Request(kind=kind, name=name, stage_version=1, config={}, parents=parents), produce)

    ckpt = art("checkpoint", "sample", stats={"warnings": ["the loss rose"]})
    nsmc = art("eval", "sample-nsmc", (ckpt,), files={"metrics.json": '{"task": "nsmc", "accuracy_pct": 50.0}'})
    timings = {"pretrain": 1.0, "finetune nsmc": 1.0}
    for reused, says in ((set(), "(printed above as they happened)"),
                         (set(timings), "(recorded when they were built: this run reused every stage)"),
                         ({"pretrain"}, "(recorded by the artifacts; a stage built in this run printed its own above)")):
        text = summary(store, [nsmc], timings, ckpt, reused)
        assert f"== warnings: 1 {says} ==" in text and "checkpoint sample: the loss rose" in text


def test_the_next_steps_name_the_evals_by_id(tmp_path):
    """README's `kolectra report sample-nsmc sample-korquad` is ambiguous once a root holds two demo runs
    (another kolectra's stage versions): the summary gives the command that reports this run's evals."""
    store = open_store(tmp_path)
    ckpt = _standin(store, "checkpoint", "sample")
    evals = [_standin(store, "eval", name, (ckpt,)) for name in ("sample-nsmc", "sample-korquad")]
    text = "\n".join(next_steps(store, ckpt, evals))
    assert f"kolectra report {evals[0].id} {evals[1].id} --out {tmp_path}" in text
    assert "the scores in one table" in "\n".join(next_steps(store, ckpt, evals))
    assert "the scores in one table" not in "\n".join(next_steps(store, ckpt))
