"""A child process for the fault-injection tests: build one request, SIGKILL itself at a named step.

``python -m tests.fault_child toy ROOT POINT [--force] [--sleep S] [--calls FILE] [--text T] [--start-after F]
    [--hold F] [--in-place] [--handled] [--resumable]``
    a small stage through :meth:`Store.build` (plain files, no training);
``python -m tests.fault_child pretrain ROOT EXAMPLES POINT [--resume] [--set KEY=VALUE ...]``
    :func:`kolectra.pipeline.stages.pretrain`, the real trainer (POINT ``truncateN``: through the
    command line, cutting the examples' shards short in place at training step N instead of dying;
    ``termN``: through the command line, a SIGTERM in training step N and a second one once the
    first file of the checkpoint it then saves is in the store, cutting that copy short; ``termlastN``:
    the second once its manifest is in the store, before the upload call returned; ``intN``: a SIGINT, a
    Ctrl-C, in training step N, ``intN_save`` / ``intN_export`` a second one as the checkpoint's save /
    the export begins; ``int_export``: one Ctrl-C as the export begins; ``term_export`` / ``hup_export``: a
    SIGTERM / SIGHUP as the export begins, ``term_export_twice`` a second SIGTERM as it returns;
    ``sigtermN``: one SIGTERM in training step N).

POINT names where the process kills itself with SIGKILL (no ``finally``, no clean-up, exactly as
``kill -9`` or a power cut would): right after the store's step of that name returned, e.g.
``sealed`` after the manifest is written and before the rename; ``none`` runs to the end. The
real functions run; they are only wrapped, in this process alone.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from kolectra.core import conditional, storage
from kolectra.core.stage import StageOutput
from kolectra.pipeline.cli.exiting import exit_now
from kolectra.pipeline.store import workspace
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.request import Request


def die() -> None:
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def kill_after(owner, name: str) -> None:
    real = getattr(owner, name)

    def wrapped(*args, **kwargs):
        out = real(*args, **kwargs)
        die()
        return out

    setattr(owner, name, wrapped)


def kill_when_old_copy_moved() -> None:
    """``--force``: after the published copy was moved out of the way, before the new one is renamed in."""
    real = os.replace

    def replace(src, dst):
        real(src, dst)
        if f"{os.sep}.tmp{os.sep}" in str(dst) and f"{os.sep}.tmp{os.sep}" not in str(src):
            die()

    os.replace = replace


def kill_in_training_step(n: int) -> None:
    from kolectra.model import objectives

    real, calls = objectives.STEPS["electra"], []

    def dying(*args, **kwargs):
        calls.append(1)
        if len(calls) == n:
            die()
        return real(*args, **kwargs)

    objectives.STEPS["electra"] = dying


def kill_at_call(owner, name: str, n: int, before: bool = False, only=lambda *a: True) -> None:
    """Die at the ``n``-th call of ``owner.name`` that ``only`` accepts (before or after it ran)."""
    real, calls = getattr(owner, name), []

    def wrapped(*args, **kwargs):
        if only(*args):
            calls.append(1)
            if before and len(calls) == n:
                die()
        out = real(*args, **kwargs)
        if not before and len(calls) == n and only(*args):
            die()
        return out

    setattr(owner, name, wrapped)


def signal_at_call(owner, name: str, signum: int, before: bool = False, only=lambda *a: True) -> None:
    """Send this process ``signum`` at the first call of ``owner.name`` that ``only`` accepts (before or
    after it ran): a Ctrl-C or ``kill`` at that moment, its handler (if any) running as it would."""
    real, sent = getattr(owner, name), []

    def wrapped(*args, **kwargs):
        hit = only(*args) and not sent
        if hit:
            sent.append(1)
        if hit and before:
            os.kill(os.getpid(), signum)
        out = real(*args, **kwargs)
        if hit and not before:
            os.kill(os.getpid(), signum)
        return out

    setattr(owner, name, wrapped)


def _is_manifest(url, *rest) -> bool:
    return str(url).endswith("/manifest.json")


# store roots (s3://...): the steps of kolectra.pipeline.store.remote's protocol
REMOTE_POINTS = {
    "leased": lambda: kill_at_call(conditional, "create_exclusive", 1, only=lambda url, *a: str(url).endswith(".lease")),
    "uploaded1": lambda: kill_at_call(storage, "upload", 1),
    "before_manifest": lambda: kill_at_call(conditional, "create_exclusive", 1, before=True, only=_is_manifest),
    "manifest": lambda: kill_at_call(conditional, "create_exclusive", 1, only=_is_manifest),
    # a real signal (SIGINT = a Ctrl-C, SIGTERM) once the manifest is in the store (the call not returned),
    # or as the lease is released at the end: the artifact published, the process stopping
    "int_manifest": lambda: signal_at_call(conditional, "create_exclusive", signal.SIGINT, only=_is_manifest),
    "term_manifest": lambda: signal_at_call(conditional, "create_exclusive", signal.SIGTERM, only=_is_manifest),
    # the same Ctrl-C, and a second one as the store is asked whether the manifest landed (an impatient user)
    "int_manifest_twice": lambda: (signal_at_call(conditional, "create_exclusive", signal.SIGINT, only=_is_manifest),
                                   signal_at_call(__import__("kolectra.pipeline.store.remote", fromlist=["RemoteStore"])
                                                  .RemoteStore, "_landed", signal.SIGINT, before=True)),
    "int_release": lambda: signal_at_call(conditional, "remove_if", signal.SIGINT, before=True,
                                          only=lambda url, *a: str(url).endswith(".lease")),
    "mirrored": lambda: kill_after(__import__("kolectra.pipeline.store.remote", fromlist=["RemoteStore"]).RemoteStore,
                                   "checkpoint_saved"),
}

def truncate_in_training_step(n: int, examples: str) -> None:
    """At training step ``n``, cut every shard of ``examples`` to 1,000 bytes, in place, as another
    process rewriting them would (the loader keeps reading them)."""
    from kolectra.model import objectives

    real, calls = objectives.STEPS["electra"], []

    def truncating(*args, **kwargs):
        calls.append(1)
        if len(calls) == n:
            for shard in Path(examples, "data").iterdir():
                os.truncate(shard, 1000)
        return real(*args, **kwargs)

    objectives.STEPS["electra"] = truncating


def interrupt_when_renamed_into_place() -> None:
    """A real SIGINT (a Ctrl-C) as the build's rename into place returns: its handler runs then."""
    real = os.replace

    def replace(src, dst):
        real(src, dst)
        if f"{os.sep}.tmp{os.sep}" in str(src) and f"{os.sep}.tmp{os.sep}" not in str(dst):
            os.kill(os.getpid(), signal.SIGINT)

    os.replace = replace


