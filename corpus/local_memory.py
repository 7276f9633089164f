"""Whether a job fits this machine before Beam's local runner starts it: the local runner holds every
shuffle in one process, so its peak grows with the input (docs/scale.md, "What a corpus size
needs"), and each of its worker processes (``multi_processing``) holds its own Kiwi, tokenizer or
tables beside it. A worker count kolectra chose is lowered until the job fits (:func:`fit_workers`);
a job that still would not fit is refused in one line naming a distributed runner,
``--direct_num_workers`` and ``--local_memory_gb``. Each job brings its fitted :class:`MemoryModel`
(``corpus/memory_model.py``, ``corpus/examples.py``, ``vocab/count.py``); ``corpus/runners.py`` owns the runner and the option."""

from __future__ import annotations

import dataclasses
import math
import os

from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions

from kolectra.core.errors import UserInputError
from kolectra.core.stage import progress
from kolectra.corpus.runners import LOCAL_RUNNER, CorpusOptions, chosen_locally


class LocalMemoryError(UserInputError):
    """A local run would need more memory than the machine has (estimated before the job)."""


@dataclasses.dataclass(frozen=True)
class MemoryModel:
    """A local run's peak RSS as ``base + per_mb`` for each MB of its input measure (the corpus
    job: the input's expected shard JSON, ``corpus.outputs.expected_json_bytes``; the examples
    job and the vocab stage's word count: the gzipped corpus shards they read), plus ``worker_mb``
    for each worker process: the launcher's peak (one in-process worker included) and a worker
    process's, which its settings bound, not its input; fitted on the NSMC reviews (docs/scale.md).
    ``per_record`` bytes for each of the input's ``records``, counted before the job, where a part
    follows the records whatever their size (the corpus job's drops: ``corpus/memory_model.py``);
    ``records_are`` names them in the refusal (the word count's: its word types, estimated)."""

    base_mb: float
    per_mb: float
    measure: str = "expected shard JSON"
    worker_mb: float = 0.0
    records: int = 0
    per_record: float = 0.0
    records_are: str = "records"

    def peak_bytes(self, json_bytes: float, workers: int = 0) -> float:
        return ((self.base_mb + self.per_mb * json_bytes / 1e6 + self.worker_mb * workers) * 1e6
                + self.per_record * self.records)


def worker_processes(options: PipelineOptions) -> int:
    """The local runner's worker processes beside the launcher: ``direct_num_workers`` in
    ``multi_processing`` mode, else none (its one worker, or its threads, run in the launcher)."""
    direct = options.view_as(DirectOptions)
    if direct.direct_running_mode != "multi_processing":
        return 0
    return max(1, direct.direct_num_workers or 1)


def machine_memory() -> float:
    """This machine's physical memory in bytes."""
    return float(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def check_local_memory(options: PipelineOptions, what: str, json_bytes: float, model: MemoryModel) -> float:
    """Before a local job: its estimated peak (bytes), the launcher's and its worker processes'
    together, or a :class:`LocalMemoryError` in one line when that is over ``--local_memory_gb``
    (default: the machine's memory). Beam's local runner holds every shuffle in memory, so no
    setting of kolectra's bounds it; the distributed runners' workers hold one group at a time.
    Other runners: 0, nothing checked."""
    if options.view_as(StandardOptions).runner != LOCAL_RUNNER:
        return 0.0
    workers = worker_processes(options)
    need = model.peak_bytes(json_bytes, workers)
    given = options.view_as(CorpusOptions).local_memory_gb
    have = given * 1e9 if given is not None else machine_memory()
    whose = "--local_memory_gb" if given is not None else "this machine's memory"
    if need > have and workers and "workers" in chosen_locally(options):
        fit = fit_workers(options, model, json_bytes, have)
        if fit is not None:
            took = model.peak_bytes(json_bytes, fit)
            progress(f"{what}: {_workers_text(fit)} instead of {_workers_text(workers)}, so that the run fits in "
                     f"{whose} ({have / 1e9:,.1f} GB): about {took / 1e9:,.1f} GB at its peak, where {workers} "
                     f"would need {need / 1e9:,.1f} GB (each worker process holds its own copy of the job's models; "
                     f"--direct_num_workers N sets the count)")
            return took
        workers, need = 0, model.peak_bytes(json_bytes)  # the least it could have taken: refused below
    if need > have:
        each = ""
        if workers:
            fewer = model.peak_bytes(json_bytes)  # one worker, in the launcher's process
            each = (f" + {workers} worker processes x {model.worker_mb / 1e3:.1f} GB, each with its own copy of the "
                    f"job's models: fewer workers need less, --direct_num_workers 1 (in this process) about "
                    f"{fewer / 1e9:,.1f} GB")
        records = f" + {model.per_record:g} bytes for each of its {model.records:,} {model.records_are}" if model.per_record else ""
        measured = f"its {json_bytes / 1e6:,.0f} MB of {model.measure}"
        per_mb = f" + {model.per_mb:g} MB per MB of {measured}" if model.per_mb else ""
        if not model.per_mb:
            records += f" in {measured}"
        raise LocalMemoryError(
            f"{what}: a local run of this input needs about {need / 1e9:,.1f} GB of memory ({model.base_mb / 1e3:.1f} GB"
            f"{per_mb}{records}{each}), over {whose} "
            f"({have / 1e9:,.1f} GB): Beam's local runner holds every shuffle in memory. Run it on a distributed "
            f"runner (--runner DataflowRunner, FlinkRunner or SparkRunner: docs/scale.md), or pass "
            f"--local_memory_gb {math.ceil(need / 1e9)} to run it here anyway")
    return need


def fit_workers(options: PipelineOptions, model: MemoryModel, json_bytes: float, have: float) -> int | None:
    """Lower a local run's worker count, which :func:`~kolectra.corpus.runners.pipeline_options`
    chose, to the most worker processes whose estimate fits in ``have`` bytes; at one, the worker
    runs in the launcher (``in_memory``) unless the arguments named the mode. Returns the worker
    processes now counted (0: the launcher's own worker), or None with the options unchanged when
    not even one fits. Fewer workers change only the wall time: the output is the same bytes."""
    direct = options.view_as(DirectOptions)
    for workers in range(worker_processes(options) - 1, 1, -1):
        if model.peak_bytes(json_bytes, workers) <= have:
            direct.direct_num_workers = workers
            return workers
    in_launcher = "mode" in chosen_locally(options)
    if model.peak_bytes(json_bytes, 0 if in_launcher else 1) > have:
        return None
    direct.direct_num_workers = 1
    if in_launcher:
        direct.direct_running_mode = "in_memory"
        return 0
    return 1


def _workers_text(processes: int) -> str:
    return "one worker in this process" if processes == 0 else f"{processes} worker process{'es' if processes > 1 else ''}"
