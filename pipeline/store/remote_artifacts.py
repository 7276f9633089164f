"""Reading a published artifact in an object store (``s3://``, ``gs://``, ...): its manifest, checked
and against its place (:func:`load_remote`), and its objects against that manifest (:func:`remote_problems`:
one listing, or every object streamed through sha256). The store itself, with its publish protocol, is
:mod:`.remote`, which reads artifacts through these."""

from __future__ import annotations

from kolectra.core import storage
from kolectra.core.stage import progress
from kolectra.pipeline.store import layout
from kolectra.pipeline.store.catalog import Artifact
from kolectra.pipeline.store.manifest import (
    MANIFEST,
    MAX_MANIFEST,
    ArtifactError,
    digest,
    fields_problem,
    files_problem,
    misplaced,
    parse_manifest,
)


def upath(url: str):
    from upath import UPath  # noqa: PLC0415 - only for store roots

    # listings not cached, as in core/storage.py: a prefix is read as it is now, never as it was
    return UPath(url.rstrip("/"), use_listings_cache=False, skip_instance_cache=True)


def load_remote(path) -> Artifact:
    """The artifact at store prefix ``path`` (a UPath): its manifest checked, and against its place."""
    url = str(path)
    try:
        text = storage.read_bytes(storage.join(url, MANIFEST), limit=MAX_MANIFEST)
    except FileNotFoundError:
        raise ArtifactError(f"{url}/{MANIFEST}: missing (incomplete artifact)") from None
    except storage.TooLarge:
        raise ArtifactError(f"{url}/{MANIFEST}: larger than {MAX_MANIFEST:,} bytes; not a manifest") from None
    manifest = parse_manifest(text, f"{url}/{MANIFEST}")
    if where := misplaced(path, manifest):
        raise ArtifactError(where)
    return Artifact(path=path, manifest=manifest)


def remote_problems(art: Artifact, content: bool) -> list[str]:
    """Every mismatch between a store artifact's manifest and its objects: one listing (sizes, and the
    checksums recorded at publishing); with ``content`` every object streamed through sha256 too."""
    url = str(art.path)
    found = storage.listing(url)
    problems = []
    read_back = 0  # objects of the quick check read because their store checksum is not the recorded one
    for entry in art.manifest["files"]:
        obj = found.get(entry["path"])
        where = f"{url}/{entry['path']}"
        if obj is None:
            problems.append(f"{where}: missing")
        elif int(obj.get("size", -1)) != entry["bytes"]:
            problems.append(f"{where}: size {obj.get('size')} != {entry['bytes']} in manifest")
        elif not content and entry.get("checksum") and storage.checksum_of(obj) != entry["checksum"]:
            # another checksum for the same bytes is a copy's (`aws s3 cp`/`sync` copy an object over 8 MB in
            # parts, any copy on GCS has a new generation), or on GCS a stopped in-place rebuild's, which wrote the
            # same bytes over the copy it kept: only such an object is read, and its bytes decide
            read_back += 1
            if storage.sha256_stream(where)[1] != entry["sha256"]:
                problems.append(f"{where}: rewritten after publishing (store checksum and sha256 differ from the "
                                "manifest)")
        elif content and storage.sha256_stream(where)[1] != entry["sha256"]:  # the bytes, whatever the checksum
            problems.append(f"{where}: sha256 differs from manifest")
    if read_back:
        progress(f"{url}: {read_back} object(s) have another store checksum than the manifest records (a copy of "
                 "the root, or a rebuild stopped after it wrote them?): read to check their bytes (sha256)")
    listed = {e["path"] for e in art.manifest["files"]}
    for rel in sorted(set(found) - listed - {MANIFEST}):
        problems.append(f"{url}/{rel}: not in manifest (added after publishing)")
    if digest(art.manifest["files"]) != art.manifest["digest"]:
        problems.append(f"{url}/{MANIFEST}: digest does not match its file list")
    if why := files_problem(art.manifest, f"{url}/{MANIFEST}"):
        problems.append(why)
    if why := fields_problem(art.manifest, f"{url}/{MANIFEST}"):
        problems.append(why)
    # what the kind must hold (pipeline/store/layout.py), as on a local root: index.json read in place
    problems += layout.missing(art.kind, art.path, art.manifest.get("stats", {}), art.manifest.get("config", {}),
                               listed)
    return problems
