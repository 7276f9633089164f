"""A corpus request's records kept in a file and read again at each pass
(pipeline/store/inputs.RecordFile), the job's listing a view of them (corpus/inputs.Files), the
input names sorted as they come (corpus/inputs.iter_names): the launcher holds a batch, not a
record a file. The id, ``inputs.jsonl`` and the manifest are the bytes the tuple of records gave,
at every count around ``INPUTS_INLINE`` (real store, real files; the job's rows made up where a
Beam job of 100,000 files would take minutes).
"""

from __future__ import annotations

import gc
import os
import tracemalloc
from pathlib import Path

import pytest
from apache_beam.io.filesystems import FileSystems

from kolectra.core.stage import StageOutput
from kolectra.corpus import inputs as corpus_inputs
from kolectra.corpus import listing, reader
from kolectra.pipeline import stages
from kolectra.pipeline.store import inputs
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.request import Request


def _records(n: int):
    """``n`` records as corpus/inputs.py lists S3 objects, a record at a time."""
    for i in range(n):
        path = f"s3://말뭉치-bucket/crawl-{i // 1000:03d}/part-{i:07d}.jsonl.gz"
        yield {"path": path, "bytes": 1000 + i, "identity": f'object:{path}:{1000 + i}:"{i:032x}-8"'}


def _rows(records, name_of):
    """``stats/files.jsonl``'s (source, row) in name order, as the job writes it."""
    for r in records:
        yield name_of(r["path"]), {"sha256": f"{r['bytes']:064x}"}


def _one_file(out: Path) -> StageOutput:
    (out / "x").write_text("x")
    return StageOutput(stats={})


def _published(root: Path, records) -> tuple[str, bytes | None, dict]:
    """The id, inputs.jsonl's bytes and the manifest (less the clock's) of a build of ``records``."""
    name_of = reader.source_namer(r["path"] for r in records)
    listing.fill_sha256(records, name_of, _rows(records, name_of))
    art = Store(root).build(Request(kind="vocab", name="v", stage_version=1, config={}, inputs=records), _one_file)
    spilled = art.path / inputs.INPUTS_FILE
    m = {k: v for k, v in art.manifest.items() if k not in ("provenance", "fields_digest")}
    return art.id, spilled.read_bytes() if spilled.exists() else None, m


@pytest.mark.parametrize("n", [1, 3, inputs.INPUTS_INLINE, inputs.INPUTS_INLINE + 1, 12_345])
def test_the_same_id_and_bytes_as_the_tuple_of_records(tmp_path, n):
    as_tuple = _published(tmp_path / "a", tuple(_records(n)))
    with inputs.RecordFile(_records(n)) as kept:
        as_file = _published(tmp_path / "b", kept)
        assert list(kept) == [dict(r, sha256=f"{r['bytes']:064x}") for r in _records(n)]  # filled in
    assert as_file == as_tuple
    assert (as_file[1] is None) == (n <= inputs.INPUTS_INLINE)
    assert not os.path.exists(kept.path)  # closed: removed


def _launcher(records) -> None:
    """What the corpus launcher does with its records from the listing to the seal
    (pipeline/stages.corpus, corpus/build.build), the job left out."""
    listed = corpus_inputs.Files(records)
    request = Request(kind="corpus", name="c", stage_version=1, config={}, inputs=records)
    request.id()
    name_of = reader.source_namer(f.path for f in listed)
    sum(f.bytes for f in listed)
    where = Path(os.environ["LAUNCHER_TMP"])
    listing.write(listing.in_name_order(listed, name_of), str(where / listing.FILE_NAME))
    listing.fill_sha256(records, name_of, _rows(records, name_of))
    entry = inputs.write(records, where)
    inputs.fields(records, [entry])


def _peak_mb(make) -> float:
    """tracemalloc's peak above the start while ``make()``'s records go through the launcher."""
    gc.collect()
    tracemalloc.start()
    records = None
    try:
        base = tracemalloc.get_traced_memory()[0]
        records = make()
        _launcher(records)
        return (tracemalloc.get_traced_memory()[1] - base) / 1e6
    finally:
        tracemalloc.stop()
        getattr(records, "close", bool)()


def test_the_launcher_holds_a_batch_of_records_not_every_one(tmp_path, monkeypatch):
    # the tuple and the listing held about 0.66 kB a record (66-70 MB at 100,000: docs/scale.md),
    # here 17.2 MB at 20,000 (32.3 at 40,000); kept in a file, the path's peak is about 4-6 MB at any
    # count (5.7 here at 20,000 and at 40,000; 4.1-4.5 at 100,000 in the benchmark). The bound sits
    # between, 1.7 times from each (20,000, not 100,000: tracemalloc makes each way minutes on a
    # loaded machine; 17 CPU s for both here)
    monkeypatch.setenv("LAUNCHER_TMP", str(tmp_path))
    n, bound = 20_000, 10.0
    assert _peak_mb(lambda: inputs.RecordFile(_records(n))) < bound
    assert _peak_mb(lambda: tuple(_records(n))) > bound  # the old way: the test can fail


def test_the_corpus_stage_keeps_its_records_in_a_file(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(3):
        (folder / f"part-{i}.txt").write_text(f"두 번 보고 싶은 영화입니다 추천합니다 {i}\n", encoding="utf-8")
    seen = []

    class Watching(Store):
        def build(self, request, *args, **kwargs):
            seen.append((type(request.inputs), request.inputs.path))
            return super().build(request, *args, **kwargs)

    corpus = stages.corpus(Watching(tmp_path / "root"), [str(folder / "*.txt")], sets=["min_chars=5"])
    [(kind, path)] = seen
    assert kind is inputs.RecordFile and not os.path.exists(path)  # removed once published
    assert [r["path"] for r in corpus.manifest["inputs"]] == [str(folder / f"part-{i}.txt") for i in range(3)]
    assert all(len(r["sha256"]) == 64 for r in corpus.manifest["inputs"])


def test_the_names_are_sorted_in_spilled_runs_as_beam_matches_them(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus_inputs, "NAME_RUN_BYTES", 4096)  # about 13 names a run: many runs
    for i in range(300):
        sub = tmp_path / f"crawl-{i % 7}" / ("deep" if i % 3 else "")
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"part-{(i * 7919) % 1000:04d}.txt").write_text("x")
    os.symlink(tmp_path / "nowhere", tmp_path / "crawl-0" / "part-9999.txt")  # leads nowhere: no file, as Beam
    patterns = [str(tmp_path / "**" / "*.txt"), str(tmp_path / "crawl-1" / "*.txt"), str(tmp_path / "crawl-2" / "d*" / "*.txt")]
    beam = sorted({os.path.abspath(m.path) for r in FileSystems.match(patterns) for m in r.metadata_list})
    assert corpus_inputs.expand(patterns) == beam and len(beam) == 300  # overlapping patterns: one each
    assert [f.path for f in corpus_inputs.iter_inputs(patterns)] == beam
    with pytest.raises(corpus_inputs.InputError, match="matches no file"):
        corpus_inputs.expand([str(tmp_path / "*.gz")])
