"""Fine-tuning a checkpoint kept in a bucket fetches its discriminator only, and only to build.

The task's own code is a stand-in here (it records the folder it was handed); the store, the request
and the fetch are the real ones. Before, finetune made the whole checkpoint local (generator and logs
too) before asking the store whether the eval existed: a reused eval downloaded it on a fresh machine,
or re-hashed the cached copy, each seed of a ``--seeds`` run again.
"""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from kolectra.core.stage import StageOutput
from kolectra.pipeline import stages
from kolectra.pipeline.run import SAMPLE
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.remote import RemoteStore
from kolectra.pipeline.store.request import Request
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))


def _checkpoint(store):
    files = {"hf/discriminator/config.json": "{}", "hf/discriminator/model.safetensors": "d" * 4096,
             "hf/generator/model.safetensors": "g" * 4096, "metrics.jsonl": "{}\n"}

    def produce(out: Path) -> StageOutput:
        for rel, text in files.items():
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).write_text(text)
        return StageOutput(stats={})
    return store.build(Request(kind="checkpoint", name="sample", stage_version=1, config={}), produce)


def test_a_checkpoint_in_a_bucket_is_fetched_only_to_build_and_only_its_discriminator(bucket, monkeypatch):
    store = open_store(f"{bucket}/r")
    ckpt = _checkpoint(store)
    handed: list[Path] = []

    def run(cfg, model_dir, train, test, out, cache_dir=None):
        handed.append(model_dir)
        (out / "metrics.json").write_text(json.dumps({"task": "nsmc", "accuracy": 0.5}))
        return StageOutput(stats={})

    task = types.SimpleNamespace(STAGE_VERSION=1, run=run)
    monkeypatch.setattr(type(stages.FINETUNE_TASKS["nsmc"]), "load", lambda self: task)  # the task's own code
    fetched: list[str] = []
    local = RemoteStore.local

    def counted(self, art, only=None):
        fetched.append(art.kind)
        return local(self, art, only)

    monkeypatch.setattr(RemoteStore, "local", counted)
    files = (SAMPLE / "nsmc_train.txt", SAMPLE / "nsmc_test.txt")
    first = stages.finetune(store, "nsmc", ckpt, *files, preset="sample")
    assert fetched == ["checkpoint"] and len(handed) == 1
    model_dir = handed[0]
    assert (model_dir / "config.json").is_file() and (model_dir / "model.safetensors").stat().st_size == 4096
    assert not (model_dir.parent / "generator").exists() and not (model_dir.parent.parent / "metrics.jsonl").exists()
    # the same request: published, so nothing is fetched and the task does not run
    again = stages.finetune(open_store(f"{bucket}/r"), "nsmc", ckpt, *files, preset="sample")
    assert again.id == first.id and fetched == ["checkpoint"] and len(handed) == 1
