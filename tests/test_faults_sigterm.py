"""SIGTERM: what a scheduler (Kubernetes, Slurm), a preempted machine (GCE, TPU VMs) or ``kill``
sends before SIGKILL, after a grace of about 30 s. The local Beam jobs end as Ctrl-C ends them, in
one line with status 143 (128 + 15: stopped from outside, not failed) and no worker left, whether
the signal reached the launcher alone (Kubernetes sends it to the container's first process) or its
whole process group (Slurm, a shutting-down machine), where a worker dies of it first. Before,
the in-process job ended as an "internal error" (status 1), a job with worker processes whose
launcher alone got it hung (its main thread slept through it; over 10 minutes), and the group's
signal was reported as a worker that died (status 2, "with fewer --direct_num_workers")."""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kolectra.model import checkpoint
from kolectra.pipeline import stages
from tests.test_corpus_reliability import _in_session
from tests.test_faults_corpus_workers import _workers, corpus_on_two_workers, signal_on_another_thread
from tests.test_faults_interrupts import REPO, many_documents  # noqa: F401  (the fixture)
from tests.test_faults_pretrain import SETS, _copy, chain  # noqa: F401  (the chain fixture)
from tests.test_finetune_e2e import nsmc_file, tiny_model  # noqa: F401  (the fixture)
from tests.test_model_ddp import _free_port


def _stop(cmd: list[str], started, group: bool) -> tuple[int, str]:
    """Run ``cmd`` in a session of its own, SIGTERM it once ``started(proc)``, return (status, stderr)."""
    proc = subprocess.Popen(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        started(proc)
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        if group:
            os.killpg(proc.pid, signal.SIGTERM)
        else:
            proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)  # before: the launcher alone never ended
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert out == "", out
    assert _in_session(proc.pid) == [], "a worker outlived the launcher"
    return proc.returncode, err


