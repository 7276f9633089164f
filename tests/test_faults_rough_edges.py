"""Rough edges a user meets: Ctrl-C pressed again while a corpus job's stop hangs, an artifact ref on a
store root (moto's S3 server: tests/s3_support.py) that finds the wrong kind or two ids, and a
``text_field`` that no JSONL record or Parquet column has."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kolectra.core import storage
from kolectra.core.stage import StageOutput
from kolectra.corpus import interruption, sigint_relay
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.request import Request
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)
from tests.test_corpus_reliability import _in_session

REPO = Path(__file__).resolve().parents[1]


# ---- Ctrl-C again while the job is stopping ---------------------------------------------------
def _lines(stream, into: queue.Queue) -> None:
    for line in iter(stream.readline, ""):
        into.put(line.rstrip("\n"))
    into.put(None)


def _wait_for(lines: queue.Queue, seen: list[str], text: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            return False
        if line is None:
            return False
        seen.append(line)
        if text in line:
            return True
    return False


def test_ctrl_c_again_while_a_stop_hangs_says_so_then_quits(tmp_path):
    """The real corpus command and Beam job, whose one worker process does not end when stopped
    (``tests/stubborn_worker.py``: it suspends itself), so Beam's teardown waits for ever. The first
    Ctrl-C stops the job, the second says a third quits, the third quits: status 130, no worker
    left. Before, every Ctrl-C after the first was ignored and the command could not be quit."""
    src = tmp_path / "many.txt"
    src.write_text("".join(f"{i}번째 리뷰입니다 이 영화 정말 재밌었어요 배우들 연기도 최고 {i}\n" for i in range(20_000)),
                   encoding="utf-8")
    ready = tmp_path / "worker-ready"
    tmp = tmp_path / "tmp"  # the command's temporary folders (its progress and listing folder among them)
    tmp.mkdir()
    code = ("import sys; from kolectra.corpus import interruption; interruption.WORKER_MODULE = 'tests.stubborn_worker'; "
            "from kolectra.pipeline.cli import main; sys.exit(main(sys.argv[1:]))")
    cmd = [sys.executable, "-c", code, "corpus", "--input", str(src), "--out", str(tmp_path / "a"),
           "--direct_num_workers=1", "--direct_running_mode=multi_processing"]
    proc = subprocess.Popen(cmd, cwd=REPO, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(REPO),
                                            "KOLECTRA_TEST_WORKER_READY": str(ready), "TMPDIR": str(tmp)})
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stderr, lines), daemon=True).start()
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), f"the worker did not start: {seen}"
        time.sleep(1)  # the job is running
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group (workers ignore it)
        time.sleep(1.5)
        assert proc.poll() is None, "the stop did not hang: the test proves nothing"
        assert not any(interruption.STOPPING_NOTICE in line for line in seen)  # the first Ctrl-C alone says nothing
        os.killpg(proc.pid, signal.SIGINT)
        assert _wait_for(lines, seen, interruption.STOPPING_NOTICE, 20), seen
        time.sleep(0.5)
        assert proc.poll() is None, seen + list(lines.queue)  # the notice alone quits nothing
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=20) == 130
    finally:
        with_cleanup = _in_session(proc.pid)
        for pid in with_cleanup:  # a test that failed: nothing left behind, the suspended worker included
            os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=30)
    while (line := lines.get(timeout=10)) is not None:
        seen.append(line)
    assert with_cleanup == [], f"left running: {with_cleanup}"
    assert "Traceback" not in "\n".join(seen)
    assert seen[-2:] == [f"[kolectra] {interruption.STOPPING_NOTICE}", interruption.QUIT_LINE], seen
    assert proc.stdout.read() == ""
    assert not list(tmp.glob("kolectra-progress-*")), "the quit left the job's progress folder"


_ONE_THEN_ANOTHER = """
import os, signal, sys, time
from kolectra.corpus import interruption
raised = 0
with interruption.Interruption() as ctrl_c:
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    except KeyboardInterrupt:
        raised += 1
    time.sleep(5 * interruption.STOP_SWEEP_S)  # SIGINTs the relay sent meanwhile come back to it, as its own
    print("after one:", raised, ctrl_c.happened, flush=True)
    sys.stderr.write("-- second\\n")
    os.kill(os.getpid(), signal.SIGINT)  # raises nothing now: counted by the relay's thread
    time.sleep(1)
