"""Corpus inputs in a bucket, listed a page at a time (core/store_glob.py, corpus/inputs.py), on
moto's S3 server (tests/s3_support.py):

- the objects a glob matches are fsspec's glob's, for every kind of pattern (``*``, ``?``,
  ``[...]``, ``**``, a glob in a middle level, a folder marker, a Korean name);
- each object's identity comes from the listing and equals what a HEAD gives (the worker's check
  after its read compares the two), and the listing asks no HEAD an object: one LIST a page (and
  one HEAD for the pattern itself: a key with ``[``, ``?`` or ``*`` is that object, as on a disk);
- the listing is read as it is consumed (one page, then the next), and the launcher's external
  sort carries the identities through spilled runs, one input per object however many patterns
  name it;
- a worker's read is pinned to the version its open saw (s3fs's If-Match), so the check after the
  read compares that version with the listing's without a second HEAD, and an object replaced
  since the listing (same size, other bytes) is still reported.
"""

from __future__ import annotations

import re

import pytest

from kolectra.core import storage, store_glob
from kolectra.corpus import build, inputs
from kolectra.corpus.config import default_config
from tests.s3_support import answered, bucket, s3_endpoint  # noqa: F401  (fixtures)

LAYOUT = ["raw/a.jsonl.gz", "raw/b.jsonl", "raw/part-1.gz", "raw/part-2.gz", "raw/partx.gz", "raw/[x].txt",
          "raw/리뷰-01.jsonl", "raw/sub/c.jsonl.gz", "raw/sub/deep/d.jsonl.gz", "raw/sub2/e.gz",
          "raw/sub2/deep/f.gz", "raw/folder/", "other/g.gz", "rawer/h.gz"]
PATTERNS = ["raw/*", "raw/*.gz", "raw/part-?.gz", "raw/part-[12].gz", "raw/[!p]*", "raw/*/*.gz", "raw/**",
            "raw/**/*.gz", "raw/s*/**", "raw*/*.gz", "ra*/a*", "raw/*/deep/*", "raw/sub*", "raw/리뷰-*",
            "raw/nothing-*"]


def _fill(bucket: str, keys: list[str]) -> None:
    for i, key in enumerate(keys):
        storage.write_bytes(f"{bucket}/{key}", b"" if key.endswith("/") else b"x" * (i + 1) + b"\n")


def _fsspec_glob(url: str) -> list[str]:
    fs, path = storage.filesystem(url)
    return sorted(f"s3://{p}" for p, m in fs.glob(path, detail=True).items() if m["type"] != "directory")


def test_a_bucket_glob_matches_what_fsspec_s_glob_matches(bucket):
    _fill(bucket, LAYOUT)
    seen = set()
    for pattern in PATTERNS:
        url = f"{bucket}/{pattern}"
        assert store_glob.glob(url) == _fsspec_glob(url), pattern
        seen.update(store_glob.glob(url))
    assert f"{bucket}/raw/folder/" not in seen and f"{bucket}/raw/리뷰-01.jsonl" in seen
    assert {f"{bucket}/raw/sub2/deep/f.gz", f"{bucket}/raw/[x].txt", f"{bucket}/rawer/h.gz"} <= seen


def test_identities_come_from_the_listing_without_a_head(bucket, s3_endpoint, monkeypatch):
    monkeypatch.setattr(store_glob, "PAGE_KEYS", 4)
    _fill(bucket, LAYOUT)
    with answered(s3_endpoint) as requests:
        listed = inputs.list_inputs([f"{bucket}/raw/*"])
    assert [f.path for f in listed] == _fsspec_glob(f"{bucket}/raw/*")
    # one HEAD for the pattern's own key (an object named raw/* would be that input), none an object
    assert [(r.operation, r.key) for r in requests if r.operation != "ListObjectsV2"] == \
        [("HeadObject", f"{bucket.removeprefix('s3://')}/raw/*")]
    assert len(requests) == 1 + 3  # 7 objects and 3 folders at that level: pages of 4
    for f in listed:  # the worker's check after its read: a HEAD, the same identity
        assert inputs.identify(f.path) == f
    deep = inputs.list_inputs([f"{bucket}/raw/**/*.gz"])
    assert [f.path for f in deep] == _fsspec_glob(f"{bucket}/raw/**/*.gz")
    assert all(inputs.identify(f.path) == f for f in deep)


def test_the_listing_is_read_as_it_is_consumed(bucket, s3_endpoint, monkeypatch):
    monkeypatch.setattr(store_glob, "PAGE_KEYS", 4)
    _fill(bucket, [f"in/part-{i:02d}.gz" for i in range(12)])
    with answered(s3_endpoint) as first:
        found = store_glob.iter_glob(f"{bucket}/in/part-*.gz")
        assert next(found)[0] == f"{bucket}/in/part-00.gz"
    assert len(first) == 1 and first[0].query["prefix"] == "in/part-"  # the pattern's literal start
    with answered(s3_endpoint) as rest:
        assert len(list(found)) == 11
    assert [r.operation for r in rest] == ["ListObjectsV2"] * 2


