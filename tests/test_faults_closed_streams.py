"""A standard stream closed when kolectra starts (``>&-``, ``2>&-``, ``<&-``): the command runs as it would
with the stream pointed at the null device (core/streams.closed_to_null).

Python starts with ``sys.stdout`` (``sys.stderr``) None for a closed descriptor: ``kolectra vocab ... >&-``
built its vocab, then ended 'internal error: AttributeError: 'NoneType' object has no attribute 'flush''
(status 1, a traceback log); with ``2>&-`` every building command ended so at once ('... no attribute
'isatty''), its one line written to stdout (``print(file=None)`` is stdout), where a script reads the
artifact's path.

A terminal that hung up is one too for stdout: a command that outlived its SSH session (``setsid``, a
``disown``ed job, SIGHUP ignored) built its artifact and ended 'error: Input/output error', status 2, from
its last line's write to the terminal (EIO); it now ends as with a reader of ``| head`` gone."""

from __future__ import annotations

import os
import pty
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from kolectra.core.stage import StageOutput
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.request import Request

REPO = Path(__file__).resolve().parents[1]


def _closing(*fds: int):
    def start():
        for fd in fds:
            os.close(fd)
    return start


def _kolectra(argv: list[str], closed: tuple[int, ...]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", *argv], capture_output=True, text=True,
                          cwd=REPO, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)},
                          preexec_fn=_closing(*closed))


@pytest.mark.parametrize("closed", [(1,), (0, 1)], ids=[">&-", "<&- >&-"])
def test_a_command_whose_stdout_is_closed_ends_with_its_own_status(tmp_path, closed):
    art = Store(tmp_path).build(Request(kind="corpus", name="c", stage_version=1, config={}),
                                lambda out: StageOutput(stats={}))
    proc = _kolectra(["artifacts", "show", art.id, "--out", str(tmp_path)], closed)
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr  # before: 1, 'internal error: AttributeError'
    assert not (tmp_path / ".logs").exists()


def test_a_command_whose_stderr_is_closed_writes_nothing_of_it_to_stdout(tmp_path):
    proc = _kolectra(["vocab", "--corpus", "nothing-here", "--out", str(tmp_path)], (2,))
    assert (proc.returncode, proc.stdout) == (2, "")  # before: 1 and its line on stdout ('... no attribute 'isatty'')
    assert not (tmp_path / ".logs").exists()


def _environ(unbuffered: bool) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}, "PYTHONPATH": str(REPO),
            **({"PYTHONUNBUFFERED": "1"} if unbuffered else {})}


@pytest.mark.parametrize("unbuffered", [True, False], ids=["PYTHONUNBUFFERED", "buffered"])
def test_a_command_whose_terminal_hung_up_before_its_last_line_ends_with_its_own_status(tmp_path, unbuffered):
    """Buffered (no PYTHONUNBUFFERED: a command started after the hangup, the next one of a disowned script,
    sees no tty and buffers its output) the write failed at the flush after the command, whose handler
    pointed stdout at the null device before asking whether a terminal had hung up there: 'error:
    Input/output error; writing stdout, after the command had finished', status 2."""
    art = Store(tmp_path).build(Request(kind="corpus", name="c", stage_version=1, config={}),
                                lambda out: StageOutput(stats={}))
    terminal, its_end = pty.openpty()
    os.close(terminal)  # the SSH session dropped: every write to the terminal fails with EIO
    try:
        proc = subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", "artifacts", "show", art.id, "--out",
                               str(tmp_path)], stdout=its_end, stderr=subprocess.PIPE, text=True, cwd=REPO,
                              timeout=120, env=_environ(unbuffered), start_new_session=True)
    finally:
        os.close(its_end)
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr  # before: 2, 'error: Input/output error'


def _no_file_may_grow():
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))  # as a full disk under stdout: the write fails (EFBIG)


def test_a_full_disk_under_stdout_says_the_command_had_finished(tmp_path):
    """``kolectra vocab ... > paths.txt`` on a full disk said 'error: no space left on the device', read as the
    build's own failure, with the vocab published: its one line, written last, was what did not fit; and the
    interpreter's flush at exit failed again: 'Exception ignored in: <_io.TextIOWrapper name='<stdout>'...',
    status 120. (Under PYTHONUNBUFFERED the line fails as it is printed, inside the command: still the bare
    line.)"""
    art = Store(tmp_path).build(Request(kind="corpus", name="c", stage_version=1, config={}),
                                lambda out: StageOutput(stats={}))
    with open(tmp_path / "out.txt", "w") as out:  # noqa: PTH123
        proc = subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", "artifacts", "show", art.id, "--out",
                               str(tmp_path)], stdout=out, stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=120,
                              env={**{k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"},
                                   "PYTHONPATH": str(REPO)}, preexec_fn=_no_file_may_grow)
    assert proc.returncode == 2  # before: 120
    # before: 'error: the file-size limit was reached' alone, then Python's 'Exception ignored in: ...'
    # (and, before 2026-12-01, '(what it built stands)' after it: show builds nothing)
    assert proc.stderr == ("kolectra artifacts show: error: the file-size limit was reached; writing stdout, after "
                           "the command had finished\n"), proc.stderr


