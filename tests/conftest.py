"""The XLA tests' marker: ``@pytest.mark.xla`` (registered in pyproject.toml) needs torch_xla.

torch-xla 2.9.0 works only with torch 2.9.0, while the base install takes current torch, so the
XLA tests run in an environment of their own (``pip install -e '.[xla,test]'``, then
``pytest -m xla``; ``.ci/run`` does both). Where torch_xla is absent they are skipped with the
reason, so a run of the suite says it did not exercise them instead of passing without them.

Each thread of a test process loads Kiwi once (the fixture ``_one_kiwi_a_thread``): the corpus
job's analysing step builds a segmenter per run, and the suite runs a hundred-odd corpus jobs
in its processes, each of whose model loads took 1.5-2 s. A Kiwi is the same analyser whichever
job calls it (kolectra never changes one after it is made); each thread keeps its own, as Beam's
harness threads do, so no two threads share one.

Beam makes a folder (``beam-pipeline-temp*``) in the temporary folder for every pipeline and removes
it only when the pipeline runs: a test that builds a graph to read it, never running it, left one
behind each time (kolectra's own jobs put a scratch folder in its place: corpus/runners.new_pipeline).
The fixture ``_beam_folders_removed`` removes those of the pipelines a test made. What the suite's
commands killed on purpose left (their scratch entries, core/scratch.py) is swept when the session
ends, as the next kolectra command would (the suite turns that sweep off while it runs).

A command run in-process with ``-q`` or ``-v`` sets ``KOLECTRA_VERBOSITY`` for its process and
children (core/verbosity.py): the fixture below puts it back after every test, so one test's
``-q`` cannot silence the progress lines a later test reads.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import threading

import pytest

# No sweep of the temporary folder (core/scratch.py) in the suite's processes and the commands they start:
# its line about what a killed run left there would be one more line in outputs the tests read.
# tests/test_scratch.py turns it back on where it tests it.
os.environ["KOLECTRA_SWEEP_SCRATCH"] = "0"

# One intra-op thread for torch (and OpenMP, BLAS) in the suite's processes and their children:
# pytest-xdist runs a worker per core, and each torch process's default pool of a thread per core
# then oversubscribes them; OpenMP's waiting threads made a tiny model's step 8x slower under load
# (docs/benchmarks.md, "The test suite and CI"). Tests of kolectra's thread settings set them.
os.environ.setdefault("OMP_NUM_THREADS", "1")

XLA_ABSENT = ("torch_xla is not installed here: the XLA tests run in a venv of their own "
              "(pip install -e '.[xla,test]' (torch 2.9.0), then pytest -m xla; .ci/run does it)")


def pytest_collection_modifyitems(config, items):
    if importlib.util.find_spec("torch_xla") is not None:
        return
    skip = pytest.mark.skip(reason=XLA_ABSENT)
    for item in items:
        if item.get_closest_marker("xla") is not None:
            item.add_marker(skip)


def pytest_sessionfinish(session, exitstatus):
    from kolectra.core import scratch

    scratch.sweep()  # only entries whose process has ended: a live run's, the suite's other workers', stay


@pytest.fixture(autouse=True)
def _beam_folders_removed():
    pipeline = sys.modules.get("apache_beam.pipeline")
    if pipeline is None:  # Beam is imported by the test modules that build pipelines, at collection
        yield
        return
    made = []
    init = pipeline.Pipeline.__init__

    def recorded(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self.local_tempdir)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline.Pipeline, "__init__", recorded)
        yield
    for folder in made:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def _verbosity_restored():
    before = os.environ.get("KOLECTRA_VERBOSITY")
    yield
    if before is None:
        os.environ.pop("KOLECTRA_VERBOSITY", None)
    else:
        os.environ["KOLECTRA_VERBOSITY"] = before


@pytest.fixture(autouse=True, scope="session")
def _one_kiwi_a_thread():
    from kolectra.corpus import segment

    made = segment.load_kiwi
    held = threading.local()

    def load_once(threads: int):
        kiwis = held.__dict__.setdefault("kiwis", {})
        if threads not in kiwis:
            kiwis[threads] = made(threads)
        return kiwis[threads]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(segment, "load_kiwi", load_once)
        yield
