"""Opening a root: the one module that knows both stores, a local directory (:class:`.artifacts.Store`,
read side :class:`.catalog.Catalog`) and an object-store URL (:class:`.remote.RemoteStore`).

Nothing in the store imports this module; it hands every catalog it opens itself as the way to open
another root (a parent kept elsewhere), so a local root follows a parent in a bucket and back.
"""

from __future__ import annotations

from pathlib import Path

from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.catalog import Catalog
from kolectra.pipeline.store.roots import as_root, default_root


def open_store(root: Path | str | None = None) -> Store:
    """The store of ``root``: a local directory or an object-store URL (``s3://``, ``gs://``)."""
    from kolectra.core import storage  # noqa: PLC0415 - as in catalog.py: not on the light commands' path

    root = default_root() if root is None else as_root(root)
    if storage.is_url(str(root)):
        storage.check_bucket(str(root))
        return _remote(str(root))
    return Store(root, catalogs=catalog_for)


def catalog_for(root: Path | str) -> Catalog:
    """The catalog of a root: a local directory, or a store URL."""
    from kolectra.core import storage  # noqa: PLC0415

    return _remote(str(root)) if storage.is_url(str(root)) else Catalog(root, catalogs=catalog_for)


def _remote(url: str) -> Store:
    from kolectra.pipeline.store.remote import RemoteStore  # noqa: PLC0415 - s3fs/gcsfs only for store roots

    return RemoteStore(url, catalogs=catalog_for)