POINTS = {
    "none": lambda: None,
    "prepared": lambda: kill_after(Store, "_prepare"),
    "set_aside": lambda: kill_after(workspace.Run, "set_aside"),
    "sealed": lambda: kill_after(Store, "_seal"),
    "old_moved": kill_when_old_copy_moved,
    "published": lambda: kill_after(Store, "_publish"),
    "int_renamed": interrupt_when_renamed_into_place,
}


def toy_request(text: str) -> Request:
    return Request(kind="corpus", name="toy", stage_version=1, config={"text": text})


def toy(args) -> None:
    def produce(out: Path) -> StageOutput:
        if args.calls:
            with open(args.calls, "a") as f:
                f.write(f"{os.getpid()}\n")
        if not args.in_place:
            (out / "data").mkdir()
            (out / "data" / "a.txt").write_text(args.text)
        time.sleep(args.sleep)
        while args.hold and not Path(args.hold).exists():  # a live build, until the test lets it finish
            time.sleep(0.01)
        if args.point == "produced":
            die()
        if args.hold and Path(args.hold).read_text() == "fail":  # the stage fails once let go
            raise RuntimeError("the stage failed")
        if args.in_place:  # written where the artifact lives, reported as the Beam workers do
            entry = storage.write_bytes(storage.join(str(out), "data/a.txt"), args.text.encode())
            return StageOutput(stats={"n": len(args.text)}, files=[{"path": "data/a.txt", **entry}])
        return StageOutput(stats={"n": len(args.text)})

    if args.start_after:  # say "ready", then wait for the go: the builds race from the same moment
        Path(f"{args.start_after}.ready-{os.getpid()}").touch()
        while not Path(args.start_after).exists():
            time.sleep(0.01)
    def build() -> int:
        art = open_store(args.root).build(toy_request(args.text), produce, force=args.force, in_place=args.in_place,
                                          resumable=args.resumable)
        print(art.path)
        return 0

    if args.handled:  # as the command line ends it: one line and a status for a failure or a signal
        from kolectra.pipeline.cli import errors

        exit_now(errors.handled("corpus", lambda: Path(args.root), build))  # as the kolectra process ends
    build()


def terminate_twice(n: int, last: bool = False) -> None:
    """A SIGTERM in training step ``n`` (the run saves that step and stops), then another right after
    the first file of the checkpoint's copy to the store is uploaded (as a second ``kill`` does); with
    ``last``, right after its manifest, the copy's last file, is (the store has it, the call not returned)."""
    from kolectra.model import objectives

    real_step, real_upload, calls = objectives.STEPS["electra"], storage.upload, []

    def stepping(*args, **kwargs):
        calls.append(1)
        if len(calls) == n:
            os.kill(os.getpid(), signal.SIGTERM)
        return real_step(*args, **kwargs)

    def upload(local, url, *args, **kwargs):
        out = real_upload(local, url, *args, **kwargs)
        if len(calls) >= n and "/out/checkpoints/step-" in str(url) and (not last or str(url).endswith("/manifest.json")):
            os.kill(os.getpid(), signal.SIGTERM)
        return out

    objectives.STEPS["electra"], storage.upload = stepping, upload


