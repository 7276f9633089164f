"""The corpus job's list of input files, as its graph gets it (a file, not values in the graph),
and the job's rows for those files joined back onto the request's records.

Beam's ``Create`` pickles its values into the submitted graph (an ``Impulse`` and a ``FlatMap``
over the encoded list: ``apache_beam/transforms/core.py``), so a ``Create`` of every input file made
the job grow with the file count (3.2 MB at 100,000 synthetic crawl paths, 31 MB at 1 M), past
what Dataflow takes (a graph of at most 10 MB, a request of 20 MB:
https://cloud.google.com/dataflow/docs/request-quotas), and the launcher held the encoded list,
its pickle and the graph's proto at once while building it. Now :func:`write` streams the listing
to a gzipped JSON-lines file where the workers can read it (``corpus/build.py`` decides where),
one line a file in the order of the files' source names, and the graph holds its location alone;
:func:`read` yields ``(rank, (InputFile, source))`` a line at a time, the elements the ``Create``
gave (a file's rank is its place among the source names, near-dup's compact ids).

After the job, :func:`fill_sha256` gives each of the request's records the sha256 of the bytes the
job read, from ``stats/files.jsonl`` (rows in name order): a merge of the two streams, where a
table of every file's sha256 by name held 151 bytes a file (15 MB at 100,000 files). The listing
and the records may be files read again at each pass (``corpus.inputs.Files`` over the store's
``RecordFile``): then neither is held.
"""

from __future__ import annotations

import gzip
import io
import itertools
import json
import operator
import os
from typing import Callable, Collection, Iterable, Iterator

from kolectra.core import scratch, storage
from kolectra.corpus.inputs import InputFile

FILE_NAME = "inputs-listing.jsonl.gz"
_LINE = json.JSONEncoder(ensure_ascii=False)  # json.dumps with an option makes an encoder a call


def in_name_order(listed: Collection, name_of: Callable[[str], str],
                  path: Callable = operator.attrgetter("path")) -> Iterable[tuple]:
    """Each file with its source name, in the names' order. A listing comes sorted by path and a
    name is the path less the inputs' common directory, so the names are in order already and are
    worked out as they are written; only a listing that is not (a caller's own, or names that
    ``posixpath.relpath`` normalised) is sorted, held whole."""
    if all(a < b for a, b in itertools.pairwise(name_of(path(f)) for f in listed)):
        return ((f, name_of(path(f))) for f in listed)
    return sorted(((f, name_of(path(f))) for f in listed), key=operator.itemgetter(1))


def write(pairs: Iterable[tuple[InputFile, str]], location: str) -> int:
    """Write ``pairs`` (``(file, source)`` in rank order) to ``location`` (a local path, or a store
    URL through a local file), a line at a time; the number of files."""
    if storage.is_url(location):
        with scratch.temporary_directory("listing") as tmp:
            n = write(pairs, os.path.join(tmp, FILE_NAME))
            storage.upload(os.path.join(tmp, FILE_NAME), location)
            return n
    n = 0
    with gzip.open(location, "wt", encoding="utf-8", compresslevel=1) as out:
        for f, source in pairs:
            # the URL read, where the recorded path is less its credential (a worker's, not the artifact's)
            out.write(_LINE.encode([f.path, f.bytes, f.identity, source, *([f.url] if f.url else [])]) + "\n")
            n += 1
    return n


def read(location: str) -> Iterator[tuple[int, tuple[InputFile, str]]]:
    """The listing at ``location``, an element a line: ``(rank, (file, source))``."""
    with storage.open_file(location, "rb") as raw, io.TextIOWrapper(gzip.GzipFile(fileobj=raw), "utf-8") as lines:
        for rank, line in enumerate(lines):
            path, size, identity, source, *url = json.loads(line)
            yield rank, (InputFile(path, size, identity, *url), source)


def fill_sha256(records: Collection[dict], name_of: Callable[[str], str], rows: Iterable[tuple[str, dict]]) -> None:
    """Set each record's ``sha256`` from its file's row; ``records`` as listed (``path`` each): dicts
    set in place, or a store's ``RecordFile`` rewritten a line at a time; ``rows`` every file's
    ``(source, row)`` in name order (``outputs.read_file_rows``). Records listed in name order (a
    listing's, sorted by path) are merged with the rows a line at a time; others (a caller's own
    order, names ``posixpath.relpath`` normalised) through a table of the names, held whole."""
    if all(a < b for a, b in itertools.pairwise(name_of(_record_path(r)) for r in records)):
        filled = _merged(records, name_of, rows)
    else:
        filled = _by_table(records, name_of, rows)
    if hasattr(records, "rewrite"):
        records.rewrite(filled)
    else:
        for _ in filled:  # the dicts are the caller's: set where they are
            pass


def _merged(records: Iterable[dict], name_of: Callable[[str], str], rows: Iterable[tuple[str, dict]]) -> Iterator[dict]:
    for record, (source, row) in zip(records, rows, strict=True):
        if (name := name_of(record["path"])) != source:
            raise ValueError(f"stats/files.jsonl has {source!r} where the listing has {name!r}")
        record["sha256"] = row["sha256"]
        yield record


def _by_table(records: Iterable[dict], name_of: Callable[[str], str], rows: Iterable[tuple[str, dict]]) -> Iterator[dict]:
    sha256 = {}
    for name, (source, row) in zip(sorted(name_of(_record_path(r)) for r in records), rows, strict=True):
        if name != source:
            raise ValueError(f"stats/files.jsonl has {source!r} where the listing has {name!r}")
        sha256[name] = row["sha256"]
    for record in records:
        record["sha256"] = sha256[name_of(record["path"])]
        yield record


def _record_path(record: dict) -> str:
    return record["path"]
