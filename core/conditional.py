"""Conditional writes: the object store arbitrates between concurrent writers. The artifact
store's lease (``pipeline/store/lease.py``) and its publish protocol (``pipeline/store/remote.py``)
rest on these two calls; every other read and write is :mod:`core.storage`'s.

- :func:`create_exclusive` writes an object only if none is there, or only if the one there is
  still the version the writer read: S3's ``If-None-Match: *`` / ``If-Match`` on PUT, GCS's
  ``ifGenerationMatch``;
- :func:`remove_if` deletes an object only if it is still the writer's own version (S3
  ``If-Match`` on DELETE, GCS ``ifGenerationMatch``), so a lease taken over is never removed.

Another fsspec store has no conditional write: there both are check-then-act, which two writers in
the same moment can both win (docs/scale.md says which store guarantees what).
"""

from __future__ import annotations

import errno

# PreconditionFailed lives with storage.translated, which lets it through untranslated
from kolectra.core.storage import PreconditionFailed, checksum_of, filesystem, scheme, translated

__all__ = ["PreconditionFailed", "create_exclusive", "remove_if"]


def _target(location: str):
    """(its filesystem, its path there, the store's scheme, the bucket, the key) of an object's URL."""
    fs, path = filesystem(location)
    bucket, _, key = path.partition("/")
    return fs, path, scheme(location), bucket, key


def remove_if(location: str, version: str) -> bool:
    """Delete the object at ``location`` only if it is still version ``version`` (its checksum, as
    :func:`create_exclusive` returned it): S3 ``If-Match`` on DELETE, GCS ``ifGenerationMatch``; on
    another store checked, then deleted. Whether it was deleted."""
    fs, path, proto, bucket, key = _target(location)
    with translated(location):
        try:
            if proto in ("s3", "s3a"):
                fs.call_s3("delete_object", Bucket=bucket, Key=key, IfMatch=f'"{version}"')
            elif proto in ("gs", "gcs"):
                _gcs_client().bucket(bucket).blob(key).delete(if_generation_match=int(version))
            elif checksum_of(fs.info(path)) == version:
                fs.rm(path)
            else:
                return False
        except FileNotFoundError:
            return False
        except OSError as e:
            if e.errno in (errno.EINVAL, errno.EEXIST) and "condition" in str(e).lower():
                return False
            raise
        except Exception as e:
            # google.api_core.exceptions: another version there (412), or none at all (404: removed meanwhile)
            if type(e).__name__ in ("PreconditionFailed", "NotFound"):
                return False
            raise
    fs.invalidate_cache()
    return True


def create_exclusive(location: str, data: bytes, replacing: str | None = None) -> str | None:
    """Write ``data`` only if no object is there (``replacing=None``) or only if the object there
    still has the checksum ``replacing``: the store arbitrates between concurrent writers.

    Returns the new object's checksum; raises :class:`PreconditionFailed` when another writer got
    there first. S3 (and S3-compatible servers that implement it) uses ``If-None-Match: *`` /
    ``If-Match``; GCS ``ifGenerationMatch``. Another store has no conditional write here: its
    lease is taken by check-then-write, which two writers within the same moment can both win
    (docs/scale.md says which store guarantees what)."""
    fs, path, proto, bucket, key = _target(location)
    with translated(location):
        try:
            if proto in ("s3", "s3a"):
                cond = {"IfNoneMatch": "*"} if replacing is None else {"IfMatch": f'"{replacing}"'}
                out = fs.call_s3("put_object", Bucket=bucket, Key=key, Body=data, **cond)
                return str(out.get("ETag", "")).strip('"') or None
            if proto in ("gs", "gcs"):  # google-cloud-storage, which gcsfs installs: generation preconditions
                return _gcs_create(path, data, replacing)
            if replacing is None and fs.exists(path):
                raise PreconditionFailed(location)
            fs.pipe_file(path, data)
            return checksum_of(fs.info(path))
        except FileExistsError:
            raise PreconditionFailed(location) from None
        except OSError as e:
            if e.errno in (errno.EINVAL, errno.EEXIST) and "condition" in str(e).lower():
                raise PreconditionFailed(location) from None
            raise


def _gcs_client():
    """google-cloud-storage's client, with Application Default Credentials (gcsfs's default too) and
    no project: writing an object needs none, and ``Client()`` refuses to start where none is set
    (``GOOGLE_CLOUD_PROJECT``, the credentials, gcloud's config), as for a user's own credentials
    from ``gcloud auth application-default login``."""
    from google.cloud import storage as gcs  # noqa: PLC0415 - installed with gcsfs

    return gcs.Client(project=None)


def _gcs_create(path: str, data: bytes, replacing: str | None) -> str:
    """GCS: ``ifGenerationMatch=0`` creates only if absent, ``=<generation>`` replaces only that
    version; the object's version is its generation (what :func:`checksum_of` reads for GCS)."""
    from google.api_core import exceptions  # noqa: PLC0415 - installed with gcsfs

    bucket, _, key = path.partition("/")
    blob = _gcs_client().bucket(bucket).blob(key)
    try:
        blob.upload_from_string(data, if_generation_match=0 if replacing is None else int(replacing))
    except exceptions.PreconditionFailed:
        raise PreconditionFailed(f"gs://{path}") from None
    return str(blob.generation)