def interrupt_in_training_step(n: int, again: str = "", signum: int = signal.SIGINT) -> None:
    """A real SIGINT (a Ctrl-C; or ``signum``) in training step ``n``; ``again``: a second SIGINT as the
    checkpoint it then saves begins to be written (``save``) or as the export begins (``export``), an
    impatient user's."""
    from kolectra.model import checkpoint, export, objectives

    real_step, calls = objectives.STEPS["electra"], []

    def stepping(*args, **kwargs):
        calls.append(1)
        if len(calls) == n:
            os.kill(os.getpid(), signum)
        return real_step(*args, **kwargs)

    objectives.STEPS["electra"] = stepping
    if again == "save":
        signal_at_call(checkpoint, "written", signal.SIGINT, before=True, only=lambda path, *a: f"step-{n:08d}" in str(path))
    elif again == "export":
        signal_at_call(export, "export_pair", signal.SIGINT, before=True)


def pretrain(args) -> None:
    from kolectra.model import export, train
    from kolectra.pipeline import stages

    if args.point == "produced":
        kill_after(train, "pretrain")
    elif args.point.startswith("step"):
        kill_in_training_step(int(args.point[4:]))
    elif args.point.startswith(("truncate", "term", "int", "hup", "sigterm")):  # through the command line: how the user sees it end
        from kolectra.pipeline.cli import main as cli

        if args.point == "int_export":  # a Ctrl-C once the run's steps are done, as its export begins
            signal_at_call(export, "export_pair", signal.SIGINT, before=True)
        elif args.point in ("term_export", "hup_export", "term_export_twice"):  # a stop signal there (preemption)
            signal_at_call(export, "export_pair", signal.SIGHUP if args.point == "hup_export" else signal.SIGTERM,
                           before=True)
            if args.point == "term_export_twice":  # the second as the export returns (wrapped outside the first)
                signal_at_call(export, "export_pair", signal.SIGTERM)
        elif args.point.startswith("sigterm"):  # sigtermN: one SIGTERM in training step N
            interrupt_in_training_step(int(args.point[7:]), signum=signal.SIGTERM)
        elif args.point.startswith("int"):  # intN, intN_save, intN_export: a Ctrl-C in step N (and a second)
            step, _, again = args.point[3:].partition("_")
            interrupt_in_training_step(int(step), again)
        elif args.point.startswith("termlast"):
            terminate_twice(int(args.point[8:]), last=True)
        elif args.point.startswith("term"):
            terminate_twice(int(args.point[4:]))
        else:
            truncate_in_training_step(int(args.point[8:]), args.examples)
        exit_now(cli(["pretrain", "--examples", args.examples, "--out", args.root, "--preset", "tiny",
                      *(f"--set={s}" for s in args.sets)]))  # as the kolectra process ends (pipeline/cli/exiting.py)
    art = stages.pretrain(open_store(args.root), args.examples, preset="tiny", sets=args.sets, resume=args.resume)
    print(art.path)


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="what", required=True)
    t = sub.add_parser("toy")
    t.add_argument("root")
    t.add_argument("point")
    t.add_argument("--force", action="store_true")
    t.add_argument("--sleep", type=float, default=0.0)
    t.add_argument("--calls", default=None)
    t.add_argument("--text", default="hello")
    t.add_argument("--start-after", default=None, help="a file to wait for before building")
    t.add_argument("--hold", default=None, help="a file to wait for before finishing the stage (holding 'fail': "
                   "the stage then fails)")
    t.add_argument("--in-place", action="store_true", help="write where the artifact lives (a store root)")
    t.add_argument("--handled", action="store_true", help="end as the command line does (one line, a status)")
    t.add_argument("--resumable", action="store_true", help="built in a run under .work, as pretraining is")
    q = sub.add_parser("pretrain")
    q.add_argument("root")
    q.add_argument("examples")
    q.add_argument("point")
    q.add_argument("--resume", action="store_true")
    q.add_argument("--set", dest="sets", action="append", default=[])
    args = p.parse_args()
    if args.point in POINTS:
        POINTS[args.point]()
    elif args.point in REMOTE_POINTS:
        REMOTE_POINTS[args.point]()
    {"toy": toy, "pretrain": pretrain}[args.what](args)


if __name__ == "__main__":
    main()
    exit_now(0)  # a child that returned ends as the kolectra process does, less the module teardown (~1.7 CPU s)
