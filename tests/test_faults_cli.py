"""The command line under faults: every failure is one line naming the input and a non-zero exit.

A full disk (a file-size limit on the child process: RLIMIT_FSIZE), Ctrl-C and SIGTERM in the
middle of pretraining (then --resume), bad settings, a garbled tokenizer, an --out that is a file,
a corrupt compressed input, and a bug (its traceback goes to a log file the line names).
"""

from __future__ import annotations

import gzip
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from kolectra.core.stage import StageOutput
from kolectra.pipeline import cli, stages
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.request import Request
from tests.test_faults_pretrain import SETS, _copy, chain  # noqa: F401  (the chain fixture)
from tests.test_faults_publish import _no_half_artifact, _private

REPO = Path(__file__).resolve().parents[1]
FLAGS = [f"--set={s}" for s in SETS]


def kolectra(*args: str, fsize: int | None = None, wait: bool = True):
    """The installed ``kolectra`` command in a child process, optionally with a file-size limit."""
    def limit():
        # a terminal's Ctrl-C reaches the command; a suite started in the background (`pytest &`, nohup)
        # ignores SIGINT, and a child would inherit that through exec and train on after the signal
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    cmd = [sys.executable, "-m", "kolectra.pipeline.cli", *args]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if not wait:
        return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=limit)
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, preexec_fn=limit)


def _one_line(stderr: str, command: str) -> str:
    """The failure's line: the last one, starting with ``kolectra COMMAND:``; no traceback anywhere."""
    assert "Traceback" not in stderr, stderr[-3000:]
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(f"kolectra {command}: "), stderr[-3000:]
    return last


def _limited(argv: list[str], fsize: int) -> int:
    """``main(argv)`` in this process under a file-size limit (a child's start would cost its imports alone,
    ~7 CPU s); Python ignores SIGXFSZ: writes past it fail with EFBIG."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, hard))
    try:
        return main(argv)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def test_disk_full_while_pretraining_is_one_line_naming_the_file(chain, tmp_path, capsys):  # noqa: F811
    store, ex = _copy(chain, tmp_path / "root")
    assert _limited(["pretrain", "--examples", ex, "--out", str(store.root), *FLAGS], fsize=200_000) == 2
    line = _one_line(capsys.readouterr().err, "pretrain")
    assert "the file-size limit was reached" in line and "checkpoints/.tmp-step-00000004/" in line
    assert "; checkpoint not written: the file-size limit (ulimit -f) is 0.2 MB a file" in line
    assert _no_half_artifact(store) and _private(store.root)[".work"] == []  # nothing to resume: removed


def test_disk_full_while_logging_metrics_is_one_line_naming_the_folder(chain, tmp_path):  # noqa: F811
    """TensorBoard's event file fills first; its writer's thread died with a traceback and the line named
    no file ("error: the file-size limit was reached")."""
    store, ex = _copy(chain, tmp_path / "root")
    flags = [f for f in FLAGS if "save_every" not in f and "steps=" not in f]
    proc = kolectra("pretrain", "--examples", ex, "--out", str(store.root), *flags, "--steps", "60",
                    "--save-every", "0", fsize=3000)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "Exception in" not in proc.stderr, proc.stderr
    line = _one_line(proc.stderr, "pretrain")
    assert re.search(r"error: \S+/out/tensorboard: the file-size limit was reached; ", line), line


def test_disk_full_while_exporting_is_one_line(chain, tmp_path, capsys):  # noqa: F811
    """safetensors reports a full disk as its own error type, naming no file: still one line, not a bug
    report, and it names the export's folder (before: "the file-size limit was reached (while writing:
    SafetensorError ...)")."""
    store, ex = _copy(chain, tmp_path / "root")
    argv = ["pretrain", "--examples", ex, "--out", str(store.root), *(f for f in FLAGS if "train.save_every" not in f),
            "--save-every", "0"]
    assert _limited(argv, fsize=200_000) == 2
    line = _one_line(capsys.readouterr().err, "pretrain")
    assert re.search(r"error: \S+/out/hf/discriminator: the file-size limit was reached; ", line), line
    assert "nothing published" in line, line
    assert _no_half_artifact(store) and _private(store.root) == {".tmp": [], ".work": [], ".locks": []}


