"""A standard stream closed when kolectra starts (``>&-``, ``2>&-``, ``<&-``): the command runs as it would
with the stream pointed at the null device (core/streams.closed_to_null).

Python starts with ``sys.stdout`` (``sys.stderr``) None for a closed descriptor: ``kolectra vocab ... >&-``
built its vocab, then ended 'internal error: AttributeError: 'NoneType' object has no attribute 'flush''
(status 1, a traceback log); with ``2>&-`` every building command ended so at once ('... no attribute
'isatty''), its one line written to stdout (``print(file=None)`` is stdout), where a script reads the
artifact's path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kolectra.core.stage import StageOutput
from kolectra.pipeline.store.artifacts import Request, Store

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