print("after two:", raised, flush=True)
"""


def test_one_ctrl_c_raises_once_and_says_nothing_more():
    """One SIGINT is one KeyboardInterrupt and no notice, however many times the relay woke the main
    thread for it; a second one (the job stopping) raises nothing and is the notice."""
    proc = subprocess.run([sys.executable, "-c", _ONE_THEN_ANOTHER], capture_output=True, text=True, timeout=60,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout.splitlines() == ["after one: 1 True", "after two: 1"], proc.stdout + proc.stderr[-2000:]
    assert proc.stderr.splitlines() == ["-- second", f"[kolectra] {interruption.STOPPING_NOTICE}"], proc.stderr[-2000:]


def test_ctrl_c_while_the_exit_waits_for_a_thread_ends_at_once_in_one_line(tmp_path):
    """The real corpus command and job, in-process, with a thread that the interrupt leaves waiting
    (a stand-in for Beam's harness thread): after the interrupt's line the interpreter's exit waits
    for it (up to EXIT_GRACE). A Ctrl-C then ends the process at once, with 130 and that one line.
    Before, Python's own handler was back and raised inside the exit's wait: an "Exception ignored"
    traceback after the line."""
    src = tmp_path / "many.txt"
    src.write_text("".join(f"{i}번째 리뷰입니다 이 영화 정말 재밌었어요 배우들 연기도 최고 {i}\n" for i in range(20_000)),
                   encoding="utf-8")
    code = ("import sys, threading; from kolectra.pipeline.cli import errors, main; errors.EXIT_GRACE = 120; "
            "threading.Thread(target=threading.Event().wait, name='left-waiting').start(); "
            "sys.exit(main(sys.argv[1:]))")
    cmd = [sys.executable, "-c", code, "corpus", "--input", str(src), "--out", str(tmp_path / "a"),
           "--direct_num_workers=1"]
    proc = subprocess.Popen(cmd, cwd=REPO, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stderr, lines), daemon=True).start()
    seen: list[str] = []
    try:
        assert _wait_for(lines, seen, "corpus: 1 input file(s)", 120), seen
        time.sleep(1)  # the job is running
        os.killpg(proc.pid, signal.SIGINT)
        assert _wait_for(lines, seen, "kolectra corpus: interrupted", 60), seen
        time.sleep(0.5)
        assert proc.poll() is None, "the exit did not wait for the thread: the test proves nothing"
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=30) == 130  # at once: the exit would have waited 120 s
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    while (line := lines.get(timeout=10)) is not None:
        seen.append(line)
    assert [line for line in seen if not line.startswith("[kolectra] corpus: ")] == [seen[-1]], seen  # progress, then one
    assert seen[-1].startswith("kolectra corpus: interrupted (read "), seen


_QUIT_WITH_A_FOLDER = """
import os, signal, sys, tempfile, threading, time
from kolectra.corpus import interruption
folder = tempfile.mkdtemp(prefix="kolectra-progress-", dir=sys.argv[1])
open(os.path.join(folder, "listing.jsonl.gz"), "wb").close()
with interruption.Interruption(owns=folder):
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    except KeyboardInterrupt:
        pass
    print("stopping", flush=True)
    threading.Event().wait(60)  # a stop that hangs: the second and third Ctrl-C quit at once
print("not quit", flush=True)
"""


def test_quit_at_once_removes_the_folder_the_job_owns(tmp_path):
    """``os._exit`` runs no ``finally``: the folder the job's Interruption owns (the local run's
    progress and listing folder, ``Interruption(owns=...)``) is removed before it. Before, it was left
    in /tmp for ever."""
    proc = subprocess.Popen([sys.executable, "-c", _QUIT_WITH_A_FOLDER, str(tmp_path)], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout.readline() == "stopping\n"
    assert len(list(tmp_path.iterdir())) == 1  # the folder is there while the job stops
    for _ in range(2):
        time.sleep(0.5)
        os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and out == "", err[-2000:]
    assert err.splitlines() == [f"[kolectra] {interruption.STOPPING_NOTICE}", interruption.QUIT_LINE], err[-2000:]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("nested", [False, True])
def test_the_folder_stays_the_quits_to_remove_until_no_ctrl_c_can_quit(tmp_path, monkeypatch, nested):
    """The third Ctrl-C quits from the relay's thread, which can come while the main thread leaves the
    job after all (the stop ended in the meantime). Until the relay is closed (its thread joined), a
    quit can still come, so the folder stays owned (quit_at_once's to remove) until then; the owner's
    ``finally`` removes it after. Before, it was let go first: a quit in that window left the folder
    (seen under load in the test above). A nested Interruption's folder waits for the enclosing relay."""
    folder = str(tmp_path / "kolectra-progress-x")
    owned_at_close = []
    close = sigint_relay.SigintRelay.close

    def closing(relay):
        owned_at_close.append(folder in interruption._OWNED)  # noqa: SLF001 - what quit_at_once removes
        close(relay)

    monkeypatch.setattr(sigint_relay.SigintRelay, "close", closing)
    with interruption.Interruption(owns=None if nested else folder):
        if nested:
            with interruption.Interruption(owns=folder):
                pass
            assert folder in interruption._OWNED  # noqa: SLF001 - the enclosing relay can still quit
    assert owned_at_close == [True]
    assert folder not in interruption._OWNED  # noqa: SLF001


class _CtrlCAsTheJobIsLeft(threading.Event):
    """The job's ``_ended``: setting it (the first thing ``__exit__`` does) brings a Ctrl-C."""

    def set(self):
        super().set()
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)


