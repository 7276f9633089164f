"""After an upgrade: a stage reading a parent that an earlier kolectra built (another stage version)
says so in one line, naming both versions and the command that rebuilds it; the parent is used as it
is (its id, and its children's, name that build). The old artifacts are written here, through the
store, with the stage version an earlier kolectra recorded (no git history, no shared data)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

from kolectra.core.stage import StageOutput
from kolectra.pipeline import stage_versions
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.request import Request
from tests.model_support import build_examples, build_tokenizer
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures: moto's S3 server)

FLAGS = ["--set=train.steps=1", "--set=train.batch_size=8", "--set=train.warmup_steps=0", "--set=train.cpu_threads=1",
         "--preset", "tiny", "-q"]


def test_the_versions_read_without_importing_are_the_modules_own():
    for kind, module in stage_versions.MODULES.items():
        assert stage_versions.current(kind) == importlib.import_module(module).STAGE_VERSION, kind
    for task in stage_versions.EVAL_TASKS:
        assert stage_versions.current("eval", task) == importlib.import_module(f"kolectra.finetune.{task}").STAGE_VERSION
    assert stage_versions.current("eval") is None and stage_versions.current("eval", "nope") is None


def _chain(store: Store, examples_version: int):
    """corpus -> vocab -> examples, the examples recorded under ``examples_version``."""
    def writes(fn):
        def produce(out: Path) -> StageOutput:
            fn(out)
            return StageOutput(stats={})
        return produce

    now = stage_versions.current
    corpus = store.build(Request(kind="corpus", name="c", stage_version=now("corpus"), config={}),
                         writes(lambda out: (out / "stats.json").write_text("{}")))
    vocab = store.build(Request(kind="vocab", name="v", stage_version=now("vocab"), config={}, parents=(corpus,)),
                        writes(build_tokenizer))
    examples = store.build(Request(kind="examples", name="e", stage_version=examples_version, config={},
                                   parents=(corpus, vocab)),
                           writes(lambda out: build_examples(out, store.local(vocab), n=32, seq_len=32, shard_size=50)))
    return corpus, vocab, examples


def _pretrain(store: Store, examples, capsys) -> list[str]:
    assert main(["pretrain", "--examples", str(examples.path), *FLAGS, "--out", str(store.root)]) == 0
    return [line for line in capsys.readouterr().err.splitlines() if "stage version" in line]


def test_pretraining_on_examples_of_an_earlier_version_says_so_in_one_line(tmp_path, capsys):
    store = Store(tmp_path / "root")
    old = stage_versions.current("examples") - 1
    corpus, vocab, examples = _chain(store, old)
    assert json.loads((examples.path / "manifest.json").read_text())["stage_version"] == old
    lines = _pretrain(store, examples, capsys)
    assert len(lines) == 1, lines
    now = stage_versions.current("examples")
    assert (f"examples/{examples.path.name} was built by an earlier kolectra (examples stage version {old}; "
            f"this one builds {now})") in lines[0]
    assert f"kolectra examples --corpus {corpus.id} --vocab {vocab.id}" in lines[0], lines[0]
    assert "WARNING" in lines[0]  # shown at -q too


def test_two_ranks_pretraining_on_examples_of_an_earlier_version_say_so_once(tmp_path):
    """Under torchrun (RANK/WORLD_SIZE, gloo) the note is one line for the job, from rank 0, as the run's
    other notices are: every rank wrote it (the device layer's rank, asked a line above, was not used)."""
    import os
    import subprocess
    import sys

    from tests.test_faults_interrupts import REPO
    from tests.test_model_ddp import _free_port

    store = Store(tmp_path / "root")
    examples = _chain(store, stage_versions.current("examples") - 1)[2]
    # a warm-up scaled to the run (the preset's, not 0) is said before the rank is known: rank 0's too (m8)
    flags = [f for f in FLAGS if f not in ("-q", "--set=train.warmup_steps=0")]
    cmd = [sys.executable, "-m", "kolectra.pipeline.cli", "pretrain", "--examples", str(examples.path), *flags,
           "--out", str(store.root)]
    port = str(_free_port())
    ranks = [subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
                                   "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank)}) for rank in (0, 1)]
    try:
        errs = [proc.communicate(timeout=300)[1] for proc in ranks]
    finally:
        for proc in ranks:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert [proc.returncode for proc in ranks] == [0, 0], "".join(e[-2000:] for e in errs)
    lines = [[x for x in err.splitlines() if "stage version" in x] for err in errs]
    assert len(lines[0]) == 1 and "was built by an earlier kolectra" in lines[0][0], lines
    assert lines[1] == [], lines[1]  # before: the same WARNING from rank 1 too
    scaled = [[x for x in err.splitlines() if "warm-up scaled" in x] for err in errs]
    assert len(scaled[0]) == 1 and scaled[1] == [], scaled  # before: rank 1's line too


def test_a_parent_of_this_version_is_read_without_a_line(tmp_path, capsys):
    store = Store(tmp_path / "root")
    examples = _chain(store, stage_versions.current("examples"))[2]
    assert _pretrain(store, examples, capsys) == []


def test_a_parent_of_a_newer_version_says_to_upgrade(tmp_path, capsys):
    store = Store(tmp_path / "root")
    newer = stage_versions.current("examples") + 1
    examples = _chain(store, newer)[2]
    lines = _pretrain(store, examples, capsys)
    assert len(lines) == 1 and f"built by a newer kolectra (examples stage version {newer}" in lines[0], lines


def test_show_names_the_version_that_built_it_and_this_kolectras(tmp_path, capsys):
    store = Store(tmp_path / "root")
    old = stage_versions.current("examples") - 1
    corpus, _, examples = _chain(store, old)
    out = ["--out", str(store.root)]
    assert main(["artifacts", "show", examples.id, *out]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("  version"))
    assert line == (f"  version   examples stage version {old} (this kolectra builds {old + 1}: an earlier kolectra "
                    "built it; docs/artifacts.md, 'Stage versions', says what changed)")
    assert main(["artifacts", "show", corpus.id, *out]) == 0
    assert f"  version   corpus stage version {stage_versions.current('corpus')} (this kolectra's)" in capsys.readouterr().out


def test_show_of_a_manifest_without_a_stage_version_says_none_was_recorded(tmp_path, capsys):
    """An optional field (a manifest written by other code through the store): one line, no TypeError."""
    from kolectra.pipeline.store import manifest as mf

    store = Store(tmp_path / "root")
    examples = _chain(store, stage_versions.current("examples"))[2]
    path = examples.path / "manifest.json"
    m = json.loads(path.read_text(encoding="utf-8"))
    del m["stage_version"]
    m["fields_digest"] = mf.fields_digest(m)
    mf.write_json(path, m)
    assert main(["artifacts", "show", examples.id, "--out", str(store.root)]) == 0
    assert "  version   no stage version recorded" in capsys.readouterr().out


def _eval(store: Store, name: str, version: int, tmp_path):
    folder = tmp_path / f"model-{name}"  # a Hugging Face folder fine-tuned: the model's row
    folder.mkdir()
    (folder / "config.json").write_text("{}", encoding="utf-8")
    from kolectra.pipeline.store.artifacts import fingerprint_inputs

    def produce(out: Path) -> StageOutput:
        metrics = {"task": "korquad", "exact_match": 0.0, "f1": 5.44, "questions": 12, "health": {"status": "ok"}}
        (out / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
        (out / "predictions.json").write_text("{}", encoding="utf-8")
        return StageOutput(stats={"task": "korquad", "health": {"status": "ok"}})
    return store.build(Request(kind="eval", name=name, stage_version=version, config={"task": "korquad"},
                               inputs=tuple(fingerprint_inputs([folder]))), produce)


def test_a_score_table_says_which_evals_an_earlier_kolectra_built(tmp_path, capsys):
    """A KorQuAD eval of version 2 recorded `ok` for a chance-level F1, which today's check flags: in one
    table with today's evals it is named, with both versions (report.md and stderr), not shown as equal."""
    store = Store(tmp_path / "root")
    now = stage_versions.current("eval", "korquad")
    old, new = _eval(store, "old", 2, tmp_path), _eval(store, "new", now, tmp_path)
    assert main(["report", old.id, new.id, "--dest", str(tmp_path / "t"), "--out", str(store.root)]) == 0
    err = [x for x in capsys.readouterr().err.splitlines() if "earlier kolectra" in x]
    assert len(err) == 1 and f"eval/{old.path.name} was built by an earlier kolectra (korquad stage version 2; " \
                              f"this one builds {now})" in err[0], err
    report = (tmp_path / "t" / "report.md").read_text(encoding="utf-8")
    assert f"- `eval/{old.path.name}` was built by an earlier kolectra" in report
    assert new.path.name not in report.split("Eval texts in the pretraining corpus")[0]  # then each eval's line (h4)


def test_the_report_of_one_eval_says_an_earlier_kolectra_built_it(tmp_path, capsys):
    """`kolectra report EVAL` named nothing (its health line read `ok` under korquad 2's rules), where the
    score table of several evals names it: the same line on stderr and in the eval's section of report.md."""
    store = Store(tmp_path / "root")
    now = stage_versions.current("eval", "korquad")
    old, new = _eval(store, "old", 2, tmp_path), _eval(store, "new", now, tmp_path)
    assert main(["report", old.id, "--dest", str(tmp_path / "old"), "--out", str(store.root)]) == 0
    err = [x for x in capsys.readouterr().err.splitlines() if "earlier kolectra" in x]
    said = f" was built by an earlier kolectra (korquad stage version 2; this one builds {now})"
    assert len(err) == 1 and f"eval/{old.path.name}{said}" in err[0], err
    section = (tmp_path / "old" / "report.md").read_text(encoding="utf-8").split(f"## eval: `{old.path.name}`")[1]
    assert section.lstrip().startswith(f"`eval/{old.path.name}`{said}: its score and its health check follow"), section
    assert main(["report", new.id, "--dest", str(tmp_path / "new"), "--out", str(store.root)]) == 0
    assert "earlier kolectra" not in capsys.readouterr().err
    assert "earlier kolectra" not in (tmp_path / "new" / "report.md").read_text(encoding="utf-8")


def test_a_score_table_of_a_seeds_summary_names_its_runs_an_earlier_kolectra_built(tmp_path, capsys):
    """A `--seeds` summary is the median of its runs (its own stage version is the summary's, 1): in a
    table, the runs an earlier kolectra's task built went unnamed (older_evals leaves summaries to their
    runs, which a table does not hold), where the summary's own report and a table of the runs name them;
    the table takes the runs' sizes and health for the summary's cell already."""
    from kolectra.pipeline.store.artifacts import fingerprint_inputs

    store = Store(tmp_path / "root")
    now = stage_versions.current("eval", "korquad")
    folder = tmp_path / "model-kq"
    folder.mkdir()
    (folder / "config.json").write_text("{}", encoding="utf-8")

    def built(config: dict, version: int, files: dict, parents=()):
        def produce(out: Path) -> StageOutput:
            for name, doc in files.items():
                (out / name).write_text(json.dumps(doc), encoding="utf-8")
            return StageOutput(stats={"task": "korquad"})
        return store.build(Request(kind="eval", name="kq", stage_version=version, config=config, parents=parents,
                                   inputs=() if parents else tuple(fingerprint_inputs([folder]))), produce)

    metrics = {"task": "korquad", "exact_match": 0.0, "f1": 0.0544, "questions": 12, "health": {"status": "ok"}}
    runs = [built({"task": "korquad", "seed": s}, 2, {"metrics.json": metrics, "predictions.json": {}}) for s in (1, 2)]
    summary = built({"task": "korquad", "seeds": [1, 2]}, 1, {"metrics.json": {"task": "korquad", "seeds": [1, 2],
                    "exact_match": 0.0, "f1": 0.0544}, "seeds.json": {}}, tuple(runs))
    new = _eval(store, "new", now, tmp_path)
    assert main(["report", "kq", new.id, "--dest", str(tmp_path / "t"), "--out", str(store.root)]) == 0
    err = [x for x in capsys.readouterr().err.splitlines() if "earlier kolectra" in x]
    said = (f", a run of the --seeds summary eval/{summary.path.name}, was built by an earlier kolectra (korquad "
            f"stage version 2; this one builds {now})")
    assert len(err) == 2 and all(any(f"eval/{r.path.name}{said}" in x for x in err) for r in runs), err
    report = (tmp_path / "t" / "report.md").read_text(encoding="utf-8")
    assert all(f"- `eval/{r.path.name}`{said}" in report for r in runs), report


def test_show_of_an_eval_compares_with_its_tasks_version(bucket, tmp_path, capsys):  # noqa: F811
    """`kolectra artifacts show EVAL` (seen on a bucket root, `finetune nsmc --out s3://...`) said `eval stage
    version 7` alone, for an eval an earlier kolectra's task built as for today's: it asked for the kind's
    version, which an eval has not (its task's, as `report` compares). Now as for the other kinds; a --seeds
    summary against the summary's own version."""
    from kolectra.pipeline.store.factory import open_store

    root = f"{bucket}/k"
    store = open_store(root)
    now, seeds_now = stage_versions.current("eval", "korquad"), stage_versions.version_of("kolectra.finetune.seeds")
    old, new = _eval(store, "old", now - 1, tmp_path), _eval(store, "new", now, tmp_path)

    def summary(out: Path) -> StageOutput:
        (out / "metrics.json").write_text(json.dumps({"task": "korquad", "seeds": [1]}), encoding="utf-8")
        return StageOutput(stats={})
    seeds = store.build(Request(kind="eval", name="kq-seeds", stage_version=seeds_now,
                                config={"task": "korquad", "seeds": [1]}, parents=(new,)), summary)

    def line(art) -> str:
        assert main(["artifacts", "show", art.id, "--out", root]) == 0
        return next(x for x in capsys.readouterr().out.splitlines() if x.startswith("  version"))
    assert line(old) == (f"  version   eval stage version {now - 1} (this kolectra builds {now}: an earlier kolectra "
                         "built it; docs/artifacts.md, 'Stage versions', says what changed)")
    assert line(new) == f"  version   eval stage version {now} (this kolectra's)"
    assert line(seeds) == f"  version   eval stage version {seeds_now} (this kolectra's)"
