"""The corpus job's memory on Beam's local runner, as fitted: the launcher's peak (one in-process
worker included) per MB of the input's expected shard JSON, near-dup off and on, with
``corpus/beam_local.py``'s changes and on Beam's own runner; each worker process's term, which the
job's shard size bounds; and the drops' shuffle and writer when ``write_dropped`` is set.
``corpus/local_memory.py`` checks a job against it before the job (:func:`local_memory_model` gives
the job's :class:`~kolectra.corpus.local_memory.MemoryModel`); the measurements behind each figure
are in docs/scale.md ("What a corpus size needs", "Every drop written")."""

from __future__ import annotations

import dataclasses

from kolectra.corpus import beam_local
from kolectra.corpus.config import CorpusConfig
from kolectra.corpus.local_memory import MemoryModel
from kolectra.corpus.runners import LOCAL_RUNNER

# The local runner's peak RSS per MB of expected shard JSON (corpus/local_memory.py: MemoryModel), fitted
# by benchmarks/local_peak.py on 1-8 NSMC review files with corpus/beam_local.py's changes and on Beam's
# own runner, near-dup off and on, each a little over every measured peak; an input byte is 3.5 bytes
# of JSON (outputs.JSON_PER_INPUT_BYTE). The fits and their margins: docs/scale.md ("What a corpus
# size needs").
# Each worker process beside the launcher (multi_processing: corpus/local_memory.py) holds its own
# Kiwi, harness and budgeted chunks, about 1.0 GB (1.2 with near-dup on, whose Kiwi stage takes the
# documents joined to their marks), and in the shard stage up to five shard-sized buffers (the group
# being written three times in Beam's channel and two waiting): bounded by the shard's size, a
# setting, not by the input (docs/scale.md, "The local runner's worker processes").
LOCAL_WORKER_BASE_MB, LOCAL_WORKER_BASE_MB_NEAR_DUP = 1000, 1200
SHARD_BUFFERS = 5  # shard-sized buffers a worker holds at most in the shard stage


def local_worker_mb(shard_json_bytes: float, near_dup: bool) -> float:
    """A corpus worker process's allowance for shards of ``shard_json_bytes`` of JSON."""
    return (LOCAL_WORKER_BASE_MB_NEAR_DUP if near_dup else LOCAL_WORKER_BASE_MB) + SHARD_BUFFERS * shard_json_bytes / 1e6


LOCAL_WORKER_MB = local_worker_mb(CorpusConfig.shard_bytes, near_dup=False)  # at the default shard_bytes: 2.0 GB
LOCAL_WORKER_MB_NEAR_DUP = local_worker_mb(CorpusConfig.shard_bytes, near_dup=True)
LOCAL_MEMORY = MemoryModel(base_mb=760, per_mb=1.5, worker_mb=LOCAL_WORKER_MB)
LOCAL_MEMORY_BEAM_OWN = MemoryModel(base_mb=740, per_mb=3.0, worker_mb=LOCAL_WORKER_MB)
LOCAL_MEMORY_NEAR_DUP = MemoryModel(base_mb=910, per_mb=1.6, worker_mb=LOCAL_WORKER_MB_NEAR_DUP)
LOCAL_MEMORY_NEAR_DUP_BEAM_OWN = MemoryModel(base_mb=830, per_mb=3.5, worker_mb=LOCAL_WORKER_MB_NEAR_DUP)
# write_dropped (corpus/drops.py) sends every drop through a shuffle of its own, which the local runner
# holds whole, and the process writing a (reason, part) file sorts up to sorted_files.RUN_BYTES of its
# lines. A drop costs its row's fields whatever its text, so input that is nearly all tiny records costs
# far more than the fits above: 3 M lines of 1-2 syllables, all too_short, peaked at 1,099 MB with it
# and 759 without, 30 % over the estimate (docs/scale.md, "Every drop written"). These terms bound it
# for records of 5 bytes or more; a drop is cheaper than the kept document it replaces, so review-like
# input stays well under.
DROPS_BASE_MB = 130  # the drop writer's sorted run (a worker process's, or the launcher's in process)
DROPS_PER_MB = 2.6  # MB per MB of expected shard JSON: the drops' shuffle, held and sent


def local_memory_model(cfg: CorpusConfig, runner: str, json_bytes: float | None = None) -> MemoryModel:
    """The fitted peak for this job, with near-dup or without, on the local runner with or without
    corpus/beam_local.py's changes (applied here, as the runner would before the job); a worker
    process's term for this job's shards (``json_bytes`` of JSON over ``cfg.num_shards`` a split:
    a few shards of a small input are small, a ``num_shards`` set low makes them large); with
    ``write_dropped``, the drops' shuffle and writer on top (:data:`DROPS_PER_MB`)."""
    changed = runner == LOCAL_RUNNER and beam_local.install()
    near_dup = cfg.near_dup_threshold > 0
    if near_dup:
        model = LOCAL_MEMORY_NEAR_DUP if changed else LOCAL_MEMORY_NEAR_DUP_BEAM_OWN
    else:
        model = LOCAL_MEMORY if changed else LOCAL_MEMORY_BEAM_OWN
    shard = json_bytes / cfg.num_shards if json_bytes is not None and cfg.num_shards > 0 else cfg.shard_bytes
    worker = local_worker_mb(shard, near_dup)
    if cfg.write_dropped:  # every drop shuffled and written: held beside the rest (above)
        return dataclasses.replace(model, base_mb=model.base_mb + DROPS_BASE_MB, per_mb=model.per_mb + DROPS_PER_MB,
                                   worker_mb=worker + DROPS_BASE_MB, measure=f"{model.measure}, every drop written")
    return model if worker == model.worker_mb else dataclasses.replace(model, worker_mb=worker)