def test_ctrl_c_and_sigterm_keep_the_checkpoints_and_resume_continues(chain, tmp_path):  # noqa: F811
    store, ex = _copy(chain, tmp_path / "root")
    long = [*(f for f in FLAGS if "train.steps" not in f), "--steps", "100000"]
    for sig, code, word in ((signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")):
        before = set(store.root.glob(".work/*/*/checkpoints/step-*"))
        proc = kolectra("pretrain", "--examples", ex, "--out", str(store.root), *long, "--resume", wait=False)
        deadline = time.time() + 240  # until it saved a checkpoint of its own
        while time.time() < deadline and not set(store.root.glob(".work/*/out/checkpoints/step-*")) - before:
            time.sleep(0.05)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == code, err[-3000:]
        line = _one_line(err, "pretrain")
        # SIGTERM and Ctrl-C first end the step and save it (tests/test_faults_sigterm.py, test_faults_ctrl_c.py)
        assert line.startswith(f"kolectra pretrain: {word}") and "; checkpoint: its working state is kept in " in line
        assert line.endswith("--resume continues it")
    # The second run resumed the first one's checkpoints; now finish it under a shorter schedule.
    art = stages.pretrain(store, ex, preset="tiny", sets=[*SETS, "train.steps=14", "train.force_resume=true"],
                          resume=True)
    assert art.manifest["stats"]["resumed_from_step"] >= 8 and store.verify(art) == []
    assert _private(store.root) == {".tmp": [], ".work": [], ".locks": []}


@pytest.mark.parametrize("sets, expected", [
    (["model.heads=0"], "model.heads: must be >= 1, got 0"),
    (["train.batch_size=0"], "train.batch_size: must be >= 1, got 0"),
    (["train.lr=inf"], "train.lr: expected a finite number, got inf"),
    (["train.adam_eps=0"], "train.adam_eps: must be a finite number > 0, got 0.0"),
    (["train.lr=1e6", "train.warmup_steps=0"], "loss is NaN at step"),
])
def test_bad_settings_are_one_line(chain, tmp_path, capsys, sets, expected):  # noqa: F811
    store, ex = _copy(chain, tmp_path / "root")
    overridden = {s.split("=", 1)[0] for s in sets}  # a key given twice is refused on its own
    flags = [f for f in FLAGS if f.removeprefix("--set=").split("=", 1)[0] not in overridden]
    argv = ["pretrain", "--examples", ex, "--out", str(store.root), *flags, *(f"--set={s}" for s in sets)]
    assert main(argv) == 2
    assert expected in _one_line(capsys.readouterr().err, "pretrain")
    assert _private(store.root)[".work"] == []  # a refused request leaves nothing behind


def test_cuda_without_cuda_is_one_line(chain, tmp_path, capsys):  # noqa: F811
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    store, ex = _copy(chain, tmp_path / "root")
    assert main(["pretrain", "--examples", ex, "--out", str(store.root), *FLAGS, "--device", "cuda"]) == 2
    line = _one_line(capsys.readouterr().err, "pretrain")
    assert "torch sees no CUDA device" in line and "--resume" not in line


def test_a_garbled_tokenizer_is_named(chain, tmp_path, capsys):  # noqa: F811
    store, _ = _copy(chain, tmp_path / "root")
    corpus = store.list("corpus")[0]

    def garbled(out: Path) -> StageOutput:
        (out / "tokenizer.json").write_text('{"version": "1.0", "model": {"type": "WordPiece", "vocab": 7')
        (out / "tokenizer_config.json").write_text('{"tokenizer_class": "BertTokenizerFast"}')
        return StageOutput(stats={})

    def same_examples(out: Path) -> StageOutput:
        shutil.copytree(store.list("examples")[0].path / "data", out / "data")
        shutil.copy(store.list("examples")[0].path / "index.json", out)
        return StageOutput(stats={})

    vocab = store.build(Request(kind="vocab", name="bad", stage_version=1, config={"garbled": True},
                                        parents=(corpus,)), garbled)
    ex = store.build(Request(kind="examples", name="e2", stage_version=1, config={"garbled": True},
                                      parents=(corpus, vocab)),
                     same_examples)
    assert main(["pretrain", "--examples", ex.id, "--out", str(store.root), *FLAGS]) == 2
    line = _one_line(capsys.readouterr().err, "pretrain")
    assert f"{vocab.path / 'tokenizer.json'}: not a loadable tokenizer" in line


def test_out_that_is_a_file_and_study_flops_inf(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert main(["artifacts", "list", "--out", str(tmp_path / "file")]) == 2
    assert "file is a file, not a directory" in _one_line(capsys.readouterr().err, "artifacts list")
    assert main(["study", "--examples", "x", "--flops", "inf", "--nsmc-train", "x", "--out", str(tmp_path)]) == 2
    assert "--flops: expected a finite number > 0, got inf" in _one_line(capsys.readouterr().err, "study")
    assert main(["corpus", "--input", "x", "--out", str(tmp_path), "--direct_num_workers", "-3"]) == 2
    assert "--direct_num_workers" in _one_line(capsys.readouterr().err, "corpus")
    assert main(["corpus", "--input", "x", "--out", str(tmp_path), "--analysis_threads", "0"]) == 2
    assert "--analysis_threads: expected a whole number >= 1" in _one_line(capsys.readouterr().err, "corpus")


@pytest.mark.parametrize("name, data", [
    ("cut.jsonl.gz", gzip.compress(b"".join(b'{"text": "%d \xec\x95\x88\xeb\x85\x95 %d"}\n' % (i, i * i)
                                            for i in range(20000)))[:20000]),
    ("not-gzip.jsonl.gz", b"plain text, not gzip" * 10),
])
def test_a_corrupt_compressed_input_is_one_line_naming_it(tmp_path, capsys, name, data):
    (tmp_path / name).write_bytes(data)
    assert main(["corpus", "--input", str(tmp_path / name), "--out", str(tmp_path / "root")]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("kolectra corpus: error: ") and name in last
    assert _private(tmp_path / "root")[".tmp"] == []


def test_a_bug_is_one_line_with_the_traceback_in_a_log(tmp_path, capsys, monkeypatch):
    def broken(args, store):
        return {}["no such key"]

    monkeypatch.setattr(cli.commands, "artifacts_list", broken)
    assert main(["artifacts", "list", "--out", str(tmp_path)]) == 1
    line = _one_line(capsys.readouterr().err, "artifacts list")
    assert line.startswith("kolectra artifacts list: internal error: KeyError: 'no such key' (full traceback in ")
    log = Path(line.rsplit("full traceback in ", 1)[1].rstrip(")"))
    assert log.parent == tmp_path / ".logs" and "Traceback" in log.read_text() and "broken" in log.read_text()
