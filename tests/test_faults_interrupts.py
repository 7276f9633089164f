"""Stops at moments issue 17 did not list: Ctrl-C inside the examples job (in-process and with
worker processes), threads that die or hang after the interrupt's one line, and a forced
``--resume`` whose checkpoint is already past the new ``--steps``."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest

from kolectra.core.config import override, to_dict
from kolectra.core.stage import StageOutput
from kolectra.corpus import runners
from kolectra.model import resume
from kolectra.model.presets import preset
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.request import Request
from kolectra.vocab.build import build as build_vocab
from kolectra.vocab.config import VocabConfig
from tests.test_vocab_corpus import korean_sentences, write_corpus

REPO = Path(__file__).resolve().parents[1]


def _python(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_a_thread_left_hanging_by_an_interrupt_does_not_hang_the_exit():
    started = time.monotonic()
    proc = _python("""
        import sys, threading
        from pathlib import Path
        from kolectra.pipeline.cli import errors
        errors.EXIT_GRACE = 0.5
        def run():
            threading.Thread(target=threading.Event().wait, name="stuck").start()  # never ends, not a daemon
            raise KeyboardInterrupt("interrupted during the job")
        sys.exit(errors.handled("examples", lambda: Path("/tmp"), run))
    """, timeout=30)
    assert proc.returncode == 130 and time.monotonic() - started < 20
    assert proc.stderr.strip() == "kolectra examples: interrupted during the job"


def test_a_ctrl_c_while_the_command_starts_is_one_line_not_a_traceback():
    # the installed script imports kolectra.pipeline.cli, then calls main: a Ctrl-C in the first half
    # second (the commands' imports, the parser) came before any handler of the command's
    proc = _python("""
        import importlib.abc, os, signal, sys
        class CtrlC(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name == "kolectra.pipeline.cli.commands":
                    os.kill(os.getpid(), signal.SIGINT)  # pressed as the command's modules load
                return None
        sys.meta_path.insert(0, CtrlC())
        from kolectra.pipeline.cli import main  # as the installed script does
        sys.exit(main(["artifacts", "list"]))
    """)
    # before: a KeyboardInterrupt traceback from the import machinery, status 1
    assert (proc.returncode, proc.stderr) == (130, "kolectra: interrupted while starting; nothing was done\n")


def test_a_second_sigterm_during_the_clean_up_keeps_the_first_ones_line():
    proc = _python("""
        import sys
        from pathlib import Path
        from kolectra.core.errors import Terminated
        from kolectra.pipeline.cli import errors
        def run():
            try:
                raise Terminated("terminated (SIGTERM) after step 2 of 20, saved as the checkpoint step-00000002")
            except Terminated as e:  # the store's clean-up (Store._abandon), which notes what it kept
                e.add_note("checkpoint: its working state is kept in ROOT/.work/x; --resume continues it")
                raise Terminated()  # the second SIGTERM's handler raised it there
        sys.exit(errors.handled("pretrain", lambda: Path("/tmp"), run))
    """)
    # before: 'kolectra pretrain: terminated; nothing was published' (a real run: TERM twice 0.1 s apart at
    # step 1, its step-00000002 kept in .work, which the next plain run discarded as an interrupted run)
    assert (proc.returncode, proc.stderr) == (143, "kolectra pretrain: terminated (SIGTERM) after step 2 of 20, "
                                              "saved as the checkpoint step-00000002; checkpoint: its working "
                                              "state is kept in ROOT/.work/x; --resume continues it\n")


def test_a_sigterm_while_the_command_starts_is_one_line_and_the_default_comes_back(tmp_path):
    # a scheduler's stop as the job starts: before, the process ended by the signal (143 in a shell) with
    # nothing written, no trace in the job's log
    proc = _python("""
        import importlib.abc, os, signal, sys
        class Stop(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name == "kolectra.pipeline.cli.commands":
                    os.kill(os.getpid(), signal.SIGTERM)  # as the command's modules load
                return None
        sys.meta_path.insert(0, Stop())
        from kolectra.pipeline.cli import main  # as the installed script does
        sys.exit(main(["artifacts", "list"]))
    """)
    assert (proc.returncode, proc.stderr) == (143, "kolectra: terminated while starting; nothing was done\n")
    # a command that ran puts SIGTERM's default back, and an ignored SIGTERM is left ignored
    proc = _python(f"""
        import signal, sys
        from kolectra.pipeline.cli import main
        code = main(["artifacts", "list", "--out", {str(tmp_path / "a")!r}])
        print(code, signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        code = main(["artifacts", "list", "--out", {str(tmp_path / "b")!r}])
        print(code, signal.getsignal(signal.SIGTERM) is signal.SIG_IGN)
    """)
    assert proc.stdout.split() == ["0", "True", "0", "True"], proc.stderr


def test_threads_dying_after_the_interrupt_print_nothing():
    proc = _python("""
        import sys, threading, time
        from pathlib import Path
        from kolectra.pipeline.cli import errors
        def die():
            time.sleep(0.3)
            raise RuntimeError("Worker subprocess exited with return code -15")  # as Beam's threads do
        def run():
            threading.Thread(target=die).start()
            raise KeyboardInterrupt
        sys.exit(errors.handled("examples", lambda: Path("/tmp"), run))
    """)
    assert proc.returncode == 130
    assert proc.stderr.strip().splitlines() == ["kolectra examples: interrupted; nothing was published"]


def test_ctrl_c_however_beam_wraps_it_is_one_keyboard_interrupt():
    with pytest.raises(KeyboardInterrupt, match="interrupted during the examples job"):
        with runners.interruptible("interrupted during the examples job") as ctrl_c:
            ctrl_c.happened = True  # what the SIGINT handler records
            raise RuntimeError("KeyboardInterrupt [while running 'TokenizeAndPack/ParDo(TokenizeAndPack)']")
    with pytest.raises(RuntimeError, match="a real failure"):  # without Ctrl-C, failures pass unchanged
        with runners.interruptible("interrupted"):
            raise RuntimeError("a real failure")


def test_a_forced_resume_past_the_new_steps_is_refused():
    saved = override(preset("tiny"), ["train.steps=40"])
    now = override(preset("tiny"), ["train.steps=10", "train.force_resume=true"])
    ck = {"state": {"config": to_dict(saved), "vocab": "v", "step": 24}}
    with pytest.raises(resume.PretrainInputError, match=r"at step 24, past train.steps=10.*--steps 24 or more"):
        resume.restore(now, "v", Path("checkpoints/step-00000024"), ck, types.SimpleNamespace(is_main=True),
                       None, None, None)


@pytest.fixture(scope="module")
def many_documents(tmp_path_factory):
    """A corpus artifact of 40,000 documents (copies of a small real one, under new ids) and a vocab."""
    root = tmp_path_factory.mktemp("many")
    sents = korean_sentences(120, seed=2)
    small = write_corpus(root / "small", {"train": [sents[i:i + 3] for i in range(0, 120, 3)], "valid": [sents[:2]]})
    store = Store(root / "store")

    def copies(out: Path):
        (out / "data").mkdir()
        for split, n in (("train", 1000), ("valid", 1)):
            name = f"data/{split}-00000-of-00001.jsonl.gz"
            docs = [json.loads(line) for line in gzip.decompress((small / name).read_bytes()).decode().splitlines()]
            # each document serialised once; a copy's line is its new id and the rest (json.dumps's own bytes)
            rest = [json.dumps({k: v for k, v in d.items() if k != "id"}, ensure_ascii=False)[1:] for d in docs]
            lines = ('{"id": ' + json.dumps(f"{d['id']}#{k}") + ", " + r + "\n" for k in range(n)
                     for d, r in zip(docs, rest))
            # level 1: 35 MB of JSON in 0.4 s instead of 6 s at gzip's default 9 (the test reads it, nothing keeps it)
            (out / name).write_bytes(gzip.compress("".join(lines).encode(), compresslevel=1, mtime=0))
        return StageOutput(stats={})

    corpus = store.build(Request(kind="corpus", name="many", stage_version=1, config={}), copies)
    vocab = store.build(Request(kind="vocab", name="v", stage_version=1, config={}, parents=(corpus,)),
                        lambda out: build_vocab(VocabConfig(vocab_size=1000, num_unused=0, report_baseline=False),
                                                small, out))
    return store, corpus, vocab


@pytest.mark.parametrize("workers", ["1", "2"])
def test_ctrl_c_during_the_examples_job_is_one_line(many_documents, workers):
    store, corpus, vocab = many_documents
    cmd = [sys.executable, "-m", "kolectra.pipeline.cli", "examples", "--corpus", str(corpus.path), "--vocab",
           str(vocab.path), "--out", str(store.root), "--force", f"--direct_num_workers={workers}"]
    # about 3 s of work on one worker: a loaded machine once let the job end (its artifact published) before
    # the Ctrl-C, which is no failure of the Ctrl-C during the job; then it is tried again, sooner
    for wait in (1.5, 0.5, 0.1):
        proc = subprocess.Popen(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen = ""
        while "examples: 1 train shard(s)" not in seen and proc.poll() is None:  # the job is starting ...
            seen = proc.stderr.readline()
        time.sleep(wait)  # ... and running
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        after_the_job = out != "" or (proc.returncode == 130 and len(err.strip().splitlines()) == 1
                                      and "during the examples job" not in err)
        if not after_the_job:
            break
    assert proc.returncode == 130 and out == "", err[-3000:]
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err[-3000:]
    assert err.startswith("kolectra examples: interrupted during the examples job") and "nothing published" in err
    assert not list((store.root / ".tmp").iterdir())


def test_a_ctrl_c_while_the_process_exits_after_the_command_is_one_line():
    # a Ctrl-C as the interpreter exits (kolectra examples had printed its artifact 0.4 s before):
    # before, a KeyboardInterrupt traceback ('Exception ignored in atexit callback'), or the process
    # ended by SIGINT itself (-2, no line) once Python had put the default disposition back
    proc = _python("""
        import atexit, os, signal, sys, time
        from pathlib import Path
        from kolectra.pipeline.cli import errors
        def run():
            print("/store/examples/x")
            return 0
        code = errors.handled("examples", lambda: Path("/tmp"), run)
        def ctrl_c():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        atexit.register(ctrl_c)  # registered last: runs first, while the exit's Python code runs
        sys.exit(code)
    """)
    assert (proc.returncode, proc.stdout) == (130, "/store/examples/x\n"), proc.stderr
    assert proc.stderr == ("kolectra examples: interrupted while exiting, after the command had finished "
                           "(what it printed above stands)\n")


def test_a_ctrl_c_once_the_artifact_is_published_says_it_was(tmp_path, monkeypatch, capsys):
    # --force's rename is done, the replaced copy is being removed (seconds for a large one) when the
    # Ctrl-C comes: before, 'nothing published; its partial build in ... was removed', the artifact in place
    from kolectra.pipeline.cli import errors
    from kolectra.pipeline.store import artifacts

    store = Store(tmp_path / "store")
    req = Request(kind="corpus", name="c", stage_version=1, config={})

    def produce(out: Path) -> StageOutput:
        (out / "data").mkdir()
        (out / "data" / "train-00000-of-00001.jsonl.gz").write_bytes(gzip.compress(b'{"id": "a", "text": "x"}\n'))
        return StageOutput(stats={})

    first = store.build(req, produce)
    removing, pressed = artifacts.shutil.rmtree, []

    def ctrl_c_while_removing(path, *a, **k):
        removing(path, *a, **k)
        if Path(path).parent == store.root / ".tmp" and not pressed:  # the replaced copy
            pressed.append(path)
            raise KeyboardInterrupt

    monkeypatch.setattr(artifacts.shutil, "rmtree", ctrl_c_while_removing)
    code = errors.handled("corpus", lambda: store.root, lambda: store.build(req, produce, force=True) and 0)
    err = capsys.readouterr().err
    assert code == 130 and (first.path / "manifest.json").is_file()
    assert err == f"kolectra corpus: interrupted; corpus: published as {first.path} before the interrupt\n"


def test_a_ctrl_c_as_the_rename_into_place_returns_says_published_and_the_artifact_serves(tmp_path):
    # a real SIGINT whose handler ran as os.replace(out, final) returned (before the store's own
    # 'published' guard was entered): before, 'interrupted; corpus: nothing published; its partial build in
    # .../.tmp/... was removed' with the artifact in place (its build lock file left inside it)
    from kolectra.pipeline.store.manifest import verify_dir
    root = tmp_path / "store"
    child = [sys.executable, "-m", "tests.fault_child", "toy", str(root)]
    proc = subprocess.run([*child, "int_renamed", "--handled", "--text", "kept"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    (final,) = (root / "corpus").iterdir()
    assert (proc.returncode, proc.stdout) == (130, ""), proc.stderr
    assert proc.stderr == f"kolectra corpus: interrupted; corpus: published as {final} before the interrupt\n"
    assert verify_dir(final) == [] and (final / "data" / "a.txt").read_text() == "kept"
    again = subprocess.run([*child, "none", "--text", "kept"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert (again.returncode, again.stdout.strip()) == (0, str(final)), again.stderr
    assert "reusing" in again.stderr
