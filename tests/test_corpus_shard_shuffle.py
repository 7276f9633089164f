"""The shard shuffle's input is the analysed documents alone (no Flatten ahead of it, which Beam's
local runner materialises as a stage of its own: one more copy of every document), and the shards
no document went to are written empty afterwards, as the shard writer writes one."""

from __future__ import annotations

import gzip

import apache_beam as beam
from apache_beam.pipeline import PipelineVisitor

from kolectra.corpus import build, outputs
from kolectra.corpus.config import default_config


class _Producers(PipelineVisitor):
    def __init__(self):
        self.producer: dict = {}  # PCollection -> the full label of the transform that made it
        self.inputs: dict = {}  # full label -> its input PCollections

    def visit_transform(self, node):
        self.inputs[node.full_label] = list(node.inputs)
        for pcoll in node.outputs.values():
            self.producer[pcoll] = node.full_label

    def enter_composite_transform(self, node):
        self.visit_transform(node)


def test_the_shard_shuffle_takes_the_analysed_documents_straight(tmp_path):
    cfg = default_config()
    p = beam.Pipeline()
    build._recipe(p, cfg, str(tmp_path / "listing.jsonl"), str(tmp_path / "out"), buckets=16, progress_dir=None)
    seen = _Producers()
    p.visit(seen)
    [docs] = seen.inputs["GroupShards"]
    assert seen.producer[docs].startswith("AnalyseAndPlace/"), seen.producer[docs]  # not a Flatten
    assert not any("EmptyShards" in label and "Flatten" in label for label in seen.inputs)


def test_shards_without_documents_are_written_empty_as_the_writer_writes_them(tmp_path):
    num_shards = 3
    lines = [(("a.txt", 1), '{"id": "1"}')]
    written = [outputs.write_shard((("train", 1), [outputs.pack_chunk(lines)]), str(tmp_path / "out"), num_shards)]
    entries = outputs.write_empty_shards(written, str(tmp_path / "out"), num_shards)
    assert sorted(e["path"] for e in entries) == sorted(outputs.output_files(num_shards)[:2 * num_shards])
    empty = outputs.write_shard((("valid", 0), [outputs.pack_chunk([])]), str(tmp_path / "alone"), num_shards)
    by_path = {e["path"]: e for e in entries}
    assert by_path[empty["path"]] == empty  # the same bytes as an empty group through the writer
    for path, entry in by_path.items():
        data = (tmp_path / "out" / path).read_bytes()
        assert len(data) == entry["bytes"]
        assert gzip.decompress(data) == (b'{"id": "1"}\n' if path == written[0]["path"] else b"")
