"""kolectra's scratch names and their sweep (core/scratch.py), with real processes: what a SIGKILLed
child left is removed by the next sweep; a live process's entries, another host's, unparseable
names and anything not kolectra's stay; a pid alive under another start time (reused) or a zombie
counts as gone; a planted link is unlinked, its target kept; a corpus command killed hard leaves
nothing once the next command has run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from kolectra.core import scratch

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO), scratch.SWITCH: "1"}  # the suite turns it off (tests/conftest.py)

_MAKES_SCRATCH = """
import os, sys, time
from kolectra.core import scratch
folder = scratch.mkdtemp("progress", dir=sys.argv[1])
with open(os.path.join(folder, "listing.jsonl.gz"), "wb") as f:
    f.write(b"x" * 1_000_000)
fd, path = scratch.mkstemp("records", suffix=".pickle.gz", dir=sys.argv[1])
os.write(fd, b"y" * 1000)
print("ready", flush=True)
time.sleep(120)
"""


def _start_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[19])


def _gone_pid() -> int:
    """The pid of a process that ran and was reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _name(kind: str, pid: int, start: int, host: str = scratch.HOST, tail: str = "abcd_123") -> str:
    return f"kolectra-{kind}-{pid}-{start}-{host}-{tail}"


def test_what_a_killed_child_left_goes_and_a_live_ones_stays(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", _MAKES_SCRATCH, str(tmp_path)], stdout=subprocess.PIPE,
                             text=True, env=ENV)
    try:
        assert child.stdout.readline() == "ready\n"
        made = sorted(p.name for p in tmp_path.iterdir())
        assert len(made) == 2 and all(scratch.owner(n).pid == child.pid for n in made), made
        assert scratch.sweep(tmp_path) == scratch.Swept() and sorted(p.name for p in tmp_path.iterdir()) == made
    finally:
        child.kill()
        child.wait()
    assert sorted(p.name for p in tmp_path.iterdir()) == made  # kill -9: nothing cleaned up
    assert scratch.sweep(tmp_path) == scratch.Swept(count=2, bytes=1_001_000)
    assert list(tmp_path.iterdir()) == []


def test_this_process_s_own_scratch_stays(tmp_path):
    folder = scratch.mkdtemp("vocab", dir=tmp_path)
    fd, path = scratch.mkstemp("records", dir=tmp_path)
    os.close(fd)
    with scratch.temporary_directory("split", dir=tmp_path) as spill:
        assert scratch.sweep(tmp_path).count == 0
        assert all(os.path.exists(p) for p in (folder, path, spill))
    name = Path(folder).name
    assert name.startswith(f"kolectra-vocab-{os.getpid()}-") and scratch.owner(name).host == scratch.HOST


def test_a_reused_pid_and_a_zombie_count_as_gone(tmp_path):
    """A live pid with another start time is a later process the system gave the pid to; a zombie
    (exited, not yet reaped) runs nothing."""
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    zombie_start = _start_of(zombie.pid)
    os.waitid(os.P_PID, zombie.pid, os.WEXITED | os.WNOWAIT)  # it has exited; its entry in /proc stays
    try:
        parent = os.getppid()
        reused = [_name("records", parent, _start_of(parent) + 1), _name("shard", os.getpid(), _start_of(os.getpid()) - 1),
                  _name("sorted", zombie.pid, zombie_start)]
        kept = _name("records", parent, _start_of(parent))
        for n in (*reused, kept):
            (tmp_path / n).mkdir()
        assert scratch.sweep(tmp_path).count == 3
    finally:
        zombie.wait()
    assert [p.name for p in tmp_path.iterdir()] == [kept]


def test_names_it_cannot_read_and_others_entries_stay(tmp_path):
    gone = _gone_pid()
    others = ["kolectra-progress-0pcplj6_", "kolectra-records-uu3j1x11.pickle.gz",  # from before these names
              "kolectra-logs", "kolectra-bench-loop", "kolectra-tests", f"kolectra-progress-{gone}-1-abc-x",
              _name("shard", gone, 5, host="0" * 8 if scratch.HOST != "0" * 8 else "1" * 8),  # another host's
              f"kolectra-Shard-{gone}-5-{scratch.HOST}-abcd1234", f"kolectra-shard-{gone}-5-{scratch.HOST}-",
              f"other-shard-{gone}-5-{scratch.HOST}-abcd1234", f"tmp{gone}", "pytest-of-me"]
    for i, n in enumerate(others):
        (tmp_path / n).mkdir() if i % 2 else (tmp_path / n).write_text("keep")
    dead = _name("shard", gone, 5)
    (tmp_path / dead).mkdir()
    assert scratch.sweep(tmp_path) == scratch.Swept(count=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(others)


def test_a_planted_link_is_unlinked_and_its_target_kept(tmp_path):
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "precious").write_text("keep me")
    swept = tmp_path / "tmp"
    swept.mkdir()
    gone = _gone_pid()
    link = swept / _name("shard", gone, 5)
    link.symlink_to(outside, target_is_directory=True)
    folder = swept / _name("sorted", gone, 5)  # a dead owner's folder holding a link out
    folder.mkdir()
    (folder / "out").symlink_to(outside / "deep", target_is_directory=True)
    (swept / _name("records", gone, 5, tail="dangling1.pickle.gz")).symlink_to(tmp_path / "nothing-here")
    assert scratch.sweep(swept).count == 3
    assert list(swept.iterdir()) == []
    assert (outside / "deep" / "precious").read_text() == "keep me"


