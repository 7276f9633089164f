"""The roots of the artifact store, and which root a place belongs to: the default root (``$KOLECTRA_HOME``),
a root as the store takes it, the root of an artifact's store URL, the artifact folder a place lies in, and the
roots that a parent recorded in a manifest may be read from (``$KOLECTRA_PARENT_ROOTS``: a manifest is data,
so a parent on a store is followed only inside a root the user named). Functions of paths and URLs over
:mod:`kolectra.core.storage` (reading at most a manifest); :mod:`.catalog`, :mod:`.factory` and the store
(:mod:`.artifacts`, :mod:`.remote`) use them.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterable

from kolectra.core import storage, store_objects
from kolectra.pipeline.store.manifest import MANIFEST, MAX_MANIFEST, ArtifactError, parse_manifest, read_manifest


def default_root() -> Path | str:
    """``$KOLECTRA_HOME`` (a directory or a store URL such as ``s3://bucket/prefix``), else ``./artifacts``."""
    return as_root(os.environ.get("KOLECTRA_HOME", "artifacts"))


def as_root(location: str | Path) -> Path | str:
    """A root as the store takes it: a store URL stays a string (``file://`` is a local path)."""
    text = str(location)
    if storage.is_url(text):
        return text if text.endswith("://") else text.rstrip("/")  # s3:// alone is refused when opened
    return Path(storage.local_path(text))



PARENT_ROOTS = "KOLECTRA_PARENT_ROOTS"


def unfollowed(path: object, own: Iterable[Path | str]) -> str | None:
    """Why a parent that a manifest records at ``path`` is not looked for there, or None where it may be.

    A manifest is data (a root copied from elsewhere, a shared bucket): a parent recorded on a store is
    read with the user's credentials, so it is followed only inside a root the user named, never on the
    manifest's word alone: the root of the artifact itself, the command's root (``own``), or one listed
    in ``$KOLECTRA_PARENT_ROOTS`` (comma-separated roots, ``s3://bucket/prefix``; a bucket alone names
    all of it). Same scheme (``s3a`` is ``s3``, ``gcs`` is ``gs``), bucket and prefix. A local path is
    followed (it is read on this machine, with no credentials); another protocol never is."""
    if not isinstance(path, str) or "://" not in path:
        return None
    if not recorded_store(path):
        return f"recorded at {path[:200]}, a location kolectra never contacts for a manifest (not s3:// or gs://)"
    root = path.rstrip("/").rsplit("/", 2)[0]
    key = _root_key(root)
    named = [r.strip() for r in os.environ.get(PARENT_ROOTS, "").split(",") if r.strip()]
    for r in [*map(str, own), *named]:
        mine = _root_key(r)
        if key and mine and key[0] == mine[0] and (key[1] + "/").startswith(mine[1] + "/"):
            return None
    return (f"recorded in {root[:200]}, outside the roots this command reads: not fetched on a manifest's word "
            f"(the requests would carry your credentials); if you trust that root: {PARENT_ROOTS}={root[:200]}")


def _root_key(url: str) -> tuple[str, str] | None:
    """(scheme, ``bucket/prefix``) of a store root's URL, or None for a local path or a URL with an empty,
    ``.`` or ``..`` part (which names no root plainly)."""
    if not storage.is_url(url):
        return None
    where = url.split("://", 1)[1].rstrip("/")
    if not where or any(part in ("", ".", "..") for part in where.split("/")):
        return None
    return {"s3a": "s3", "gcs": "gs"}.get(storage.scheme(url), storage.scheme(url)), where


def recorded_store(url: str) -> bool:
    """Whether a parent path a manifest records as a URL may be followed: on a store kolectra keeps
    roots on (S3, GCS), never another protocol (a manifest is data: an ``http://`` parent would make
    ``verify`` contact whatever host it names)."""
    return storage.scheme(url) in storage.ROOT_SCHEMES


def artifact_around(where: str | Path) -> str | Path | None:
    """The artifact folder (of any root, on a disk or in a store) that ``where`` is or lies in: the nearest
    holding a kolectra manifest (another program's manifest.json, a web app's, is none); None if none does.
    A place to write (report --dest, export --to) there put files into a published artifact, which verify
    then found changed ('not in manifest (added after publishing)')."""
    def kolectra_manifest(folder: str | Path) -> bool:
        with contextlib.suppress(ArtifactError, OSError, ValueError):  # not one, or unreadable: not an artifact
            if not storage.is_url(str(folder)):
                return (Path(folder) / MANIFEST).is_file() and bool(read_manifest(Path(folder)))
            url = f"{folder}/{MANIFEST}"
            return store_objects.object_info(url) is not None and bool(parse_manifest(
                storage.read_bytes(url, limit=MAX_MANIFEST), url))
        return False

    if storage.is_url(str(where)):
        head, _, rest = str(where).rstrip("/").partition("://")
        parts = rest.split("/")
        folders: list[str | Path] = [f"{head}://{'/'.join(parts[:n])}" for n in range(len(parts), 1, -1)]
    else:  # the bucket's own top holds no artifact; on a disk every folder up to /
        place = Path(storage.local_path(where)).expanduser().resolve()
        folders = [place, *place.parents]
    return next((f for f in folders if kolectra_manifest(f)), None)


def store_root_of(url: str) -> str:
    """The root of the artifact at store URL ``url`` (``ROOT/KIND/NAME-ID``), or an ArtifactError in one
    line when ``url`` is too short to be one: ``s3://bucket/x`` or a root itself has no root to open (read
    as the local folder ``s3:/``, whose catalog sent the URL back here until Python's recursion limit)."""
    root = url.rstrip("/").rsplit("/", 2)[0]
    if not storage.is_url(root) or not root.split("://", 1)[1]:
        raise ArtifactError(f"{url}: not an artifact's URL: an artifact in a store is ROOT/KIND/NAME-ID "
                            "(s3://BUCKET/PREFIX/checkpoint/NAME-ID; kolectra artifacts list --out ROOT shows them)")
    return root