@pytest.mark.parametrize("nested", [False, True])
def test_a_ctrl_c_while_the_job_is_left_comes_after_its_clean_up(nested, monkeypatch):
    """A Ctrl-C as a job that ended well is being left is raised once ``__exit__`` is done, by the
    handler it put back (as a moment later). Before, the job's handler raised it inside ``__exit__``,
    cutting it short: the handler stayed (every later Ctrl-C swallowed) and so did the relay, whose
    count went on outside any job (a third press: quit_at_once). Nested, the enclosing job is the one
    interrupted, and the press is counted once (no notice)."""
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)  # a stopped job quiets Beam's threads
    before = signal.getsignal(signal.SIGINT)
    with contextlib.ExitStack() as jobs:
        outer = jobs.enter_context(interruption.Interruption()) if nested else None
        with pytest.raises(KeyboardInterrupt):
            with interruption.Interruption() as job:
                job._ended = _CtrlCAsTheJobIsLeft()  # noqa: SLF001
        relay = job._relay  # noqa: SLF001
        assert job.happened  # the job's callers say it was interrupted, as before
        assert signal.getsignal(signal.SIGINT) == (outer._handler if nested else before)  # noqa: SLF001
        if nested:
            time.sleep(5 * interruption.STOP_SWEEP_S)  # the shared relay reads what came meanwhile
            assert outer.happened and outer._again_count == 0  # noqa: SLF001
    assert signal.getsignal(signal.SIGINT) is before
    assert not relay._thread.is_alive()  # noqa: SLF001


_WAKES_MERGED = """
import os, signal, sys, threading, time
from kolectra.corpus import interruption
with interruption.Interruption() as ctrl_c:
    # the main thread takes no signal for a while, as one in the kernel's uninterruptible sleep (a page
    # fault under memory pressure) or not scheduled on a loaded machine: the relay's repeated SIGINTs
    # to it wait in its pending set, where the kernel keeps one of them
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()  # the user's: another thread takes it
    try:
        time.sleep(10 * interruption.STOP_SWEEP_S + 0.2)  # the handler runs after this (the relay woke it 10 times)
        time.sleep(5)
    except KeyboardInterrupt:
        pass
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # the one pending SIGINT is taken: one byte
    time.sleep(5 * interruption.STOP_SWEEP_S)
    sys.stderr.write("-- second\\n")
    os.kill(os.getpid(), signal.SIGINT)  # the second Ctrl-C: the notice
    time.sleep(1)
"""