def test_a_full_disk_under_the_artifact_s_path_says_the_command_had_finished_under_pythonunbuffered(tmp_path):
    """Under PYTHONUNBUFFERED (Docker images, CI runners set it) the artifact's path fails as it is printed,
    inside the command, not at the flush after it: ``kolectra corpus ... >> paths.txt`` on a full disk, its
    corpus there, said only 'error: the file-size limit was reached', read as the build's own failure.
    The disk fills under stdout alone: its file is already at the size limit, which the store's small
    files (a lock's holder) stay under."""
    from kolectra.pipeline.cli import main

    (tmp_path / "in.jsonl").write_text("".join(f'{{"id": "{i}", "text": "영화가 정말 재미있었다 {i}번째 리뷰입니다. '
                                               '배우들의 연기도 훌륭했고 음악도 좋았다."}\n' for i in range(20)),
                                       encoding="utf-8")
    argv = ["corpus", "--input", str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "root"), "-q"]
    assert main(argv) == 0  # built here; the command below finds it
    full = tmp_path / "paths.txt"
    full.write_bytes(b"x" * 65536)

    def at_the_limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))

    with open(full, "a") as out:  # noqa: PTH123
        proc = subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", *argv], stdout=out,
                              stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=300, env=_environ(True),
                              preexec_fn=at_the_limit)
    assert proc.returncode == 2, proc.stderr
    # before: 'kolectra corpus: error: the file-size limit was reached' alone
    assert proc.stderr == ("kolectra corpus: error: the file-size limit was reached; writing stdout, after the "
                           "command had finished (what it built stands)\n"), proc.stderr


@pytest.mark.parametrize("unbuffered", [True, False], ids=["PYTHONUNBUFFERED", "buffered"])
def test_a_failing_verify_whose_reader_left_still_ends_with_its_failure(tmp_path, unbuffered):
    """``kolectra artifacts verify X | head -1`` with two files damaged ended 0, read as 'intact' by a script's
    ``&&``: buffered, the flush after the command found the reader gone and ended quietly with 0 in place of
    verify's 1 (after '2 problem(s)' on stderr); under PYTHONUNBUFFERED the second MISMATCH line's write ended
    the check itself, quietly, with 0. The reader here closed the pipe before the command started."""
    def build(out):
        for i in range(2):
            (out / f"f{i}.txt").write_text("x" * 10)
        return StageOutput(stats={})

    art = Store(tmp_path).build(Request(kind="corpus", name="c", stage_version=1, config={}), build)
    for i in range(2):
        (art.path / f"f{i}.txt").write_text("damaged")
    reader, writer = os.pipe()
    os.close(reader)
    try:
        proc = subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", "artifacts", "verify", art.id, "--out",
                               str(tmp_path)], stdout=writer, stderr=subprocess.PIPE, text=True, cwd=REPO,
                              timeout=120, env=_environ(unbuffered))
    finally:
        os.close(writer)
    assert (proc.returncode, proc.stderr) == (1, "2 problem(s)\n"), proc.stderr  # before: 0


@pytest.mark.parametrize("unbuffered", [True, False], ids=["PYTHONUNBUFFERED", "buffered"])
@pytest.mark.parametrize("argv", [["--version"], ["pretrain", "--print-config"]], ids=["version", "print-config"])
def test_version_and_print_config_on_a_gone_reader_or_a_full_disk_end_in_one_line(argv, unbuffered):
    """``kolectra --version`` (printed while the arguments were parsed, before any command's handler) ended in a
    traceback (status 1) or Python's 'Exception ignored in: <_io.TextIOWrapper name='<stdout>'...' (120) with its
    reader gone or on a full disk; ``--print-config > /dev/full`` buffered said its line, then the same (120)."""
    def run(stdout) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", *argv], stdout=stdout,
                              stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=120, env=_environ(unbuffered))

    reader, writer = os.pipe()
    os.close(reader)
    try:
        gone = run(writer)
    finally:
        os.close(writer)
    assert (gone.returncode, gone.stderr) == (0, ""), gone.stderr  # before (--version): 1 or 120
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    with open("/dev/full", "w") as full:  # noqa: PTH123
        proc = run(full)
    assert proc.returncode == 2, proc.stderr  # before: 1 or 120
    assert len(proc.stderr.splitlines()) == 1 and "error: no space left on the device" in proc.stderr, proc.stderr


