"""Command-line input that was taken silently as something else (issue 27), now refused in one
line with exit status 2: options neither kolectra nor Beam knows (``--max-seq-lenght 32`` built
``seq128``), an empty ``KOLECTRA_HOME`` or ``--out ''`` (the root in the current directory),
artifact names that were changed behind the user's back, a ``--set`` key twice, an unknown
``KOLECTRA_VERBOSITY``. Every Beam option of any runner still passes. And a reader that closes
stdout early (``| head``) ends the command quietly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kolectra.core.stage import StageOutput
from kolectra.pipeline.cli import checks as cli_checks
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.request import Request

REPO = Path(__file__).resolve().parents[1]


def _refused(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


@pytest.mark.parametrize("argv, said", [
    (["examples", "--corpus", "c", "--vocab", "v", "--max-seq-lenght", "32"],
     "unknown option --max-seq-lenght (did you mean --max-seq-length?)"),
    (["corpus", "--input", "x.jsonl", "--text-feild", "body"],
     "unknown option --text-feild (did you mean --text-field?)"),
    (["corpus", "--input", "x.jsonl", "--text_field=body"], "unknown option --text_field (did you mean --text-field?)"),
    (["corpus", "--input", "x", "--direct-num-workers", "2"], "(did you mean --direct_num_workers?)"),
    (["corpus", "--input", "x", "--runer", "DataflowRunner"], "(did you mean --runner?)"),
    (["corpus", "--input", "x", "y"], "unexpected argument 'y'"),
    (["examples", "--corpus", "c", "--vocab", "v", "--print-config", "--max-seq-lenght", "32"],
     "unknown option --max-seq-lenght"),  # --print-config does not skip the check
])
def test_options_nobody_knows_are_one_line(tmp_path, capsys, argv, said):
    line = _refused(capsys, argv + ["--out", str(tmp_path)])
    assert line.startswith(f"kolectra {argv[0]}: error: ") and said in line, line
    assert not list(tmp_path.iterdir())  # refused before anything was made


BEAM = ["--runner", "DataflowRunner", "--project", "p", "--region", "europe-west4", "--temp_location", "gs://b/t",
        "--staging_location=gs://b/s", "--sdk_container_image", "img", "--machine_type", "n2-standard-8",
        "--number_of_worker_harness_threads", "1", "--experiments", "use_runner_v2", "--direct_num_workers", "2",
        "--direct_running_mode", "multi_processing", "--flink_master", "jm:8081", "--parallelism", "64",
        "--spark_master_url", "spark://m:7077", "--job_endpoint", "embed", "--environment_type", "EXTERNAL",
        "--environment_config", "localhost:50000", "--s3_endpoint_url", "http://minio:9000", "--save_main_session",
        "--corpus_staging", "gs://b/staging", "--max_num_workers=10", "--hdfs_host", "h"]


def test_every_beam_option_of_any_runner_still_passes(tmp_path, capsys):
    cli_checks.check_beam_args(BEAM, ["--input"], "corpus")
    cli_checks.check_beam_args(["--runner=PortableRunner", "--job_endpoint=embed"], [], "examples")
    assert main(["corpus", "--input", "x", "--print-config", "--out", str(tmp_path), *BEAM]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == "auto"


@pytest.mark.parametrize("env, argv, said", [
    ({"KOLECTRA_HOME": ""}, ["artifacts", "list"], "KOLECTRA_HOME is set but empty"),
    ({"KOLECTRA_HOME": "  "}, ["corpus", "--input", "x"], "KOLECTRA_HOME is set but empty"),
    ({}, ["artifacts", "list", "--out", ""], "--out is empty"),
    ({}, ["corpus", "--input", "x", "--out", ""], "--out is empty"),
    ({"KOLECTRA_VERBOSITY": "loud"}, ["artifacts", "list"], "KOLECTRA_VERBOSITY='loud': expected one of 0"),
    ({"KOLECTRA_VERBOSITY": "7"}, ["corpus", "--input", "x", "-q"], "KOLECTRA_VERBOSITY='7'"),
    ({}, ["corpus", "--input", "x", "--name", ".."], "--name '..' is not"),
    ({}, ["corpus", "--input", "x", "--name", "../up"], "--name '../up' is not"),
    ({}, ["vocab", "--corpus", "c", "--name", "뉴스코퍼스"], "--name '뉴스코퍼스' is not"),
    ({}, ["corpus", "--input", "x", "--name", "a" * 49], "is 49 characters, over 48"),
    ({}, ["corpus", "--input", "x", "--name", ""], "--name '' is empty"),
    ({}, ["corpus", "--input", "x", "--set", "min_chars=3", "--set", "min_chars=4"], "--set min_chars is given twice"),
    ({}, ["pretrain", "--examples", "e", "--set", "train.lr=1e-3", "--set", " train.lr=2e-3"],
     "--set train.lr is given twice"),
    # a flag and --set on one key: the flag won silently, even over a different value
    ({}, ["pretrain", "--examples", "e", "--steps", "10", "--set", "train.steps=20"],
     "train.steps is given twice, by --steps 10 and by --set train.steps=20"),
    ({}, ["pretrain", "--examples", "e", "--preset", "small", "--set", "preset=mini"], "by --preset small and by"),
    ({}, ["vocab", "--corpus", "c", "--vocab-size", "8000", "--set", "vocab_size=8000"], "by --vocab-size 8000 and"),
    ({}, ["examples", "--corpus", "c", "--vocab", "v", "--seed", "3", "--set", "seed=4"], "by --seed 3 and by"),
    ({}, ["finetune", "nsmc", "--model", "m", "--train", "t", "--test", "t", "--seeds", "1-2", "--set", "seed=5"],
     "seed is given twice, by --seeds 1-2 and by --set seed=5"),
])
def test_settings_that_meant_something_else_are_refused(tmp_path, capsys, monkeypatch, env, argv, said):
    monkeypatch.chdir(tmp_path)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    if "--out" not in argv and "KOLECTRA_HOME" not in env:
        argv = argv + ["--out", str(tmp_path / "root")]
    line = _refused(capsys, argv)
    assert said in line, line
    assert not list(tmp_path.iterdir())  # nothing written in the current directory, or anywhere


def test_names_valid_as_given_are_kept(tmp_path):
    from kolectra.pipeline.stages import NAME_MAX, artifact_name

    assert artifact_name("nsmc-small_v1.2+x", "d") == "nsmc-small_v1.2+x"
    assert artifact_name("a" * NAME_MAX, "d") == "a" * NAME_MAX
    assert artifact_name(None, "뉴스 2024.jsonl") == "2024.jsonl"  # a default is made into a name


def test_a_closed_stdout_ends_quietly(tmp_path):
    store = Store(tmp_path)

    def produce(out: Path) -> StageOutput:
        for i in range(300):  # enough lines for `show` to write more than a pipe holds
            (out / f"file-{i:04d}.txt").write_text("x" * i, encoding="utf-8")
        return StageOutput(stats={f"k{i}": i for i in range(300)})

    art = store.build(Request(kind="corpus", name="big", stage_version=1, config={}), produce)
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line, as `| head -0` would be
    proc = subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", "artifacts", "show", art.id, "--out",
                           str(tmp_path)], stdout=write, stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    os.close(write)
    assert proc.stderr == "" and proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("level", ["loud", "7"])
def test_a_bad_verbosity_is_refused_in_a_fresh_process(tmp_path, level):
    """In-process tests import kolectra.corpus before main() runs; a fresh process imports it while
    main builds its parser, and its beam_logging wrote KOLECTRA_VERBOSITY back clamped ('loud' -> 1,
    7 -> 3) before the check read it: the bad value was taken silently (docs/cli.md says refused)."""
    proc = subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", "artifacts", "list", "--out",
                           str(tmp_path / "root")], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO), "KOLECTRA_VERBOSITY": level})
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert f"KOLECTRA_VERBOSITY='{level}': expected one of 0" in proc.stderr


@pytest.mark.parametrize("value", ["line", "none"])
def test_a_misspelt_progress_setting_is_refused(tmp_path, value):
    """KOLECTRA_PROGRESS=line (for lines) was taken silently as unset: bars on a terminal (m4)."""
    from kolectra.core import bars
    from kolectra.pipeline.cli import checks

    assert checks.PROGRESS_ENV == bars.ENV  # the check names the variable core/bars reads
    proc = subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", "artifacts", "list", "--out",
                           str(tmp_path / "root")], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO), "KOLECTRA_PROGRESS": value})
    assert proc.returncode == 2 and f"KOLECTRA_PROGRESS='{value}': expected lines" in proc.stderr, proc.stderr
    for fine in ("lines", "BAR", ""):
        proc = subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", "artifacts", "list", "--out",
                               str(tmp_path / "root")], capture_output=True, text=True, cwd=REPO, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(REPO), "KOLECTRA_PROGRESS": fine})
        assert proc.returncode == 0, (fine, proc.stderr)


def test_beam_arguments_that_passed_are_remembered_by_what_decides_them(tmp_path, monkeypatch):
    """A reused artifact's command given Beam options checked them with Beam's parser (about 2 CPU s): arguments
    that passed are remembered under a name of the arguments, the Python, Beam's version and install folder and
    kolectra's options' sources (pipeline/cli/checks._passed_before); other arguments, another name; a runner
    named by a module path (the user's own, which may change) is never remembered."""
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path))
    two, three = (cli_checks._passed_before(["--direct_num_workers", n]) for n in ("2", "3"))  # noqa: SLF001
    assert two.parent == three.parent == tmp_path / "beam-options" and two != three
    assert two == cli_checks._passed_before(["--direct_num_workers", "2"])  # noqa: SLF001
    assert cli_checks._passed_before(["--runner=DataflowRunner"]) is not None  # noqa: SLF001
    for runner in (["--runner", "my.runners.Mine"], ["--runner=my.runners.Mine"]):
        assert cli_checks._passed_before(runner) is None  # noqa: SLF001
    cli_checks.check_beam_args(["--direct_num_workers", "2"], [], "corpus", remember=True)
    assert two.exists() and not three.exists()
    with pytest.raises(cli_checks.UnknownOption, match="--direct_num_workres"):
        cli_checks.check_beam_args(["--direct_num_workres", "2"], [], "corpus", remember=True)
    assert sorted(p.name for p in two.parent.iterdir()) == [two.name]
