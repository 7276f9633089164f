"""Shared plumbing for ``benchmarks/<stage>.py``: their data arguments and the result line.

Each benchmark measures kolectra and a baseline side by side in one run and prints, as its last
line, one JSON object: ``benchmark``, ``unit``, ``value``, ``baseline`` (``name``, ``value``),
``ratio`` (value / baseline, higher is better), ``config``, ``machine``, ``wall_s`` and
``load_average`` (1/5/15-minute, at the start and at the end). ``--quick`` selects a reduced size
that finishes within about a minute on 2 cores.

The machines are shared: a ratio taken while neighbours held the CPU says little. ``neighbour_cores``
is what other processes used while the benchmark ran, measured, not guessed from the load average:
the machine's busy CPU time (``/proc/stat``) less the benchmark's own (its threads, its worker
processes and theirs), over the wall time; ``steal_cores`` is the time the hypervisor gave other
guests while this VM wanted its cores. ``under_load`` is true, and a warning names it, when
either exceeded a quarter of a core on average. The 1-minute load average lags by a minute or more,
so after a previous benchmark it still counts that one's processes: it is recorded, at the start
and at the end, but decides only where ``/proc/stat`` is missing (more than half the cores at the
start, or the cores plus one at the end).

Data. Nothing is read from a fixed place: a benchmark that needs data takes its path as an
argument (``--reviews GLOB``, ``--nsmc-train FILE``, ``--korquad FILE``), or ``--data DIR``, a
folder laid out as :data:`LAYOUT` (default ``$KOLECTRA_BENCH_DATA``). Without them ``--quick``
runs on the embedded sample (``pipeline/sample/``); the full size stops with a message naming
the argument to pass.
"""

from __future__ import annotations

import argparse
import glob
import json
import logging
import os
import platform
import re
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "pipeline" / "sample"
DATA_ENV = "KOLECTRA_BENCH_DATA"
# what --data DIR holds, by the argument that names each file directly
LAYOUT = {"reviews": "corpus/nsmc-reviews/*.jsonl.gz", "nsmc_train": "nsmc/ratings_train.txt",
          "korquad": "korquad/KorQuAD_v1.0_dev.json"}
DATA_HELP = {  # argument, metavar, what it is, its format
    "reviews": ("--reviews", "GLOB", "the NSMC review corpus", "JSONL (.gz) files, one {\"id\", \"text\"} "
                "object a line, e.g. 'data/corpus/nsmc-reviews/*.jsonl.gz'"),
    "nsmc_train": ("--nsmc-train", "FILE", "an NSMC-format training file",
                   "id<TAB>document<TAB>label with a header, e.g. data/nsmc/ratings_train.txt"),
    "korquad": ("--korquad", "FILE", "a KorQuAD 1.0 file", "SQuAD-format JSON, e.g. data/korquad/KorQuAD_v1.0_dev.json"),
}
SAMPLE_REVIEWS = SAMPLE / "reviews.jsonl.gz"  # 4,000 reviews: what --quick reads without --reviews
NEIGHBOURS_MAX = 0.25  # cores other processes may use on average before a ratio is flagged


def _cpu_times() -> list[int] | None:
    """The machine's CPU time since boot in ticks, all cores together (``/proc/stat``'s ``cpu`` line:
    user, nice, system, idle, iowait, irq, softirq, steal), or None where there is none."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    return [int(x) for x in fields[1:9]] if fields and fields[0] == "cpu" else None


def busy_cpu_seconds() -> float | None:
    """CPU seconds every core of this machine has spent busy since boot (user, nice, system, irq,
    softirq; not steal), or None where there is no ``/proc/stat``."""
    t = _cpu_times()
    return None if t is None else (t[0] + t[1] + t[2] + t[5] + t[6]) / os.sysconf("SC_CLK_TCK")


def steal_cpu_seconds() -> float | None:
    """CPU seconds the hypervisor gave other guests while this VM's cores wanted to run (steal)."""
    t = _cpu_times()
    return None if t is None or len(t) < 8 else t[7] / os.sysconf("SC_CLK_TCK")