def _one_line(err: str) -> str:
    assert "Traceback" not in err and "internal error" not in err, err[-3000:]
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize("workers, group", [("1", False), ("2", False), ("2", True)])
def test_sigterm_during_the_examples_job_is_one_line_with_status_143(many_documents, workers, group):  # noqa: F811
    store, corpus, vocab = many_documents
    cmd = [sys.executable, "-m", "kolectra.pipeline.cli", "examples", "--corpus", str(corpus.path), "--vocab",
           str(vocab.path), "--out", str(store.root), "--force", f"--direct_num_workers={workers}"]

    def started(proc):
        seen = ""
        while "examples: 1 train shard(s)" not in seen and proc.poll() is None:  # the job is starting ...
            seen = proc.stderr.readline()
        deadline = time.monotonic() + 60
        while workers == "2" and len(_workers(proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # ... and running (about 5 s of work)

    code, err = _stop(cmd, started, group)
    line = _one_line(err)
    assert code == 143, err[-3000:]
    assert line.startswith("kolectra examples: terminated during the examples job") and "nothing published" in line
    assert not list((store.root / ".tmp").iterdir())


@pytest.mark.parametrize("group", [False, True])
def test_sigterm_during_the_corpus_job_is_one_line_with_status_143(tmp_path, group):
    cmd = corpus_on_two_workers(tmp_path)

    def started(proc):
        deadline = time.monotonic() + 120
        while len(_workers(proc.pid)) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        time.sleep(1.0)

    code, err = _stop(cmd, started, group)
    line = _one_line(err)
    assert code == 143, err[-3000:]
    assert line.startswith("kolectra corpus: terminated (") and "what it built is discarded" in line, line


# The kernel may hand the launcher's SIGTERM to any of its threads; Python runs the handler only in
# the main thread, once it runs again, and Beam keeps it in untimed waits (a bundle's results).
# Here the main thread sleeps in a lock's wait that only the test's bound (20 s) releases.
_SIGTERM_ON_ANOTHER_THREAD = signal_on_another_thread("SIGTERM") + """
from kolectra.core.errors import Terminated
def command(signum, frame):  # as the command's own (pipeline/cli/errors.py)
    raise Terminated()
signal.signal(signal.SIGTERM, command)
try:
    with interruption.interruptible("interrupted during the job") as ctrl_c:
        ready.set()
        lock.acquire()
except KeyboardInterrupt as e:
    woken.set()
    print(type(e).__name__, str(e), "after the bound" if bound.is_set() else "at once",
          signal.getsignal(signal.SIGTERM) is command)
thread.join()
"""


def test_a_sigterm_that_another_thread_received_wakes_the_main_thread():
    proc = subprocess.run([sys.executable, "-c", _SIGTERM_ON_ANOTHER_THREAD], cwd=REPO, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    # before: the command's handler raised it only once the wait ended ("Terminated  after the bound")
    assert proc.stdout.strip() == "Terminated terminated during the job at once True", proc.stdout + proc.stderr[-2000:]


# --- pretraining: the step ends, its checkpoint is saved, the ranks agree ---------------------------

def _pretrain(root: Path, ex: str, env: dict | None = None, save_every: int = 50000) -> subprocess.Popen:
    """``kolectra pretrain`` in a child: a long run with no periodic checkpoint before the signal."""
    flags = [f"--set={s}" for s in SETS if not s.startswith(("train.steps", "train.save_every"))]
    cmd = [sys.executable, "-m", "kolectra.pipeline.cli", "pretrain", "--examples", ex, "--out", str(root), *flags,
           "--steps", "100000", "--save-every", str(save_every)]
    return subprocess.Popen(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _training(proc: subprocess.Popen, line: str = "pretrain: step 1 took") -> str:
    """stderr until ``line``: the run is training."""
    seen = ""
    while line not in seen and proc.poll() is None:
        seen += proc.stderr.readline()
    return seen


def _ended(proc: subprocess.Popen, seen: str) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=120)  # before, with two ranks: rank 0 waited in gloo (30 min)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, seen + err


_TERMINATED = re.compile(r"^kolectra pretrain: terminated \(SIGTERM\) after step (\d+) of 100000, saved as the "
                         r"checkpoint step-(\d{8}); checkpoint: its working state is kept in (\S+); --resume continues it$")


def test_sigterm_while_pretraining_saves_the_step_it_ends_and_resume_goes_on_from_it(chain, tmp_path):  # noqa: F811
    store, ex = _copy(chain, tmp_path / "root")
    proc = _pretrain(store.root, ex)
    seen = _training(proc)
    proc.send_signal(signal.SIGTERM)
    code, err = _ended(proc, seen)
    line = _one_line(err)
    assert code == 143 and (m := _TERMINATED.match(line)), err[-3000:]  # before: 143, no checkpoint kept
    step = int(m.group(1))
    assert int(m.group(2)) == step and checkpoint.latest(Path(m.group(3)) / "out").name == f"step-{step:08d}"
    art = stages.pretrain(store, ex, preset="tiny", sets=[*SETS, f"train.steps={step + 2}", "train.force_resume=true"],
                          resume=True)
    assert art.manifest["stats"]["resumed_from_step"] == step and store.verify(art) == []


@pytest.mark.parametrize("shared", [True, False], ids=["2>&1 | tee", "2>| tee"])
def test_sigterm_with_the_log_s_reader_gone_still_saves_the_step_and_ends_143(chain, tmp_path, shared):  # noqa: F811
    """``kolectra pretrain ... 2>&1 | tee log`` stopped by its group's SIGTERM (systemd's or Slurm's stop, a
    Ctrl-C: tee ends with it): the progress lines met a closed pipe. Before, the BrokenPipeError raised
    in the step's log line replaced the stop: no checkpoint of the step, and status 0 (stdout the same
    pipe: taken for a reader of `| head` done) or 1 (a traceback nobody saw), so the scheduler read a
    finished job. Diagnostics lost are only that: the step is saved and the status is 143."""
    store, ex = _copy(chain, tmp_path / "root")
    reader, writer = os.pipe()
    flags = [f"--set={s}" for s in SETS if not s.startswith(("train.steps", "train.save_every"))]
    with open(tmp_path / "stdout", "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "kolectra.pipeline.cli", "pretrain", "--examples", ex, "--out",
                                 str(store.root), *flags, "--steps", "100000", "--save-every", "50000"],
                                cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True,
                                stdout=writer if shared else out, stderr=writer)
    os.close(writer)
    seen = b""
    with open(reader, "rb", buffering=0) as log:  # tee
        while b"pretrain 3/" not in seen and proc.poll() is None:
            seen += log.read(4096) or b""
    proc.send_signal(signal.SIGTERM)  # tee is gone by now
    try:
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    work = [p for p in (store.root / ".work").glob("checkpoint-*/out") if checkpoint.latest(p) is not None]
    assert code == 143 and len(work) == 1, (code, seen[-2000:])  # before: 0 or 1, no checkpoint
    assert int(checkpoint.latest(work[0]).name.removeprefix("step-")) >= 3


def test_sigterm_to_one_rank_stops_both_at_the_same_step_with_one_checkpoint(chain, tmp_path):  # noqa: F811
    """One machine of a multi-machine run preempted: only its ranks get SIGTERM."""
    store, ex = _copy(chain, tmp_path / "root")
    port = _free_port()
    ranks = [_pretrain(store.root, ex, {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(r),
                                         "WORLD_SIZE": "2", "LOCAL_RANK": str(r)}) for r in (0, 1)]
    seen = _training(ranks[0], "pretrain 3/100000 ")  # rank 1 is past its first step, which arms the stop
    ranks[1].send_signal(signal.SIGTERM)
    (code0, err0), (code1, err1) = _ended(ranks[0], seen), _ended(ranks[1], "")
    line0, line1 = _one_line(err0), _one_line(err1)
    assert (code0, code1) == (143, 143), err0[-2000:] + err1[-2000:]
    m0, m1 = _TERMINATED.match(line0), re.search(r"terminated \(SIGTERM\) after step (\d+) ", line1)
    assert m0 and m1 and m0.group(1) == m1.group(1), line0 + "\n" + line1
    saved = checkpoint.latest(Path(m0.group(3)) / "out")
    assert saved.name == f"step-{int(m0.group(1)):08d}" and (saved / "rank-1.pt").is_file()


def test_a_checkpoint_one_rank_cannot_write_ends_every_rank_in_one_line(chain, tmp_path):  # noqa: F811
    """Rank 1's disk is full (its file-size limit, set on that process alone once a first checkpoint
    is on the disk): both ranks end with one line and status 2 at the next save, rank 1 naming its
    file and the limit, rank 0 naming rank 1; the first checkpoint stays, the partial one goes.
    Before, rank 0 went on to the barrier after its part and waited there for rank 1 (gloo's and
    NCCL's timeout: 30 min), or failed as an internal error once rank 1's connection closed."""
    store, ex = _copy(chain, tmp_path / "root")
    port = _free_port()
    ranks = [_pretrain(store.root, ex, {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(r),
                                         "WORLD_SIZE": "2", "LOCAL_RANK": str(r)}, save_every=5) for r in (0, 1)]
    try:
        deadline = time.monotonic() + 120
        while not list(store.root.glob("**/checkpoints/step-00000005/manifest.json")) and time.monotonic() < deadline:
            assert ranks[0].poll() is None and ranks[1].poll() is None, ranks[0].communicate()[1][-2000:]
            time.sleep(0.02)
        # a real EFBIG on rank 1's next write (Python ignores SIGXFSZ); rank 0 keeps the disk as it is
        resource.prlimit(ranks[1].pid, resource.RLIMIT_FSIZE, (1000, 1000))
    finally:
        (code0, err0), (code1, err1) = _ended(ranks[0], ""), _ended(ranks[1], "")
    line0, line1 = _one_line(err0), _one_line(err1)
    assert (code0, code1) == (2, 2), err0[-2000:] + err1[-2000:]
    m1 = re.match(r"kolectra pretrain: error: (\S+)/checkpoints/\.tmp-step-(\d{8})/rank-1\.pt: the file-size limit "
                  r"was reached; checkpoint not written: the file-size limit \(ulimit -f\) is 0\.0 MB a file; the last "
                  r"checkpoint \(step-(\d{8})\) took", line1)
    assert m1, line1
    failed, kept = m1.group(2), m1.group(3)
    assert int(kept) >= 5 and int(failed) == int(kept) + 5, line1
    assert line0.startswith(f"kolectra pretrain: error: checkpoint step-{failed} not written: rank 1 could not write "
                            f"its part (its own line says why); the newest checkpoint is step-{kept}; checkpoint: its "
                            "working state is kept in "), line0
    assert line0.endswith("--resume continues it"), line0  # rank 0's run is the one --resume continues
    out = Path(m1.group(1))
    assert checkpoint.latest(out).name == f"step-{kept}" and not (out / "checkpoints" / f".tmp-step-{failed}").exists()
    assert (checkpoint.latest(out) / "rank-1.pt").is_file()


def test_workers_end_with_a_launcher_killed_outright(many_documents):  # noqa: F811
    """SIGKILL once the grace ran out (or kill -9, the OOM killer): no handler runs in the launcher.
    Before, its worker processes lived on (still there 30 s later, waiting for a runner that was gone)."""
    store, corpus, vocab = many_documents
    cmd = [sys.executable, "-m", "kolectra.pipeline.cli", "examples", "--corpus", str(corpus.path), "--vocab",
           str(vocab.path), "--out", str(store.root), "--force", "--direct_num_workers=2"]
    proc = subprocess.Popen(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while len(workers := _workers(proc.pid)) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert len(workers) == 2, "the workers did not start"
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 30  # a bound, not a measurement: the kernel signals them as it reaps
        while _in_session(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = {p: open(f"/proc/{p}/cmdline", "rb").read().replace(b"\0", b" ")[:200] for p in _in_session(proc.pid)}
        assert left == {}, "a worker outlived its launcher"
    finally:
        for pid in _in_session(proc.pid):
            os.kill(pid, signal.SIGKILL)


def test_sigterm_while_finetuning_is_one_line_with_status_143_and_publishes_nothing(tiny_model, tmp_path):  # noqa: F811
    """Fine-tuning keeps no checkpoints: SIGTERM stops it at once (the command's handler); the eval
    build in .tmp is removed, nothing appears under eval/."""
    train, test = nsmc_file(tmp_path / "train.txt", 160, 0), nsmc_file(tmp_path / "test.txt", 40, 1)
    root = tmp_path / "root"
    cmd = [sys.executable, "-m", "kolectra.pipeline.cli", "finetune", "nsmc", "--model", str(tiny_model), "--train",
           str(train), "--test", str(test), "--out", str(root), "--epochs", "100000", "--set", "max_length=32"]

    def started(proc):
        seen = ""
        while "epoch 2: " not in seen and proc.poll() is None:  # training, with a dev score written per epoch
            seen = proc.stderr.readline()

    code, err = _stop(cmd, started, group=False)
    line = _one_line(err)
    assert code == 143, err[-3000:]
    assert re.fullmatch(r"kolectra finetune nsmc: terminated; eval: nothing published; its partial build in \S+/\.tmp/"
                        r"eval-[0-9a-f]+-[0-9a-f]+ was removed", line), line
    assert not list((root / ".tmp").iterdir()) and not list(root.glob("eval/*"))


def test_a_sigterm_after_the_last_check_is_not_lost():
    """A SIGTERM that lands after the loop's last agreement (a few bytecodes before the export) was
    recorded and then dropped with the handler: the run went on to export as if never asked to stop."""
    from kolectra.core.errors import Terminated
    from kolectra.model import runtime
    from kolectra.model.preempt import StopAtStepEnd

    dev = runtime.resolve("cpu", False, 1)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated):
        with StopAtStepEnd(dev) as stop:
            stop.armed()  # a step of this process is done
            os.kill(os.getpid(), signal.SIGTERM)  # recorded, waiting for a step's end that never comes
            assert stop.requested
    assert signal.getsignal(signal.SIGTERM) is before


# A SIGTERM while a job's Interruption is being entered (its handlers are in, its relay's thread has
# started, the relay is not yet the Interruption's) or left (its relay still open). The relay's thread
# reads the SIGTERM and wakes the main thread with a SIGINT, whose handler Python runs first (signals
# run in number order).
_SIGTERM_WHILE_THE_JOB_STARTS_OR_ENDS = """
import signal, sys, threading, time
from kolectra.core.errors import Terminated
from kolectra.corpus import interruption, sigint_relay
def command(signum, frame):  # as the command's own (pipeline/cli/errors.py)
    raise Terminated()
signal.signal(signal.SIGTERM, command)
def main_asleep():
    with open(f"/proc/self/task/{threading.main_thread().native_id}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "S"
held = threading.Lock()
held.acquire()
def scheduler(relay):
    looks = 0
    while looks < 3:  # asleep at three looks 20 ms apart: in the lock's wait, not the GIL's
        time.sleep(0.02)
        looks = looks + 1 if main_asleep() else 0
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)  # a thread other than the main one gets it
    relay.terminated.wait(10)  # the relay read it and wakes the main thread
    time.sleep(0.3)
    held.release()
def sigterm_now(relay):
    threading.Thread(target=scheduler, args=(relay,)).start()
    held.acquire(timeout=20)  # asleep (as a thread starting is) in __enter__, or in __exit__
made, close = sigint_relay.SigintRelay.__init__, sigint_relay.SigintRelay.close
if sys.argv[1] == "starts":
    def patched(self, *args, **kwargs):
        made(self, *args, **kwargs)
        sigterm_now(self)
    sigint_relay.SigintRelay.__init__ = patched
else:
    def patched(self):
        sigterm_now(self)
        close(self)
    sigint_relay.SigintRelay.close = patched
try:
    with interruption.interruptible("interrupted during the job"):
        print("the job ran")
except KeyboardInterrupt as e:
    print(type(e).__name__)
print(signal.getsignal(signal.SIGINT) is signal.default_int_handler, signal.getsignal(signal.SIGTERM) is command,
      signal.set_wakeup_fd(-1))
"""


@pytest.mark.parametrize("when, ran", [("starts", []), ("ends", ["the", "job", "ran"])])
def test_a_sigterm_while_the_job_starts_or_ends_is_a_sigterm_and_puts_the_handlers_back(when, ran):
    proc = subprocess.run([sys.executable, "-c", _SIGTERM_WHILE_THE_JOB_STARTS_OR_ENDS, when], cwd=REPO,
                          capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    # before: "KeyboardInterrupt" (kolectra examples: interrupted, exit 130, 3 of 8 SIGTERMs as the job
    # began); as it started, also "False False 4": the Interruption's handlers and its relay's wakeup fd
    # stayed, so later signals went to a job long gone
    assert proc.stdout.split() == [*ran, "Terminated", "True", "True", "-1"], proc.stdout + proc.stderr[-2000:]