def test_a_full_disk_under_a_report_s_lines_says_the_command_had_finished_under_pythonunbuffered(tmp_path):
    """``kolectra report EVAL > out.txt`` on a full disk, under PYTHONUNBUFFERED, its report.md written, said only
    'error: no space left on the device' (its printed path failed inside the command, as the artifact's path
    did before 516a293); buffered it said 'writing stdout, after the command had finished'. Alike now."""
    import json

    def produce(out):
        (out / "metrics.json").write_text(json.dumps({"task": "classify", "accuracy": 0.5}), encoding="utf-8")
        return StageOutput(stats={})

    Store(tmp_path).build(Request(kind="eval", name="e", stage_version=1, config={}), produce)
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    with open("/dev/full", "w") as full:  # noqa: PTH123
        proc = subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", "report", "e", "--out", str(tmp_path)],
                              stdout=full, stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=120,
                              env=_environ(True))
    assert list(tmp_path.glob("reports/*/report.md"))
    assert (proc.returncode, proc.stderr) == (2, "kolectra report: error: no space left on the device; writing stdout, "
                                                 "after the command had finished (what it built stands)\n"), proc.stderr


@pytest.mark.parametrize("unbuffered", [True, False], ids=["PYTHONUNBUFFERED", "buffered"])
@pytest.mark.parametrize("argv", [["--help"], ["artifacts", "list", "--help"]], ids=["kolectra", "artifacts-list"])
def test_help_with_its_reader_gone_ends_quietly(argv, unbuffered):
    """``kolectra --help | head -c0`` buffered ended in Python's 'Exception ignored in: <_io.TextIOWrapper
    name='<stdout>'...', status 120 (the help is printed while the arguments are parsed, before any handler)."""
    reader, writer = os.pipe()
    os.close(reader)
    try:
        proc = subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", *argv], stdout=writer,
                              stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=120, env=_environ(unbuffered))
    finally:
        os.close(writer)
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr  # before (buffered): 120


@pytest.mark.parametrize("unbuffered", [True, False], ids=["PYTHONUNBUFFERED", "buffered"])
@pytest.mark.parametrize("argv", [["--help"], ["artifacts", "list", "--help"], ["--version"],
                                  ["pretrain", "--print-config"]], ids=["help", "list-help", "version", "print-config"])
def test_a_full_disk_under_what_builds_nothing_claims_no_build(argv, unbuffered):
    """``kolectra --help > /dev/full`` (``--version``, ``--print-config``) said '...; writing stdout, after the
    command had finished (what it built stands)': printing was all it did. Under PYTHONUNBUFFERED ``--help``
    ended 0 with nothing said (argparse drops a failed write), and ``--version`` said the bare line."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    with open("/dev/full", "w") as full:  # noqa: PTH123
        proc = subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", *argv], stdout=full,
                              stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=120, env=_environ(unbuffered))
    command = " ".join(a for a in argv if a not in ("--help", "--print-config")) or argv[0]
    command += " --help" if "--help" in argv and argv != ["--help"] else ""
    assert (proc.returncode, proc.stderr) == (2, f"kolectra {command}: error: no space left on the device; "
                                                 "writing stdout\n"), proc.stderr


@pytest.mark.parametrize("unbuffered", [True, False], ids=["PYTHONUNBUFFERED", "buffered"])
def test_a_full_disk_under_an_artifacts_list_claims_no_build(tmp_path, unbuffered):
    """``kolectra artifacts list > out.txt`` on a full disk (buffered: the flush after the listing) said
    '(what it built stands)': it builds nothing."""
    Store(tmp_path).build(Request(kind="corpus", name="c", stage_version=1, config={}), lambda out: StageOutput(stats={}))
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    with open("/dev/full", "w") as full:  # noqa: PTH123
        proc = subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", "artifacts", "list", "--out",
                               str(tmp_path)], stdout=full, stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=120,
                              env=_environ(unbuffered))
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "error: no space left on the device" in proc.stderr and "built" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("unbuffered", [True, False], ids=["PYTHONUNBUFFERED", "buffered"])
def test_a_full_disk_under_the_published_table_alone_claims_no_build(tmp_path, unbuffered):
    """``kolectra report --published > out.txt`` (no REF: it prints docs/published.md's table and builds nothing)
    on a full disk said '...; writing stdout, after the command had finished (what it built stands)', and under
    PYTHONUNBUFFERED only 'error: no space left on the device', naming no stdout."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    with open("/dev/full", "w") as full:  # noqa: PTH123
        proc = subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", "report", "--published", "--out",
                               str(tmp_path)], stdout=full, stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=120,
                              env=_environ(unbuffered))
    assert (proc.returncode, proc.stderr) == (2, "kolectra report: error: no space left on the device; "
                                                 "writing stdout\n"), proc.stderr