def cpu_seconds() -> float:
    """CPU time of this process (all its threads) and of its finished children (Beam's worker
    processes): what other jobs on a shared machine disturb much less than the wall clock."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _proc_stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (which may hold spaces), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def tree_cpu_seconds() -> float:
    """:func:`cpu_seconds` plus what this process's live descendants used, with the children they
    have reaped: a fork server's served processes are grandchildren that this process never
    waits for (``benchmarks.step_bench.Served``)."""
    own = cpu_seconds()
    kids: dict[int, list[tuple[int, list[str]]]] = {}
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return own
    for p in pids:
        if (fields := _proc_stat(p)) is not None:
            kids.setdefault(int(fields[1]), []).append((int(p), fields))  # by parent pid
    tick, todo = os.sysconf("SC_CLK_TCK"), [os.getpid()]
    while todo:
        for pid, fields in kids.get(todo.pop(), []):
            own += sum(int(x) for x in fields[11:15]) / tick  # utime, stime, cutime, cstime
            todo.append(pid)
    return own


def cpu_mark() -> tuple[float, float | None, float]:
    """(wall clock, the machine's busy CPU seconds, this process tree's own): what
    :func:`neighbour_cores` measures from."""
    return time.perf_counter(), busy_cpu_seconds(), tree_cpu_seconds()


# when this benchmark's process started, the load average then, and the steal so far
STARTED, STARTED_LOAD, STARTED_STEAL = cpu_mark(), os.getloadavg(), steal_cpu_seconds()


def add_data_args(p: argparse.ArgumentParser, *what: str) -> None:
    """``--data DIR`` and one argument per data set the benchmark reads (keys of :data:`LAYOUT`)."""
    default = os.environ.get(DATA_ENV) or None
    p.add_argument("--data", type=Path, default=default, metavar="DIR",
                   help=f"a folder holding {', '.join(LAYOUT[w] for w in what)} "
                        f"(default: ${DATA_ENV}{', now ' + default if default else ', unset'})")
    for w in what:
        flag, metavar, noun, detail = DATA_HELP[w]
        p.add_argument(flag, dest=w, metavar=metavar, default=None,
                       help=f"{noun}: {detail} (default: DATA/{LAYOUT[w]})")


def data_path(args: argparse.Namespace, what: str, who: str) -> str | None:
    """The file or glob given for ``what`` (its own argument, else under ``--data``), or None when
    neither was given. A path that names nothing stops the benchmark, naming the argument."""
    flag = DATA_HELP[what][0]
    given = getattr(args, what, None)
    if given is None and getattr(args, "data", None) is not None:
        given, flag = str(Path(args.data) / LAYOUT[what]), f"--data {args.data}"
    if given is None:
        return None
    if not glob.glob(given):
        sys.exit(f"{who}: {flag}: {given} matches no file")
    return given


def require_data(args: argparse.Namespace, what: str, who: str) -> str:
    """:func:`data_path`, or stop with the arguments that would supply it."""
    path = data_path(args, what, who)
    if path is None:
        flag, metavar, noun, _ = DATA_HELP[what]
        sys.exit(f"{who}: the full size needs {noun}: pass {flag} {metavar}, or --data DIR holding "
                 f"{LAYOUT[what]} (or set ${DATA_ENV}); --quick runs on the embedded sample without them")
    return path


def reviews_source(args: argparse.Namespace, who: str) -> str:
    """The glob :func:`reviews` reads: ``--reviews``/``--data``, else (``--quick``) the embedded sample."""
    source = data_path(args, "reviews", who)
    if source is None and getattr(args, "quick", False):
        return str(SAMPLE_REVIEWS)
    return source if source is not None else require_data(args, "reviews", who)


def reviews(args: argparse.Namespace, limit: int | None, who: str) -> list[tuple[str, str]]:
    """(id, NFC text) of the review corpus given by ``--reviews``/``--data``, the first ``limit``
    of them; with ``--quick`` and neither given, the embedded sample's 4,000 reviews."""
    import gzip
    import unicodedata

    source = reviews_source(args, who)
    if source == str(SAMPLE_REVIEWS):
        print(f"{who}: no --reviews/--data: reading the embedded sample ({SAMPLE_REVIEWS.name})", file=sys.stderr)
    out = []
    for path in sorted(glob.glob(source)):
        with (gzip.open if path.endswith(".gz") else open)(path, "rt", encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                text = unicodedata.normalize("NFC", " ".join(str(r.get("text", "")).split()))
                if text:
                    out.append((str(r.get("id", len(out))), text))
                if limit and len(out) >= limit:
                    return out
    return out


def namespace_of(tree: Path, where: Path) -> str:
    """A folder holding ``kolectra/<part>`` links into a checkout: put first on PYTHONPATH, it
    imports that checkout's code in place of the installed one (``--base-tree`` runs)."""
    pkg = where / "kolectra"
    pkg.mkdir(parents=True)
    for part in ("core", "corpus", "vocab", "model", "finetune", "pipeline"):
        (pkg / part).symlink_to(tree.resolve() / part)
    return str(where)


def child_result(script: str, argv: list[str], pythonpath: str | None, who: str) -> dict:
    """Run ``script`` (a benchmark's own file) again in a fresh process with ``argv``, with
    ``pythonpath`` (from :func:`namespace_of`) first on its path when given: the JSON object its
    last stdout line holds. A child that fails stops the benchmark with its stderr's end."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, script, *argv], env=env, text=True, capture_output=True,
                          cwd=REPO / "benchmarks")
    if done.returncode:
        sys.exit(f"{who}: the child {' '.join(argv[:2])} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def timed(fn: Callable[..., Any], *args: Any) -> tuple[float, float, Any]:
    """(wall seconds, CPU seconds, result) of one call."""
    t0, c0 = time.perf_counter(), cpu_seconds()
    out = fn(*args)
    return time.perf_counter() - t0, cpu_seconds() - c0, out


def local_path(text: str) -> Path:
    """``type=Path`` for a benchmark's files and folders, which are on this machine's disk: a URL, which
    ``Path`` folds into a local path (``s3://b/k`` is ``s3:/b/k``: a folder named ``s3:`` written here, or
    an empty corpus counted), is refused by argparse in one line (exit 2)."""
    if re.match(r"[A-Za-z][\w+.-]*:/", text):
        raise argparse.ArgumentTypeError(f"{text}: a URL, and a benchmark reads and writes this machine's disk "
                                         "only: copy it here (or name a local folder)")
    return Path(text)


class _Parser(argparse.ArgumentParser):
    """Every ``type=Path`` argument is :func:`local_path`."""

    def add_argument(self, *args, **kwargs):
        if kwargs.get("type") is Path:
            kwargs["type"] = local_path
        return super().add_argument(*args, **kwargs)


def parser(doc: str, full: str) -> argparse.ArgumentParser:
    """The benchmark's parser: its docstring as the description, ``--quick``, and the full size's
    expected duration (``full``) in the help. A ``type=Path`` argument refuses a URL (:func:`local_path`)."""
    p = _Parser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help=f"reduced size, about a minute on 2 cores (without it: the full size, {full})")
    return p


def machine() -> dict[str, Any]:
    from kolectra.core.host import cpu_model, native_bf16

    info: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),  # the project's VMs have been AMD EPYC and Intel Xeon machines
        "native_bf16": native_bf16(),  # the flag that gives this CPU native bf16 matmuls, or None
        "platform": platform.platform(),
        "python": platform.python_version(),
        "processor": platform.processor() or platform.machine(),
    }
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return info


def best_of(fn: Callable[[], Any], repeats: int = 3) -> tuple[float, Any]:
    """Smallest wall time of ``repeats`` calls (and the last result)."""
    best, result = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def neighbour_cores(since: tuple[float, float | None, float] = STARTED) -> float | None:
    """Cores other processes kept busy, on average, since the mark ``since`` (None without
    ``/proc/stat``). Own CPU time counts every process this one started, and theirs."""
    t1, busy1, own1 = cpu_mark()
    t0, busy0, own0 = since
    if busy0 is None or busy1 is None or t1 <= t0:
        return None
    return max(0.0, ((busy1 - busy0) - (own1 - own0)) / (t1 - t0))


def load_report() -> dict[str, Any]:
    """The run's wall seconds, its load averages at start and end, what neighbours used meanwhile,
    and whether it ran under load."""
    start, end, cores = STARTED_LOAD, os.getloadavg(), os.cpu_count() or 1
    wall, neighbours, steal_now = time.perf_counter() - STARTED[0], neighbour_cores(), steal_cpu_seconds()
    steal = None if STARTED_STEAL is None or steal_now is None or wall <= 0 else (steal_now - STARTED_STEAL) / wall
    if neighbours is not None:
        under = neighbours > NEIGHBOURS_MAX or (steal or 0.0) > NEIGHBOURS_MAX
        why = (f"other processes kept {neighbours:.2f} of {cores} cores busy on average while it ran"
               + (f", and the hypervisor gave {steal:.2f} cores to other guests" if steal else ""))
    else:
        under = start[0] > cores / 2 or end[0] > cores + 1
        why = f"1-minute load average {start[0]:.1f} at the start, {end[0]:.1f} at the end, on {cores} cores"
    out: dict[str, Any] = {"wall_s": round(wall, 1),
                           "load_average": {"start": [round(x, 2) for x in start], "end": [round(x, 2) for x in end],
                                            "cores": cores},
                           "neighbour_cores": None if neighbours is None else round(neighbours, 2),
                           "steal_cores": None if steal is None else round(steal, 2),
                           "under_load": under}
    if under:
        out["warning"] = f"taken under load ({why}): the ratio may mean little; rerun on a quiet machine"
        print(f"WARNING: {out['warning']}", file=sys.stderr)
    return out


def emit(benchmark: str, unit: str, value: float, baseline_name: str, baseline_value: float,
         config: dict[str, Any], **extra: Any) -> dict[str, Any]:
    load = load_report()
    if clash := sorted(extra.keys() & load.keys()):  # wall_s and the load it ran under go together
        raise ValueError(f"{benchmark}: {', '.join(clash)} would replace the run's own load report: name it otherwise")
    result = {
        "benchmark": benchmark,
        "unit": unit,
        "value": value,
        "baseline": {"name": baseline_name, "value": baseline_value},
        "ratio": value / baseline_value if value is not None and baseline_value else None,
        "config": config,
        "machine": machine(),
        **load,
        **extra,
    }
    print(json.dumps(result, ensure_ascii=False))
    return result


def moto_server(who: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """moto's S3 server on a free port of 127.0.0.1 (what the tests use), its endpoint in this process's
    AWS environment: (the server, its endpoint URL). ``env``: more variables for the server's process."""
    return s3_endpoint(lambda port: [sys.executable, "-c", "from moto.server import main; main()", "-H", "127.0.0.1",
                                     "-p", str(port)],
                       f"{who}: moto's server did not start (pip install 'moto[server]')", env)


def s3_endpoint(command: Callable[[int], list[str]], failed: str, env: dict[str, str] | None = None,
                ) -> tuple[subprocess.Popen, str]:
    """A server process (``command`` of a free port of 127.0.0.1) waited for until it accepts connections
    (``failed``: the exit line if it does not within 60 s) and made this process's S3 endpoint."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(command(port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**os.environ, **(env or {})})
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(failed)
            time.sleep(0.2)
    os.environ.update(AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}", AWS_ACCESS_KEY_ID="bench",
                      AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true")
    return server, f"http://127.0.0.1:{port}"


def moto_in_process(bucket: str, server_class: type | None = None):
    """moto's S3 server in a thread of this process (``server_class``: a ThreadedMotoServer of the
    caller's, else moto's own), its endpoint in this process's AWS environment and ``bucket`` made:
    (the server, moto's backend, to fill with ``put_object`` without a request each)."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = (server_class or ThreadedMotoServer)(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    os.environ.update(AWS_ENDPOINT_URL=f"http://{host}:{port}", AWS_ACCESS_KEY_ID="bench",
                      AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true")
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
    backend.create_bucket(bucket, "us-east-1")
    return server, backend