def test_spilled_runs_carry_each_object_once_with_its_identity(bucket, monkeypatch):
    monkeypatch.setattr(inputs, "NAME_RUN_BYTES", 2_000)  # a run of about 8 lines: several spilled
    _fill(bucket, [f"in/{d}/part-{i:02d}.gz" for d in "ba" for i in range(20)])
    patterns = [f"{bucket}/in/b/*.gz", f"{bucket}/in/*/part-0*.gz", f"{bucket}/in/a/*"]
    listed = inputs.list_inputs(patterns)
    expected = sorted(set(_fsspec_glob(patterns[0]) + _fsspec_glob(patterns[1]) + _fsspec_glob(patterns[2])))
    assert [f.path for f in listed] == expected and len(expected) == 40
    assert listed == [inputs.identify(f.path) for f in listed]


def test_a_pattern_that_matches_nothing_in_a_bucket_names_it(bucket):
    _fill(bucket, ["raw/a.gz"])
    for missing in (f"{bucket}/raw/*.jsonl", f"{bucket}/raw/b.gz", f"{bucket}/nothing/*"):
        with pytest.raises(inputs.InputError, match=re.escape(f"input '{missing}' matches no file")):
            inputs.list_inputs([missing])
    assert store_glob.glob(f"{bucket}/raw/a.gz") == [f"{bucket}/raw/a.gz"]  # a plain name: that object


def _read_step(listed: inputs.InputFile, source: str) -> dict:
    step = build.ReadAndClean(default_config(), 16, None)
    step.setup()
    out = list(step.process((0, [(listed, source)])))  # (index, [(file, source)]), as the GroupByKey hands them
    [(_, row)] = [o.value for o in out if getattr(o, "tag", None) == build.FILES]
    return row


def test_a_read_is_checked_against_its_listing_with_one_head(bucket, s3_endpoint):
    first, second = "가나다라마바사 정말 좋아요\n".encode(), "하나다라마바사 정말 좋아요\n".encode()
    assert len(first) == len(second)  # the size alone cannot tell them apart
    storage.write_bytes(f"{bucket}/in/r.txt", first)
    [listed] = inputs.list_inputs([f"{bucket}/in/*.txt"])
    with answered(s3_endpoint) as requests:
        row = _read_step(listed, "r.txt")
    assert "changed" not in row and row["bytes"] == len(first)
    assert sorted(r.operation for r in requests) == ["GetObject", "HeadObject"]  # the open's HEAD only
    storage.write_bytes(f"{bucket}/in/r.txt", second)  # replaced after the listing, before the read
    row = _read_step(listed, "r.txt")
    assert "checksum changed" in row["changed"] and listed.identity in row["changed"]


def test_a_slow_listing_says_how_far_it_got_and_a_quick_one_says_nothing(bucket, monkeypatch, capsys):
    _fill(bucket, [f"in/part-{i:02d}.gz" for i in range(10)])
    inputs.list_inputs([f"{bucket}/in/*.gz"])
    assert "listing" not in capsys.readouterr().err  # under LISTING_LINE_S: no line
    monkeypatch.setattr(inputs, "LIST_BATCH", 3)
    monkeypatch.setattr(inputs, "LISTING_LINE_S", 0.0)  # every batch is "slow"
    assert len(inputs.list_inputs([f"{bucket}/in/*.gz"])) == 10
    lines = [line for line in capsys.readouterr().err.splitlines() if "corpus: list" in line]
    assert [line.split(": ", 2)[2].split(" files")[0] for line in lines[:-1]] == ["3", "6", "9"]
    assert lines[-1].startswith("[kolectra] corpus: listed 10 input files in ")


def test_a_key_with_glob_characters_is_that_object_and_a_folder_is_named(bucket, s3_endpoint):
    # as on a local disk: an existing literal path wins over its reading as a glob (data[1].txt was
    # read as data1.txt, q?.txt as q?.txt and qa.txt), and a folder is refused with the glob to use
    # (it was taken as an empty input file)
    _fill(bucket, ["raw/data[1].txt", "raw/data1.txt", "raw/q?.txt", "raw/qa.txt", "raw/s*.txt", "raw/sa.txt",
                   "raw/sub/a.txt"])
    for key in ("raw/data[1].txt", "raw/q?.txt", "raw/s*.txt"):
        with answered(s3_endpoint) as requests:
            listed = inputs.list_inputs([f"{bucket}/{key}"])
        assert [f.path for f in listed] == [f"{bucket}/{key}"], key
        assert listed == [inputs.identify(f"{bucket}/{key}")]
        assert "ListObjectsV2" not in {r.operation for r in requests}
    assert [f.path for f in inputs.list_inputs([f"{bucket}/raw/data[12].txt"])] == [f"{bucket}/raw/data1.txt"]
    for folder in ("raw", "raw/", "raw/sub"):
        with pytest.raises(inputs.InputError, match=re.escape(f"is a folder in the store: name its objects with a "
                                                              f"glob, --input '{bucket}/{folder.rstrip('/')}/*'")):
            inputs.list_inputs([f"{bucket}/{folder}"])
    # any fsspec store, not only a bucket
    import fsspec

    memory = fsspec.filesystem("memory")
    memory.pipe("/hT-inputs/data[1].txt", b"x\n")
    memory.pipe("/hT-inputs/data1.txt", b"yy\n")
    try:
        assert [f.path for f in inputs.list_inputs(["memory://hT-inputs/data[1].txt"])] == \
            ["memory://hT-inputs/data[1].txt"]
    finally:
        memory.rm("/hT-inputs", recursive=True)
