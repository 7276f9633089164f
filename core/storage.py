"""Where kolectra's files live: a local path or an object-store URL (``s3://``, ``gs://``, ...).

Every byte the artifact store, the Beam jobs and the trainers read or write away from the local
disk goes through here, on `fsspec <https://filesystem-spec.readthedocs.io>`_ (s3fs for S3 and
S3-compatible servers, gcsfs for GCS, any other fsspec protocol as it is for inputs; a store
*root* is on S3 or GCS only, :func:`check_root`). Why fsspec rather than pyarrow.fs or Beam's
``FileSystems``:

- it is the layer the rest of the stack already speaks (``datasets``, ``huggingface_hub``,
  pyarrow and torch accept its file objects), and it needs no Beam import, so ``kolectra
  artifacts list`` on a bucket stays light;
- s3fs and gcsfs take credentials and endpoints from the standard environment (botocore's
  chain: ``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, profiles and
  instance roles; google-auth's ``GOOGLE_APPLICATION_CREDENTIALS`` and metadata server), so the
  same command works against a cloud bucket or a local S3-compatible server;
- the stores' conditional writes are reachable through it (S3 ``If-None-Match``/``If-Match``,
  GCS generation preconditions), which the publish protocol needs: pyarrow.fs and Beam's
  ``FileSystems`` expose neither.

A store failure (an unreachable endpoint, missing or refused credentials, a missing bucket) is a
:class:`StoreError`: one line naming the URL and what to check, never a traceback.

Writes that the store arbitrates between concurrent writers (a lease, a manifest published once)
are :mod:`core.conditional`'s. What a location names, told from its text alone (:func:`is_url`,
:func:`scheme`, :func:`local_path`, :func:`join`, and the store URL a one-slash ``s3:/bucket/x`` was meant
to be: ``one_slash_url``, ``one_slash_problem``) is :mod:`core.locations`'s, re-exported here. On this
module sit: one object's info and age (:mod:`core.store_objects`), many objects' infos at once
(:mod:`core.object_infos`), a glob a listing page at a time (:mod:`core.store_glob`) and a folder uploaded
as a whole (:mod:`core.folder_uploads`).

A key read from a store is data: before it names a local file it is checked as a manifest entry
is (:func:`local_target`), so an object named ``out/../../.bashrc`` is refused, not written.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
from pathlib import Path
from typing import IO, Any, Iterator

from kolectra.core import stoppable
from kolectra.core.errors import EnvironmentProblem
from kolectra.core.keys import relative_path_problem
from kolectra.core.locations import is_url, join, local_path, one_slash_problem, one_slash_url, scheme  # noqa: F401
from kolectra.core.store_clients import GCS_OPEN_SECONDS, client_options, endpoint_and_retries

_CHUNK = 1 << 20
# the protocol extra that installs each store's fsspec implementation
EXTRAS = {"s3": "kolectra[s3]", "s3a": "kolectra[s3]", "gs": "kolectra[gcs]", "gcs": "kolectra[gcs]"}
# the stores a root (and a recorded parent) may live on: those whose conditional writes the publish
# protocol uses (docs/scale.md); other fsspec protocols (ftp, http, hdfs, ...) have none
ROOT_SCHEMES = ("s3", "s3a", "gs", "gcs")


class StoreError(EnvironmentProblem):
    """An object store refused or could not be reached; the message names the URL and what to check."""


class PreconditionFailed(Exception):
    """A conditional write found the object already there (or changed since it was read)."""


def check_root(url: str) -> None:
    """Refuse, in one line, a store root on a protocol the artifact store does not support."""
    if is_url(url) and scheme(url) not in ROOT_SCHEMES:
        raise StoreError(f"{url}: {scheme(url)}:// is not a store kolectra keeps artifacts on; a root is a local "
                         "directory, s3://BUCKET/PREFIX or gs://BUCKET/PREFIX")


def key_problem(key: Any) -> str | None:
    """Why a key read from a store (or a manifest) may not name a file below a directory, or None
    (the rule: :func:`kolectra.core.keys.relative_path_problem`)."""
    return relative_path_problem(key, "its directory")


def local_target(base: str | os.PathLike, key: Any, source: str = "") -> Path:
    """``base/key`` for a key read from a store, refused (StoreError) unless it stays inside ``base``
    once resolved (a symlink below ``base`` leading out counts as leaving)."""
    why = key_problem(key)
    target = Path(base) / key if why is None else None
    if target is not None and not target.resolve().is_relative_to(Path(base).resolve()):
        why = "leads out of it through a symlink"
    if why is not None:
        raise StoreError(f"{source or 'the store'}: the key {str(key)[:200]!r} {why}; refusing to write it "
                         f"under {base}")
    return target


_FILESYSTEMS: dict[str, Any] = {}


def reset() -> None:
    """Forget the filesystems made so far (the next one reads the environment again)."""
    _FILESYSTEMS.clear()


def filesystem(url: str):
    """(fsspec filesystem, path inside it) for a URL; one filesystem per protocol and process.

    Listings are not cached: the store decides from what is there *now* (a manifest that just
    appeared, a lease that just expired)."""
    proto = scheme(url)
    fs = _FILESYSTEMS.get(proto)
    if fs is None:
        import fsspec  # noqa: PLC0415 - only when a URL is used

        try:
            cls = fsspec.get_filesystem_class(proto)
        except (ImportError, ValueError) as e:
            extra = EXTRAS.get(proto)
            hint = f"pip install '{extra}'" if extra else f"install the fsspec implementation of {proto}://"
            raise StoreError(f"{url}: no filesystem for {proto}:// on this machine ({hint}): {e}") from None
        if needs := _server_arguments(cls):  # ftp://, sftp://, smb://, webhdfs://: one filesystem a server
            raise StoreError(f"{url}: kolectra does not read {proto}:// (its fsspec filesystem is made for one "
                             f"{' and '.join(needs)}, which kolectra does not pass it): download the file and name the "
                             "local copy, or put it on s3://, gs:// or an http(s):// server")
        fs = cls(use_listings_cache=False, skip_instance_cache=True, **client_options(proto))
        _FILESYSTEMS[proto] = fs
    return fs, fs._strip_protocol(url)


def _server_arguments(cls) -> list[str]:
    """The arguments a filesystem class takes without a default (FTP's ``host``): made without them, a
    TypeError was an internal error (and the half-made object's ``__del__`` printed a traceback)."""
    import inspect  # noqa: PLC0415

    try:
        params = inspect.signature(cls.__init__).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.name != "self" and p.default is p.empty
            and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def describe_failure(url: str, e: BaseException) -> str:
    """One line for a store failure: what failed and what to check."""
    text = str(e).splitlines()[0][:240] if str(e) else type(e).__name__
    name = type(e).__name__
    if "Could not connect" in text or "Connect" in name or "EndpointConnection" in name or isinstance(
            e, (ConnectionError, TimeoutError)):
        return f"{url}: cannot reach the store{endpoint_and_retries(scheme(url))}: {text}"
    # gcsfs, finding no credentials, asks anonymously: a private bucket answers "Anonymous caller ..."
    if ("NoCredentials" in name or "Unable to locate credentials" in text or "DefaultCredentialsError" in name
            or text.startswith("Anonymous caller")):
        return (f"{url}: no credentials found (S3: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or a profile; "
                f"GCS: GOOGLE_APPLICATION_CREDENTIALS): {text}")
    # S3's codes, or its words for them where the client kept only the message (s3fs's PermissionError)
    if any(w in text for w in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "invalid_grant",
                               "signature we calculated does not match", "Access Key Id you provided does not exist")):
        return f"{url}: the store refused the credentials (check the access key and secret): {text}"
    if "NoSuchBucket" in text or "bucket does not exist" in text.lower():
        return f"{url}: the bucket does not exist (create it first, or check the name): {text}"
    if isinstance(e, PermissionError) or "AccessDenied" in text or "403" in text or "Forbidden" in text:
        return f"{url}: permission refused by the store (the credentials may not read or write here): {text}"
    return f"{url}: {name}: {text}"


@contextlib.contextmanager
def translated(url: str) -> Iterator[None]:
    """Turn what a store library raises into one :class:`StoreError` line. FileNotFoundError,
    FileExistsError and :class:`PreconditionFailed` pass: callers decide what they mean."""
    try:
        yield
    except (FileNotFoundError, FileExistsError, PreconditionFailed, StoreError, KeyboardInterrupt):
        raise
    except Exception as e:  # noqa: BLE001 - whatever the store's client raises becomes one StoreError
        raise StoreError(describe_failure(url, e)) from None


def check_bucket(url: str) -> None:
    """Refuse a root whose bucket is missing or unreadable, in one line, before anything is built."""
    check_root(url)
    fs, path = filesystem(url)
    bucket = path.split("/", 1)[0]
    if not bucket:
        raise StoreError(f"{url!r} names no bucket: give the root as {scheme(url)}://BUCKET/PREFIX")
    with translated(url):
        try:
            found = _s3_bucket_found(fs, path) if scheme(url) in ("s3", "s3a") else _gcs_bucket_found(fs, path)
        except FileNotFoundError:
            found = False
    if not found:
        raise StoreError(f"{url}: the bucket {bucket!r} does not exist (create it first, or check the name)")


def _s3_bucket_found(fs, path: str) -> bool:
    """Whether the bucket of ``path`` (``bucket/prefix``) is there: a HEAD of the bucket, or where
    that is refused, a one-key listing of the prefix. A HEAD needs ``s3:ListBucket`` on the whole
    bucket, which credentials confined to a prefix (an ``s3:prefix`` condition, a shared bucket's
    usual grant) are refused, though they list, read and write all the store does."""
    bucket, _, prefix = path.partition("/")
    try:
        return bool(fs.call_s3("head_bucket", Bucket=bucket))
    except PermissionError:
        prefix = prefix.strip("/")
        fs.call_s3("list_objects_v2", Bucket=bucket, Prefix=f"{prefix}/" if prefix else "", MaxKeys=1)
        return True


def _gcs_bucket_found(fs, path: str) -> bool:
    """Whether the bucket of ``path`` is there: a one-object listing of the root's prefix (404: no
    such bucket). Not a GET of the bucket: that needs ``storage.buckets.get``, which the object roles
    (``roles/storage.objectAdmin``, ``objectUser``: a service account's usual grant on one bucket) do
    not give; gcsfs then lists the bucket, and an empty one (a new root's) read as missing."""
    bucket, _, prefix = path.partition("/")
    prefix = prefix.strip("/")
    try:  # timeout: fsspec's bound on the whole call, gcsfs's retries in it
        fs.call("GET", "b/{}/o", bucket, prefix=f"{prefix}/" if prefix else None, maxResults=1, json_out=True,
                timeout=GCS_OPEN_SECONDS)
    except TimeoutError:  # fsspec's FSTimeoutError: gcsfs still retrying
        raise TimeoutError(f"no answer within {GCS_OPEN_SECONDS} s") from None
    return True


# ---- reading and writing --------------------------------------------------------------------------
def open_file(location: str, mode: str = "rb", cache_type: str | None = None, block_size: int | None = None) -> IO:
    """A file object on a local path or a URL (binary modes). ``cache_type``: fsspec's cache of a
    URL's reads (default: the filesystem's, s3fs's one read-ahead region of 50 MB); ``block_size``: the
    bytes a request reads ahead (default: the filesystem's, s3fs's 50 MB)."""
    if not is_url(location):
        return open(local_path(location), mode)  # noqa: SIM115 - the caller closes it
    fs, path = filesystem(location)
    options = {k: v for k, v in (("cache_type", cache_type), ("block_size", block_size)) if v}
    with translated(location):
        return fs.open(path, mode, **options)


@contextlib.contextmanager
def writing(location: str) -> Iterator[IO]:
    """A file written to ``location`` (binary) a piece at a time, whose bytes land only if the block ends
    without an exception. fsspec's files upload what they hold when closed, whatever closed them: a
    stop or failure mid-write left a truncated object under the key, over the one there before (a
    ``--force`` rebuild of a corpus in place: a shard of the published copy, which its manifest then
    listed with other bytes). A local file is closed as it stands (a build's own directory)."""
    f = open_file(location, "wb")
    try:
        yield f
    except BaseException:
        if is_url(location):
            try:
                with contextlib.suppress(Exception):
                    f.discard()  # s3fs: the multipart upload begun is aborted; gcsfs: the resumable one cancelled
            finally:  # a second Ctrl-C in that request too: else close(), or the file's collection, uploads it
                f.closed = True
        f.close()
        raise
    try:
        f.close()
    except BaseException:
        # the closing upload stopped (a Ctrl-C as it sent the last part or completed, the store refusing it):
        # the object there before stays (or the whole one landed), but a multipart upload begun stayed too,
        # unlisted and billed for its parts until aborted (aborting one completed changes nothing)
        if is_url(location):
            with contextlib.suppress(Exception):
                f.discard()
        raise


def write_bytes(location: str, data: bytes) -> dict:
    """Write ``data`` (whole) and return its entry: ``bytes`` and ``sha256``, computed where it is
    written, so whoever seals an artifact need not read it back."""
    if is_url(location):
        fs, path = filesystem(location)
        with translated(location):
            _transfer(fs, "pipe_file", path, location, data)
    else:
        path = local_path(location)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


# Reads of an object that is rewritten meanwhile: s3fs pins the ETag it saw when opening and raises
# FileExpired if the object changed before the read (a lease renewed by its holder while a waiting run
# reads it, every third of the lease's life). Reading again gives the new object.
REREADS = 3


def _changed_while_read(e: BaseException) -> bool:
    return type(e).__name__ == "FileExpired"  # s3fs.utils.FileExpired (an OSError, errno EBUSY)


class TooLarge(ValueError):
    """An object larger than the bound its reader gave (a manifest, a lease)."""


def _first_bytes(location: str, n: int) -> bytes | None:
    """Up to ``n`` bytes from the start of a store's object in one ranged GET (opening it asks for
    its size first: a HEAD more); None for an empty object, which refuses any range (HTTP 416)."""
    fs, path = filesystem(location)
    with translated(location):
        try:
            return fs.cat_file(path, start=0, end=n)
        except OSError as e:
            if e.errno == errno.EINVAL or "416" in str(e) or "range" in str(e).lower():
                return None
            raise
        except Exception as e:
            if getattr(e, "code", None) == 416:  # gcsfs's HttpError, no OSError
                return None
            raise


def read_bytes(location: str, limit: int | None = None) -> bytes:
    """The whole object or file; an object rewritten between opening and reading is read again.
    With ``limit``, one of more bytes is refused (:class:`TooLarge`) without reading it all (on a
    store in one request: a manifest read is one GET)."""
    if limit is not None and is_url(location) and (data := _first_bytes(location, limit + 1)) is not None:
        if len(data) > limit:
            raise TooLarge(f"{location}: larger than {limit:,} bytes")
        return data
    for attempt in range(REREADS):
        try:
            with open_file(location) as f:
                data = f.read() if limit is None else f.read(limit + 1)
            if limit is not None and len(data) > limit:
                raise TooLarge(f"{location}: larger than {limit:,} bytes")
            return data
        except OSError as e:
            if attempt + 1 < REREADS and _changed_while_read(e):
                continue
            raise


def exists(location: str) -> bool:
    if not is_url(location):
        return os.path.exists(local_path(location))
    fs, path = filesystem(location)
    with translated(location):
        return fs.exists(path)


def names_no_object(location: str, bucket: str, key: str) -> bool:
    """Whether ``location`` cannot name an object: a folder marker, or a bucket with no key."""
    return _marker(location) or (scheme(location) in ROOT_SCHEMES and not (bucket and key))


def info(location: str) -> dict:
    """``size`` and, on stores, the store's checksum (``ETag``, ``md5Hash``/``crc32c``)."""
    if not is_url(location):
        st = os.stat(local_path(location))
        return {"size": st.st_size, "type": "directory" if os.path.isdir(local_path(location)) else "file",
                "mtime_ns": st.st_mtime_ns}
    fs, path = filesystem(location)
    with translated(location):
        return fs.info(path)


def checksum_of(found: dict) -> str | None:
    """The store's own checksum of an object from its listing or info (S3 ETag, GCS md5/crc32c)."""
    for key in ("ETag", "generation", "etag", "md5Hash", "crc32c", "checksum"):
        if found.get(key):
            return str(found[key]).strip('"')
    return None


def _marker(name: str) -> bool:
    """Whether a key is a folder marker: a key ending in ``/`` (the zero-byte objects that S3's and
    GCS's consoles, FUSE mounts and Hadoop's s3a make for a folder), which no file can be."""
    return name.endswith("/")


def listing(prefix: str) -> dict[str, dict]:
    """Every object under ``prefix`` (recursively): relative path -> its info (size, checksum).
    Folders and folder markers are none (a local root lists no directory either). On S3 one listing of
    the keys below it: s3fs's own finding nothing there asked for ``prefix`` itself as an object (a HEAD,
    then a listing more), which nothing here reads (``export --to``'s check then asked again)."""
    fs, path = filesystem(prefix)
    parent, _, last = path.rstrip("/").rpartition("/")
    with translated(prefix):
        try:
            if scheme(prefix) in ("s3", "s3a") and parent and last:
                found = fs.find(parent, detail=True, prefix=f"{last}/")  # the keys that begin LAST/ under the parent
            else:
                found = fs.find(path.rstrip("/") + "/", detail=True)
        except FileNotFoundError:
            return {}
    base = path.rstrip("/") + "/"
    return {name[len(base):]: meta for name, meta in found.items() if name.startswith(base) and meta.get("type") != "directory"
            and not _marker(name) and not _marker(str(meta.get("Key", "")))}


def children(prefix: str) -> list[str]:
    """The names directly under ``prefix`` (objects and common prefixes; not the folder marker of
    ``prefix`` itself)."""
    fs, path = filesystem(prefix)
    with translated(prefix):
        try:
            found = fs.ls(path.rstrip("/"), detail=False)
        except FileNotFoundError:
            return []
    return sorted({p.rstrip("/").rsplit("/", 1)[-1] for p in found if p.rstrip("/") != path.rstrip("/")})


def remove(location: str, recursive: bool = False) -> None:
    fs, path = filesystem(location)
    with translated(location), contextlib.suppress(FileNotFoundError):
        fs.rm(path, recursive=recursive)


def sha256_stream(location: str) -> tuple[int, str]:
    """(bytes, sha256) of what is stored at ``location``, streamed: nothing written to disk."""
    h, n = hashlib.sha256(), 0
    with open_file(location) as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
            n += len(chunk)
    return n, h.hexdigest()


def download(location: str, dest: str, expect_sha256: str | None = None) -> str:
    """Copy one object to a local file (via ``dest.part``), hashing on the way; refuse it (leaving
    nothing at ``dest``) when ``expect_sha256`` differs. Returns the sha256."""
    part = dest + ".part"
    os.makedirs(os.path.dirname(dest) or ".", exist_ok=True)
    h = hashlib.sha256()
    try:
        with open_file(location) as src, open(part, "wb") as out:
            with translated(location):
                while chunk := src.read(_CHUNK):
                    h.update(chunk)
                    out.write(chunk)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(part)
        raise
    if expect_sha256 is not None and h.hexdigest() != expect_sha256:
        os.unlink(part)
        # on a store root a --force rebuild writes its objects over the published copy's, its manifest last: a
        # reader holding the old manifest meets the new objects while it runs (the mix is never used)
        raise StoreError(f"{location}: sha256 differs from the manifest, not used: altered after publishing, or a "
                         "--force rebuild is replacing the artifact now (run again once it has published; `kolectra "
                         "artifacts verify` names every object that differs)")
    os.replace(part, dest)
    return h.hexdigest()


def upload(src: str, location: str) -> None:
    fs, path = filesystem(location)
    with translated(location):
        _transfer(fs, "put_file", path, location, src)


def _transfer(fs, method: str, path: str, location: str, source) -> None:
    """``fs.<method>`` (put_file: ``source`` a local path; pipe_file: its bytes) to ``path``, which a stop
    really stops (:mod:`kolectra.core.stoppable`: fsspec's wait let the upload go on in its thread)."""
    import fsspec.asyn  # noqa: PLC0415 - only when a URL is used

    args = (source, path) if method == "put_file" else (path, source)
    if not isinstance(fs, fsspec.asyn.AsyncFileSystem) or fs.asynchronous:
        getattr(fs, method)(*args)
        return
    bucket, _, key = path.partition("/")
    stoppable.run(fs, getattr(fs, "_" + method)(*args), (bucket, key) if scheme(location) in ("s3", "s3a") else None,
                  location)
