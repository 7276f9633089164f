"""How the ``kolectra`` process ends (pipeline/cli/exiting.py): after its command it no longer frees every module
(about 2 CPU s once torch is imported), yet does what the interpreter's exit did that a program relies on: the
threads that are not daemons finish, the ``atexit`` functions run (a ``weakref.finalize`` clean-up too), buffered
output reaches its reader, the status is the command's; a standard stream that cannot be flushed ends as it did.
Each case runs a real child: the installed entry (``entry``) beside the interpreter's exit (``sys.exit(main())``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent("""
    import atexit, os, sys, tempfile, threading, time, weakref
    from kolectra.pipeline.cli import entry, main

    how, root, *argv = sys.argv[1:]
    if "--reader-gone" in argv:  # stdout a pipe whose reader has gone: its flush fails (EPIPE)
        argv.remove("--reader-gone")
        r, w = os.pipe()
        os.dup2(w, 1)
        os.close(r)
        atexit.register(lambda: print("late"))  # after the command's own handling of it: the exit's flush fails
    else:
        tmp = tempfile.TemporaryDirectory()  # removed by its weakref.finalize at exit
        print("tmp", tmp.name)

        class Freed:  # said when the module's globals are freed: the interpreter's teardown ran
            def __del__(self):
                os.write(2, b"module teardown ran\\n")

        keep = Freed()
        atexit.register(lambda: print("atexit ran"))
        threading.Thread(target=lambda: (time.sleep(0.3), print("thread done"))).start()
        print("buffered, not flushed")
    sys.argv = ["kolectra", *argv, "--out", root]
    if how == "entry":
        entry()
    else:
        sys.exit(main())
""")


def _run(tmp_path, how: str, *argv: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # stdout buffered, as a pipe's is
    return subprocess.run([sys.executable, "-c", CHILD, how, str(tmp_path / "root"), *argv],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)


@pytest.mark.parametrize("how", ["entry", "interpreter"])
def test_the_process_ends_after_threads_atexit_and_flushing_without_the_module_teardown(tmp_path, how):
    done = _run(tmp_path, how, "artifacts", "list")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1:] == ["buffered, not flushed", "thread done", "atexit ran"], done.stdout
    assert "(no artifacts under " in done.stderr
    tmp = lines[0].split(" ", 1)[1]
    assert not os.path.exists(tmp)  # the finalize clean-up ran
    # the point of exit_now: the interpreter's teardown (freeing every module) is what it skips
    assert ("module teardown ran" in done.stderr) == (how == "interpreter"), done.stderr


@pytest.mark.parametrize("argv", [["artifacts", "show", "nothing-here"], ["artifacts", "list", "--reader-gone"]])
def test_a_refused_command_and_an_unflushable_stdout_end_as_the_interpreters_exit_ended_them(tmp_path, argv):
    fast, slow = _run(tmp_path, "entry", *argv), _run(tmp_path, "interpreter", *argv)
    assert fast.returncode == slow.returncode == (120 if "--reader-gone" in argv else 2), (fast, slow)
    strip = "module teardown ran\n"
    assert fast.stderr.replace(strip, "") == slow.stderr.replace(strip, ""), (fast.stderr, slow.stderr)
    assert ("BrokenPipeError" in fast.stderr) == ("--reader-gone" in argv), fast.stderr
