"""The corpus job's listing of input files reaches the graph as a file (corpus/listing.py): the
submitted graph does not grow with the file count, and the job's rows are merged back onto the
request's records a line at a time (real Beam FnApiRunner in process, real files)."""

from __future__ import annotations

import dataclasses
import json

import apache_beam as beam
import pytest

from kolectra.corpus import build, listing, outputs, reader
from kolectra.corpus.config import default_config
from kolectra.corpus.inputs import list_inputs
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)


def _tiny_files(folder, n: int) -> str:
    for i in range(n):
        sub = folder / f"crawl-{i % 3}"
        sub.mkdir(parents=True, exist_ok=True)
        rows = [{"text": f"문서 {i} 의 {k} 번째 문장입니다. 충분히 긴 한국어 리뷰 텍스트가 여기에 있습니다."} for k in range(3)]
        (sub / f"part-{i:05d}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                                 encoding="utf-8")
    return str(folder / "*" / "*.jsonl")


def _graph_bytes(tmp_path, monkeypatch, files: int) -> int:
    """The size of the graph the corpus job submits for ``files`` tiny input files (the job runs)."""
    sizes = []
    run = beam.Pipeline.run

    def measured(self, *args, **kwargs):
        sizes.append(len(self.to_runner_api().SerializeToString()))
        return run(self, *args, **kwargs)

    monkeypatch.setattr(beam.Pipeline, "run", measured)
    cfg = dataclasses.replace(default_config(), num_shards=1, min_chars=5)
    out = tmp_path / f"out-{files:04d}"
    build.build(cfg, [_tiny_files(tmp_path / f"in-{files:04d}", files)], out, [])
    assert sum(1 for _ in outputs.read_file_rows(str(out))) == files
    [size] = sizes
    return size


def test_the_submitted_graph_does_not_grow_with_the_input_files(tmp_path, monkeypatch):
    # a Create of every file pickled the listing into the graph: 3.2 MB at 100,000 synthetic crawl
    # files and 31 MB at 1 M, past Dataflow's 10 MB graph limit; now the graph holds the listing
    # file's location (same-length folders here, so the same bytes but for compression's)
    few, many = _graph_bytes(tmp_path, monkeypatch, 4), _graph_bytes(tmp_path, monkeypatch, 150)
    assert abs(many - few) < 200, (few, many)


def test_the_listing_file_gives_the_elements_in_rank_order(tmp_path):
    pattern = _tiny_files(tmp_path / "in", 7)
    listed = list_inputs([pattern])
    name_of = reader.source_namer(f.path for f in listed)
    at = str(tmp_path / listing.FILE_NAME)
    # a caller's listing in another order is written in the names' order all the same
    assert listing.write(listing.in_name_order(listed[::-1], name_of), at) == 7
    names = sorted(reader.source_names([f.path for f in listed]).values())
    assert list(listing.read(at)) == [(rank, (f, names[rank])) for rank, f in enumerate(listed)]


def test_the_listing_goes_through_a_store(tmp_path, bucket):  # noqa: F811
    listed = list_inputs([_tiny_files(tmp_path / "in", 3)])
    name_of = reader.source_namer(f.path for f in listed)
    at = f"{bucket}/job/_job/{listing.FILE_NAME}"
    listing.write(listing.in_name_order(listed, name_of), at)
    assert [f for _, (f, _) in listing.read(at)] == listed


def test_the_sha256s_are_merged_onto_the_records_in_either_order():
    paths = [f"s3://b/crawl/p-{i:03d}.gz" for i in (5, 1, 9, 3)]
    name_of = reader.source_namer(paths)
    rows = [(name_of(p), {"sha256": f"sha-{p[-6:-3]}", "bytes": 1}) for p in sorted(paths)]
    for order in (sorted(paths), paths):  # as listed (by path), and a caller's own order
        records = [{"path": p, "bytes": 1} for p in order]
        listing.fill_sha256(records, name_of, iter(rows))
        assert [r["sha256"] for r in records] == [f"sha-{p[-6:-3]}" for p in order]
    with pytest.raises(ValueError, match="p-009"):  # a row missing: said, never a record left without
        listing.fill_sha256([{"path": p} for p in sorted(paths)], name_of, iter(rows[:2] + rows[3:]))
