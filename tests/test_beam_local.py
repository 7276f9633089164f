"""The changes to Beam's local runner (corpus/beam_local.py): the corpus job writes the same bytes
with and without them; they apply only to the Beam they were written against (its pinned version
and each replaced method's source), and otherwise leave Beam's own methods in place."""

from __future__ import annotations

import dataclasses
import gzip
from pathlib import Path

import apache_beam
import pytest
from apache_beam.runners.portability.fn_api_runner import execution

from kolectra.corpus import beam_local, build
from kolectra.corpus.config import default_config, production_config

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "pipeline" / "sample" / "reviews.jsonl.gz"


@pytest.fixture(autouse=True)
def _beam_own_methods():
    """Each test starts and ends with Beam's own methods (the next local job patches again)."""
    beam_local.uninstall()
    yield
    beam_local.uninstall()


def _beams_methods() -> dict:
    return {name: getattr(owner, attr) for name, (owner, attr, _) in beam_local._targets().items()}


def test_the_fingerprints_are_those_of_beam_as_installed_and_pinned():
    # fails when Beam changes under the pin: read the new methods, redo the replacements, refingerprint
    assert apache_beam.__version__ == beam_local.BEAM_VERSION
    assert f'"apache-beam=={beam_local.BEAM_VERSION}"' in (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert {name: beam_local.fingerprint(m) for name, m in _beams_methods().items()} == beam_local.FINGERPRINTS
    assert {name: beam_local.fingerprint(m) for name, m in beam_local._relied_on().items()} == beam_local.RELIED_ON
    assert beam_local.install()
    assert {name: getattr(owner, attr) for name, (owner, attr, _) in beam_local._targets().items()} == \
        {name: new for name, (_, _, new) in beam_local._targets().items()}


@pytest.mark.parametrize("change", ["fingerprint", "relied on", "version"])
def test_another_beam_keeps_its_own_methods(monkeypatch, change):
    own = _beams_methods()
    if change == "fingerprint":
        monkeypatch.setitem(beam_local.FINGERPRINTS, "InMemoryDataChannel.input_elements", "0" * 64)
    elif change == "relied on":  # the output stream's timed flush, which the threaded send's lock follows
        monkeypatch.setitem(beam_local.RELIED_ON, "TimeBasedBufferingClosableOutputStream.flush", "0" * 64)
    else:
        monkeypatch.setattr(beam_local, "BEAM_VERSION", "2.78.0")
    assert not beam_local.install()
    assert _beams_methods() == own and not beam_local.installed()
    # the memory check then estimates Beam's own runner's peak, about twice the slope, near-dup on or off
    assert build.local_memory_model(default_config(), build.LOCAL_RUNNER) is build.LOCAL_MEMORY_BEAM_OWN
    assert build.local_memory_model(production_config(), build.LOCAL_RUNNER) is build.LOCAL_MEMORY_NEAR_DUP_BEAM_OWN


def test_the_memory_check_estimates_the_runner_that_will_run():
    assert build.local_memory_model(default_config(), build.LOCAL_RUNNER) is build.LOCAL_MEMORY
    assert beam_local.installed()  # applied there, as the runner applies it before the job
    assert build.local_memory_model(production_config(), build.LOCAL_RUNNER) is build.LOCAL_MEMORY_NEAR_DUP
    assert build.LOCAL_MEMORY.per_mb < build.LOCAL_MEMORY_BEAM_OWN.per_mb
    assert build.LOCAL_MEMORY_NEAR_DUP.per_mb < build.LOCAL_MEMORY_NEAR_DUP_BEAM_OWN.per_mb


def _corpus(cfg, tmp_path: Path, name: str) -> dict[str, bytes]:
    out = tmp_path / name
    build.build(cfg, [str(tmp_path / "in" / "*.jsonl.gz")], out, ["--direct_num_workers=1"])
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("preset", [default_config, production_config])
def test_the_corpus_is_the_same_bytes_with_and_without_them(tmp_path, monkeypatch, preset):
    lines = gzip.decompress(SAMPLE.read_bytes()).splitlines()[:300]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "reviews.jsonl.gz").write_bytes(gzip.compress(b"\n".join(lines) + b"\n", mtime=0))
    cfg = dataclasses.replace(preset(), num_shards=3)
    # small streams and messages: every group and bundle input is split many times
    monkeypatch.setattr(beam_local, "PARTITION_STREAM_BYTES", 2 << 10)
    monkeypatch.setattr(beam_local, "SEND_MESSAGE_BYTES", 4 << 10)
    with monkeypatch.context() as m:  # a wrong fingerprint: the local runner keeps Beam's methods
        m.setitem(beam_local.FINGERPRINTS, "GroupingBuffer.partition", "0" * 64)
        own = _corpus(cfg, tmp_path, "own")
        assert not beam_local.installed()
    changed = _corpus(cfg, tmp_path, "changed")
    assert beam_local.installed() and execution.GroupingBuffer.partition is beam_local._partition
    assert own.keys() == changed.keys() and any(k.endswith(".jsonl.gz") for k in own)
    assert {k for k in own if own[k] != changed[k]} == set()