def test_a_second_ctrl_c_is_counted_when_the_relays_wakes_were_merged():
    """The relay counts its own SIGINTs to tell the user's apart. Ten of them sent while the main
    thread could not take one are one signal to the kernel (one byte back): the other nine were
    counted as the relay's, so the user's next nine Ctrl-Cs were taken for them and the second gave
    no notice. Now a SIGINT is not sent while the last one is still pending in the main thread."""
    proc = subprocess.run([sys.executable, "-c", _WAKES_MERGED], capture_output=True, text=True, timeout=60,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr.splitlines() == ["-- second", f"[kolectra] {interruption.STOPPING_NOTICE}"], proc.stderr[-2000:]


# ---- refs on a store root ------------------------------------------------------------------------
def _toys(root: str) -> dict[str, str]:
    """A vocab and two corpora named ``c`` in ``root`` (toy stages: files only, no Beam): the ids."""
    store = open_store(root)

    def produce(out: Path) -> StageOutput:
        (out / "stats.json").write_text("{}")
        return StageOutput(stats={})

    built = {key: store.build(Request(kind=kind, name=name, stage_version=1, config=config), produce)
             for key, kind, name, config in [("vocab", "vocab", "v", {}), ("c1", "corpus", "c", {}),
                                             ("c2", "corpus", "c", {"other": True})]}
    return {key: art.id for key, art in built.items()} | {"vocab dir": built["vocab"].path.name}


def _refusal(capsys, root: str, ref: str) -> str:
    assert main(["vocab", "--corpus", ref, "--out", root]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kolectra vocab: error: "), lines
    return lines[0].replace(root, "ROOT")


@pytest.mark.parametrize("case", ["vocab for corpus", "kind/name-id of another kind", "short prefix", "ambiguous name",
                                  "name and id start"])
def test_a_ref_on_a_store_root_says_what_it_finds_as_a_local_root_does(bucket, tmp_path, monkeypatch, capsys, case):
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))
    roots = {"local": str(tmp_path / "root"), "store": f"{bucket}/r"}
    ids = {where: _toys(root) for where, root in roots.items()}
    assert ids["local"] == ids["store"]  # the same requests: the same ids, so the same lines
    ids = ids["store"]
    ref, expected = {
        "vocab for corpus": (ids["vocab"][:8], f"is a vocab artifact (ROOT/vocab/{ids['vocab dir']}), where a corpus "
                                               "one is needed"),
        "kind/name-id of another kind": (f"vocab/{ids['vocab dir']}", f"is a vocab artifact (ROOT/vocab/"
                                         f"{ids['vocab dir']}), where a corpus one is needed"),
        "short prefix": (ids["c1"][:4], f"an id prefix needs 6 or more characters; {ids['c1'][:4]!r} has 4"),
        "ambiguous name": ("c", f"'c' is ambiguous: ROOT/corpus/c-{min(ids['c1'], ids['c2'])}"),
        # what "give more of the id" above reads as (h5, seen on s3://): was only "no artifact 'c-1a2b' under ROOT/corpus"
        "name and id start": (f"c-{ids['c1'][:4]}", f"no artifact 'c-{ids['c1'][:4]}' under ROOT/corpus (a name with the "
                              "start of an id is no ref: give the whole name-id, or the id alone, 6 characters or "
                              f"more: corpus/c-{ids['c1']} (or {ids['c1'][:6]})"),
    }[case]
    lines = {where: _refusal(capsys, root, ref) for where, root in roots.items()}
    assert expected in lines["store"], lines["store"]
    assert lines["store"] == lines["local"]
    if case == "ambiguous name":
        assert lines["store"].endswith("; give more of the id, or the artifact's directory")


# ---- a text_field the records do not have --------------------------------------------------------
def _corpus_refusal(capsys, tmp_path, *args: str) -> list[str]:
    assert main(["corpus", *args, "--out", str(tmp_path / "root")]) == 2
    return capsys.readouterr().err.strip().splitlines()  # one line, before the job: no progress line either


def test_a_text_field_no_jsonl_record_has_is_refused_before_the_job(tmp_path, capsys):
    path = tmp_path / "reviews-00000.jsonl.gz"
    rows = [{"id": i, "text": f"{i}번째 리뷰입니다 정말 재밌었어요", "rating": i % 5} for i in range(300)]
    path.write_bytes(gzip.compress("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()))
    lines = _corpus_refusal(capsys, tmp_path, "--input", str(path), "--set", "text_field=nosuchfield")
    assert lines == [f"kolectra corpus: error: text_field 'nosuchfield': none of the first 100 records of {path} has a "
                     "field 'nosuchfield'; its records have: id, text, rating (--text-field NAME sets another)"], lines
    few = tmp_path / "few.jsonl"  # all of a small file read: "no record in"; a line that is no object passed over
    few.write_text('not json\n{"body": "가나다", "id": 1}\n[1, 2]\n{"title": "x"}\n', encoding="utf-8")
    lines = _corpus_refusal(capsys, tmp_path, "--input", str(few), "--text-field", "text")
    assert lines == [f"kolectra corpus: error: text_field 'text': no record in {few} has a field 'text'; its records "
                     "have: body, id, title (--text-field NAME sets another)"], lines


def test_a_text_field_that_is_no_parquet_column_is_refused_before_the_job(tmp_path, capsys):
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    path = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"id": [1, 2], "body": ["가나다 라마바", "사아자 차카타"]}), path)
    lines = _corpus_refusal(capsys, tmp_path, "--input", str(path))
    assert lines == [f"kolectra corpus: error: text_field 'text': {path} has no column 'text'; its columns are: "
                     "id, body (--text-field NAME sets another)"], lines


def test_a_text_field_missing_from_a_bucket_input_is_refused_before_the_job(bucket, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))
    url = f"{bucket}/in/reviews-00000.jsonl.gz"  # read where it lives, as the job's reader reads it
    storage.write_bytes(url, gzip.compress('{"id": 1, "body": "가나다 라마바"}\n'.encode()))
    lines = _corpus_refusal(capsys, tmp_path, "--input", url)
    assert lines == [f"kolectra corpus: error: text_field 'text': no record in {url} has a field 'text'; its records "
                     "have: id, body (--text-field NAME sets another)"], lines