def test_sweeps_at_once_and_a_folder_that_is_not_one_raise_nothing(tmp_path):
    gone = _gone_pid()
    for i in range(200):
        folder = tmp_path / _name("shard", gone, 5, tail=f"t{i:07d}")
        folder.mkdir()
        for j in range(5):
            (folder / f"part-{j}").write_bytes(b"z" * 100)
    results: list[scratch.Swept] = []
    threads = [threading.Thread(target=lambda: results.append(scratch.sweep(tmp_path))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 3 and list(tmp_path.iterdir()) == []
    assert sum(r.count for r in results) >= 200 and all(r.failed == 0 for r in results), results
    (tmp_path / "a-file").write_text("x")
    assert scratch.sweep(tmp_path / "absent") == scratch.Swept()
    assert scratch.sweep(tmp_path / "a-file") == scratch.Swept(failed=1)  # said at debug level, not raised


_TWICE = """
from kolectra.core import scratch
for kind in ("split", "names"):
    with scratch.temporary_directory(kind):
        pass
"""


def test_once_a_process_with_one_line_saying_what_went(tmp_path):
    """Two makers in one process: one sweep, one line; none where KOLECTRA_SWEEP_SCRATCH=0."""
    gone = _gone_pid()
    (tmp_path / _name("records", gone, 5, tail="a.pickle.gz")).write_bytes(b"r" * 2_500_000)
    env = {**ENV, "TMPDIR": str(tmp_path), "KOLECTRA_VERBOSITY": "1"}
    off = subprocess.run([sys.executable, "-c", _TWICE], capture_output=True, text=True, timeout=60,
                         env={**env, scratch.SWITCH: "0"})
    assert off.returncode == 0 and off.stderr == "" and len(list(tmp_path.iterdir())) == 1, off.stderr[-2000:]
    proc = subprocess.run([sys.executable, "-c", _TWICE], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr.splitlines() == [f"[kolectra] removed 1 scratch entry (2.5 MB) that killed kolectra processes "
                                        f"left in {os.path.realpath(tmp_path)}"], proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_corpus_command_killed_hard_leaves_nothing_once_the_next_has_run(tmp_path):
    """The real ``kolectra corpus`` (in-process Beam), SIGKILLed while its job runs: its progress and
    listing folder and its Beam job's folder stay (nothing runs after SIGKILL); the next command's
    sweep removes them. Beam's folder was its own ``beam-pipeline-temp*``, which no sweep knew: each
    killed job left one for good."""
    src = tmp_path / "many.txt"
    src.write_text("".join(f"{i}번째 리뷰입니다 이 영화 정말 재밌었어요 {i}\n" for i in range(20_000)), encoding="utf-8")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**ENV, "TMPDIR": str(tmp), "KOLECTRA_VERBOSITY": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "kolectra.pipeline.cli", "corpus", "--input", str(src), "--out",
                             str(tmp_path / "a")], cwd=REPO, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (list(tmp.glob("kolectra-progress-*")) and list(tmp.glob("*beam*"))) and proc.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        assert list(tmp.glob("kolectra-progress-*")), f"no progress folder: {proc.poll()} {proc.stderr.read()[-2000:]}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    left = sorted(p.name for p in tmp.iterdir())
    assert any(n.startswith("kolectra-progress-") for n in left) and any("beam" in n for n in left), left
    nxt = subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", "vocab", "--corpus", "absent", "--out",
                          str(tmp_path / "a")], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert nxt.returncode != 0 and "absent" in nxt.stderr.splitlines()[-1], nxt.stderr[-2000:]
    assert nxt.stderr.splitlines()[0].startswith(f"[kolectra] vocab: removed {len(left)} scratch "), nxt.stderr
    assert list(tmp.iterdir()) == []


def test_the_suite_leaves_nothing_in_the_temporary_folder(tmp_path):
    """Tests run by pytest as the suite runs them (tests/conftest.py): one that builds a Beam graph to
    read it, never running it, left Beam's ``beam-pipeline-temp*`` folder; one that ran a pipeline on
    Beam's DirectRunner had it try Prism first, leaving its job server's folders (``beam-temp*``,
    ``tmp*``, ``beam-requirements-cache``) and ``~/.apache_beam``; what a command the suite killed left
    (here planted: a gone process's entry) stayed too. None of it is left once the session ends."""
    tmp, home = tmp_path / "tmp", tmp_path / "home"
    tmp.mkdir()
    home.mkdir()
    (tmp / _name("beam", _gone_pid(), 5)).mkdir()
    tests = ["tests/test_corpus_shard_shuffle.py::test_the_shard_shuffle_takes_the_analysed_documents_straight",
             "tests/test_corpus_neardup.py::test_beam_rounds_are_the_in_memory_rounds_and_count_what_did_not_converge"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp",
                           str(tmp_path / "base"), *tests], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TMPDIR": str(tmp), "HOME": str(home)})
    assert proc.returncode == 0 and "2 passed" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert sorted(p.name for p in tmp.iterdir()) == [] and list(home.iterdir()) == []
