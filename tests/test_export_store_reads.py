"""``kolectra export`` of a checkpoint kept in a bucket, on a machine whose cache holds nothing of it: what it
reads from the store (moto's S3 server on 127.0.0.1, its recorder counting every GET).

Before: the export's full check streamed every object of the checkpoint through sha256 (the other network's
weights, the logs and the TensorBoard file too), then the copy downloaded every object again, and the copy
was re-hashed once more for the ``--to`` check. Now: the stage's check (one listing against the recorded
sizes and store checksums), then the exported network's files alone, each read once and hashed as it arrives;
a damaged object is still refused."""

from __future__ import annotations

import dataclasses
from collections import Counter

from kolectra.core import storage
from kolectra.core.config import to_dict
from kolectra.model import presets, train
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.request import Request
from tests.model_support import build_examples, build_tokenizer
from tests.s3_support import answered, bucket, s3_endpoint  # noqa: F401  (fixtures)


def _checkpoint_in(root: str, tmp_path):
    """A real tiny checkpoint (4 steps of the trainer) published in the store root ``root``."""
    tok = build_tokenizer(tmp_path / "tok")
    examples = build_examples(tmp_path / "examples", tok, n=32, seq_len=32)
    base = presets.tiny()
    cfg = dataclasses.replace(base, train=dataclasses.replace(base.train, steps=4, batch_size=8, warmup_steps=1,
                                                              log_every=2, cpu_threads=1))
    return open_store(root).build(Request(kind="checkpoint", name="tiny", stage_version=train.STAGE_VERSION,
                                          config=to_dict(cfg)), lambda out: train.pretrain(cfg, examples, tok, out))


def _objects_read(requests, art) -> Counter:
    prefix = str(art.path).removeprefix("s3://") + "/"
    return Counter(r.key.removeprefix(prefix) for r in requests
                   if r.operation == "GetObject" and r.key.startswith(prefix) and not r.key.endswith("/manifest.json"))


def test_an_export_from_a_bucket_reads_the_exported_network_s_objects_once_and_nothing_else(
        bucket, s3_endpoint, tmp_path, monkeypatch):  # noqa: F811
    root = f"{bucket}/k"
    art = _checkpoint_in(root, tmp_path)
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "fresh-cache"))  # another machine: nothing copied yet
    for role in ("discriminator", "generator"):
        with answered(s3_endpoint) as requests:
            assert main(["export", art.id, "--role", role, "--to", str(tmp_path / role), "--out", root]) == 0
        wanted = {e["path"] for e in art.manifest["files"] if e["path"].startswith(f"hf/{role}/")}
        assert _objects_read(requests, art) == Counter({p: 1 for p in wanted}), requests
        assert (tmp_path / role / "model.safetensors").read_bytes() == \
            storage.read_bytes(f"{art.path}/hf/{role}/model.safetensors")
    # a damaged object, the other network's too, is still refused, in one line
    key = f"{art.path}/hf/generator/model.safetensors"
    body = bytearray(storage.read_bytes(key))
    body[len(body) // 2] ^= 1
    storage.write_bytes(key, bytes(body))
    assert main(["export", art.id, "--to", str(tmp_path / "again"), "--out", root]) == 2
    assert not (tmp_path / "again").exists()
