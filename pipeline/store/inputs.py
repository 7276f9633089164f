"""An artifact's raw-input records (the manifest's ``inputs``): in the manifest, or past
:data:`INPUTS_INLINE` in a file of the artifact.

A corpus request has one record per input file (path, bytes, identity, sha256: ``corpus/inputs.py``),
about 320 bytes each as the manifest's indented JSON, and every child stage reads the manifest with
one read of at most ``MAX_MANIFEST`` (64 MiB): inline, a manifest would grow with the corpus and be
refused past about 210,000 files (docs/scale.md). So:

- up to :data:`INPUTS_INLINE` records the manifest holds them all under ``inputs``, byte for byte as
  it always has;
- past it the store writes them to :data:`INPUTS_FILE` in the artifact, one JSON object a line in
  the request's order, before the directory is hashed: ``files`` lists it, so ``digest`` covers it and
  ``verify`` re-hashes it as any file. The manifest keeps the first :data:`INPUTS_HEAD` under
  ``inputs`` (what ``show`` and the lineage print), their number ``inputs_count`` and ``inputs_file``
  (the file's path, bytes and sha256, so ``fields_digest`` covers the list as it did inline).

Readers take :func:`shown` (the records the manifest holds, and how many there are in all) or
:func:`records` (every record, streamed from the file a line at a time, never held as a list).
The request id never depended on where the records are kept (``Request.id``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterator, Sequence

from kolectra.pipeline.store.manifest import ArtifactError, write_whole

INPUTS_INLINE = 10_000  # records a manifest holds itself: 3 MB of it (docs/scale.md)
INPUTS_HEAD = 20  # records it keeps past that, for `kolectra artifacts show` and the lineage
INPUTS_FILE = "inputs.jsonl"  # the store's file, beside the stage's (a stage may not write one)


def spills(inputs: Sequence[dict]) -> bool:
    """Whether a request's records go to :data:`INPUTS_FILE` rather than into the manifest."""
    return len(inputs) > INPUTS_INLINE


def line(record: dict) -> bytes:
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def write(inputs: Sequence[dict], directory: Path) -> dict:
    """Write the records to ``directory / INPUTS_FILE`` (a line each, flushed to disk, renamed into
    place) and return its file entry: path, bytes and sha256 (of the bytes written, not read back)."""
    return {"path": INPUTS_FILE, **write_whole(Path(directory) / INPUTS_FILE, map(line, inputs))}


def fields(inputs: Sequence[dict], files: list[dict]) -> dict:
    """The manifest's input fields: every record, or past :data:`INPUTS_INLINE` the first
    :data:`INPUTS_HEAD`, their count and :data:`INPUTS_FILE`'s entry in ``files``."""
    if not spills(inputs):
        return {"inputs": list(inputs)}
    entry = next((e for e in files if e["path"] == INPUTS_FILE), None)
    if entry is None:
        raise ArtifactError(f"{len(inputs):,} input records and no {INPUTS_FILE} among the files to seal")
    return {"inputs": list(inputs[:INPUTS_HEAD]), "inputs_count": len(inputs),
            "inputs_file": {k: entry[k] for k in ("path", "bytes", "sha256")}}


def shown(manifest: dict) -> tuple[list[dict], int]:
    """The records the manifest holds (all of them, or the first :data:`INPUTS_HEAD`) and how many
    the artifact has in all."""
    inline = manifest.get("inputs", [])
    return inline, manifest.get("inputs_count", len(inline))


def records(path: Any, manifest: dict) -> Iterator[dict]:
    """Every input record of the artifact at ``path`` (a directory or a store prefix), in order: the
    manifest's, or :data:`INPUTS_FILE`'s read a line at a time. The file is hashed as it is read: one
    that no longer matches the manifest (its sha256 or its count) ends the read with ArtifactError."""
    spec = manifest.get("inputs_file")
    if spec is None:
        yield from manifest.get("inputs", [])
        return
    where, h, count = path / spec["path"], hashlib.sha256(), 0
    with where.open("rb") as f:
        for count, data in enumerate(f, 1):
            h.update(data)
            try:
                record = json.loads(data)
            except (json.JSONDecodeError, UnicodeDecodeError):
                record = None
            if not (isinstance(record, dict) and isinstance(record.get("path"), str)):
                raise ArtifactError(f"{where}: line {count} is not an input record")
            yield record
    if h.hexdigest() != spec["sha256"] or count != manifest["inputs_count"]:
        raise ArtifactError(f"{where}: changed since it was published ({count:,} records read, sha256 "
                            f"{h.hexdigest()[:12]}; the manifest says {manifest['inputs_count']:,}, {spec['sha256'][:12]})")
