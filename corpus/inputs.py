"""Which files a corpus request reads, and what identifies them: part of the corpus stage (called
by the orchestration before the job, and by the job's reader for every file it opens).

- :func:`list_inputs` (:func:`iter_inputs`, a file at a time) expands ``--input`` paths and globs:
  local ones as Beam's ``FileSystems.match`` does, walked a folder at a time, store URLs
  (``s3://``, ``gs://``, any fsspec protocol) through :mod:`kolectra.core.storage`, a page of the
  store's listing at a time (:mod:`kolectra.core.store_glob`), and sorts the names in spilled runs
  past :data:`NAME_RUN_BYTES`; an existing literal path wins
  over its reading as a glob (``data[1].txt`` is that file, never ``data1.txt``). Anything local
  that is not a regular file (a directory; a FIFO, device or socket, which would never end or hang
  the job), or a file whose name is not UTF-8 (it could not be recorded in the manifest), or whose
  name is not ASCII while Python decodes names otherwise than as UTF-8 (a non-UTF-8 locale), is
  refused up front, naming it (the workers open them with
  :func:`kolectra.corpus.input_reads.open_input`, which checks the kind again on what it opened).
- Each file's *identity* comes from the listing alone, with no pass over its bytes: a local file
  is its absolute path, size, modification and change time (nanoseconds); an object in a store is its
  path, size and the checksum the store keeps (GCS: MD5 or CRC32C, S3: ETag). An http(s) URL's path there
  is its recorded form, less ``user:password@`` and a signature's query parameters (``core/url_secrets.py``:
  :attr:`InputFile.path`; the URL as given, read, is :attr:`InputFile.url`, in no record). The request id is built from identities, so a 300 GB corpus is not
  read once more before the job starts.
- The content hash is taken from the bytes the job actually reads, recorded per file in
  ``stats.json`` and in the manifest; a file whose size or identity differs between the listing
  and the end of its read was changed during the run (both: :mod:`kolectra.corpus.input_reads`).
"""

from __future__ import annotations

import codecs
import dataclasses
import itertools
import json
import os
import re
import stat
import sys
import time
from typing import Collection, Iterator

from kolectra.core import object_infos, scratch, storage, store_glob, url_secrets
from kolectra.core.errors import UserInputError
from kolectra.core.stage import progress, warn
from kolectra.corpus import literals, sorted_files, suffixes
from kolectra.corpus.local_glob import translate_pattern

_SCHEME = re.compile(r"^[A-Za-z][\w+.-]*://")
NAME_RUN_BYTES = 16 << 20  # input names sorted in memory at a time (about 60,000 of 80 characters)
LIST_BATCH = 4096  # names handed to the sort at a time
# a listing that takes longer says how far it got this often (a bucket of a million objects takes
# minutes before the job's first line); a quick one says nothing
LISTING_LINE_S = 10.0


class InputError(UserInputError):
    """An input pattern matched nothing or a file cannot be listed; names the path."""


@dataclasses.dataclass(frozen=True, slots=True)  # slots: 40 bytes less a file than a __dict__
class InputFile:
    """One input file as listed before the job: ``identity`` is what the request id uses."""

    path: str
    bytes: int
    identity: str
    url: str | None = None  # where it is read, when not ``path`` (a URL with a credential: url_secrets)

    @property
    def where(self) -> str:
        """What is opened and asked of: the URL as given, ``path`` its recorded form."""
        return self.url or self.path

    def record(self) -> dict:
        """The request's input entry (``sha256`` is filled in from the bytes read, after the job)."""
        return {"path": self.path, "bytes": self.bytes, "identity": self.identity}


def is_remote(path: str) -> bool:
    return bool(_SCHEME.match(path))


def _literal(pattern: str) -> str | None:
    """``pattern`` itself when it names an existing local file (globs are for what does not exist;
    a store's objects: :mod:`kolectra.corpus.literals`)."""
    try:
        return os.path.abspath(pattern) if os.path.isfile(pattern) else None
    except Exception:  # noqa: BLE001 - let the listing report it
        return None


def _unusable(path: str) -> str | None:
    """Why a listed path cannot be an input (None: it can)."""
    if not path.isascii() and not is_remote(path) and (enc := _names_encoding()) != "utf-8":
        return (f"input {path!r}: Python reads file names as {enc} here (the locale: LC_ALL, LC_CTYPE, LANG), "
                "so a name that is not ASCII would go into the manifest and document ids spelt otherwise than under "
                "a UTF-8 locale (another corpus id, other bytes); run with PYTHONUTF8=1 or a UTF-8 locale (C.UTF-8)")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:  # os.fsdecode of a name that is not UTF-8: it cannot go into JSON
        return (f"input {path!r}: the file name is not valid UTF-8, and input names go into the manifest and "
                "document ids; rename the file (e.g. convmv -f cp949 -t utf-8) or leave it out of --input")
    name = suffixes.file_name(path).rsplit("/", 1)[-1]
    if kind := next((k for suffix, k in _NOT_ONE_STREAM if name.endswith(suffix)), None):
        return (f"input {path!r} is {kind}, which the corpus stage does not read (it would take its bytes for "
                "text): unpack or recompress it to JSONL or text files (optionally .gz, .bz2 or .zst) or Parquet "
                "files, and name those in --input")
    if whole := _compressed_parquet(name):
        return (f"input {path!r} is a Parquet file compressed whole ({whole}), which the corpus stage cannot read: "
                "Parquet's footer is at the file's end, which a compressed stream reaches only by decompressing "
                "all of it (read as text, its bytes were taken for lines); decompress it, and name the Parquet "
                "file in --input (Parquet compresses inside the file)")
    if is_remote(path):
        return None
    try:
        mode = os.stat(path).st_mode  # follows links: a link to a regular file is that file
    except OSError as e:
        return f"input {path!r}: {e.strerror or e}"
    if stat.S_ISDIR(mode):
        return (f"input {path!r} is a directory: name its files with a glob, --input '{path.rstrip('/')}/*' "
                f"(or '{path.rstrip('/')}/**' for every level below it)")
    if not stat.S_ISREG(mode):  # a FIFO or a device never ends (or ends differently each time)
        return (f"input {path!r} is {FILE_KINDS.get(stat.S_IFMT(mode), 'not a regular file')}, not a regular file: "
                "a corpus input must be a file that can be listed, sized and read to its end (copy a stream to "
                "a file first)")
    return None


def _names_encoding() -> str:
    """The codec Python decodes local file names with: UTF-8 unless the locale says otherwise and
    Python's UTF-8 mode is off (a ko_KR.EUC-KR locale read a UTF-8 리뷰.jsonl.gz as 由щ럭.jsonl.gz)."""
    return codecs.lookup(sys.getfilesystemencoding()).name


# Archives hold several files (a tar's headers and a zip's directory would become documents), and
# compressions other than suffixes.COMPRESSED are unread bytes: refused by name, before the job starts.
_NOT_ONE_STREAM = tuple((s, "an archive of several files") for s in (
    ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.zst", ".tar.xz", ".txz", ".zip", ".7z", ".rar")) + tuple(
    (s, f"compressed as {k}") for s, k in ((".xz", "xz"), (".lzma", "lzma"), (".lz4", "lz4"), (".br", "brotli")))


def _compressed_parquet(name: str) -> str | None:
    """The codec of a file name such as ``x.parquet.gz`` (None for any other name)."""
    return next((codec for suffix, codec in suffixes.COMPRESSED.items()
                 if name.endswith(suffix) and name[: -len(suffix)].endswith(suffixes.PARQUET)), None)


FILE_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a named pipe (FIFO)", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}


def expand(patterns: list[str]) -> list[str]:
    """Every file the paths/globs name, sorted and de-duplicated; a pattern matching nothing,
    something that is not a regular file or a file name that is not UTF-8 is an error naming it."""
    return list(iter_names(patterns))


def iter_names(patterns: list[str]) -> Iterator[str]:
    """:func:`expand` as a stream (see :func:`_sorted_listing`)."""
    try:
        for path, _ in _sorted_listing(patterns):
            yield path
    except InputError as e:  # it names the pattern: without its credential
        raise InputError(url_secrets.redacted(str(e))) from None


def _sorted_listing(patterns: list[str], dynamic: dict | None = None) -> Iterator[tuple[str, InputFile | None]]:
    """Every file the patterns name, once each, sorted as they come (local globs are walked a
    directory at a time, a store's listing read a page at a time), in memory up to
    :data:`NAME_RUN_BYTES` and past it in runs spilled to a temporary folder and merged
    (``corpus/sorted_files.py``), so that a million names are not held at once (a glob's list, its
    set and its sorted copy took 368 bytes a file at its peak). Each comes with its
    :class:`InputFile` when the listing already said what identifies it (a store object a glob
    found: its size and checksum; a URL named as it is: its info), else None. ``dynamic`` gets the
    URLs whose Last-Modified was each response's own time, with the two seen (None: the names are
    wanted alone, and no stamp is tested)."""
    if not patterns:
        raise InputError("no --input given")

    def checked() -> Iterator[list[tuple[str, str]]]:
        batch, n = [], 0
        started = said = time.monotonic()
        for path, known in _expanded(patterns, dynamic):
            if why := _unusable(path):
                raise InputError(why)
            # a line of the sort: the path, or with what the listing knew a JSON list (never a
            # path: those start with "/" or a scheme), in the order of the recorded paths (a URL's
            # less its credentials, url_secrets: the path itself for any other), so that two URLs
            # recorded as one come together, to be joined or refused below, whatever sorts between them
            batch.append((url_secrets.recorded(path), json.dumps([path, *known], ensure_ascii=False) if known else path))
            n += 1
            if len(batch) == LIST_BATCH:
                yield batch
                batch = []
                if (now := time.monotonic()) - said >= LISTING_LINE_S:
                    progress(f"corpus: listing the inputs: {n:,} files so far, {now - started:.0f} s")
                    said = now
        yield batch
        if said != started:
            progress(f"corpus: listed {n:,} input files in {time.monotonic() - started:.0f} s")

    last, before = None, None
    with scratch.temporary_directory("names") as spill:
        for line in sorted_files.sorted_lines(checked(), spill, NAME_RUN_BYTES):
            listed = object_file(*json.loads(line)) if line.startswith("[") else None
            path = listed.path if listed else line
            if path != last:  # one file named by two patterns is one input
                yield path, listed
                last, before = path, listed
            elif listed is not None and before is not None and listed.identity != before.identity:
                # two URLs recorded as one (url_secrets): the same object signed twice, or two objects
                raise InputError(f"inputs {before.where!r} and {listed.where!r} differ only in credentials (a "
                                 f"signature, token or password, which the corpus stage records without: {path}) "
                                 "but are not the same file (another size or version): download them and name the "
                                 "local files in --input")


def _expanded(patterns: list[str], dynamic: dict | None) -> Iterator[tuple[str, tuple]]:
    """:func:`_expand_one` of each pattern, the store URLs among them asked for their objects many
    at a time (:func:`literals.look`)."""
    for at in range(0, len(patterns), literals.LITERALS_AT_ONCE):
        batch = patterns[at:at + literals.LITERALS_AT_ONCE]
        looked = literals.look([p for p in batch if is_remote(p)], stamps=dynamic is not None)
        for pattern in batch:
            yield from _expand_one(pattern, looked.get(pattern), dynamic)


def _expand_one(pattern: str, looked: literals.Looked | None = None,
                dynamic: dict | None = None) -> Iterator[tuple[str, tuple]]:
    """The files one path or glob names (an existing literal path wins over its reading as a glob),
    each with what the listing knew of it: (size, checksum) for a store object, () otherwise.
    ``looked``: what the store said of ``pattern`` as an object's URL (``[``, ``?`` and ``*``
    included; a folder, keys below it, is none)."""
    if pattern and os.path.isdir(pattern) and not is_remote(pattern):
        yield os.path.abspath(pattern), ()  # refused by iter_names, with the glob to use instead
        return
    if looked is not None and looked.info is not None and not storage.is_url(pattern):
        yield pattern, ()  # a file:// URL: a local file, identified as one (identify)
        return
    if looked is not None and looked.info is not None:
        yield pattern, _size_and_version(pattern, looked, dynamic)  # its identity: no request more
        return
    if looked is not None and isinstance(looked.error, TimeoutError):
        raise InputError(f"cannot read input {pattern!r}: {looked.error} from its server")
    literal = _literal(pattern) if not is_remote(pattern) else None
    if literal is not None:
        yield literal, ()
        return
    found = 0
    try:
        if is_remote(pattern):
            for url, size, checksum in store_glob.iter_glob(pattern):
                found += 1
                # a listing without a checksum (file://, sftp://, memory://) says nothing of the bytes:
                # the object's info is asked for instead (identify), with its time stamps
                yield url, (size, checksum) if checksum is not None else ()
        else:
            for f in _local_matches(pattern):
                found += 1
                yield os.path.abspath(f), ()
    except storage.StoreError as e:
        raise InputError(f"cannot list input {pattern!r}: {e}") from None
    except Exception as e:  # noqa: BLE001 - whatever the walk or the store raises names the pattern
        raise InputError(f"cannot list input {pattern!r}: {e}") from None
    if not found:
        if is_remote(pattern) and _store_folder(pattern):
            raise InputError(f"input {pattern!r} is a folder in the store: name its objects with a glob, --input "
                             f"'{pattern.rstrip('/')}/*' (or '{pattern.rstrip('/')}/**' for every level below it)")
        if not pattern.isascii() and not is_remote(pattern) and (enc := _names_encoding()) != "utf-8":
            raise InputError(f"input {pattern!r} matches no file; Python reads file names and arguments as {enc} "
                             "here (the locale), which can misspell a UTF-8 name: run with PYTHONUTF8=1 or a UTF-8 "
                             "locale (C.UTF-8)")
        if is_remote(pattern) and storage.scheme(pattern) in storage.ROOT_SCHEMES:
            try:  # a misspelt bucket read as a missing key: "matches no file" sent the user to the key
                storage.check_bucket(pattern)
            except storage.StoreError as e:
                raise InputError(f"input {pattern!r} matches no file: {e}") from None
        if why := literals.unreachable(pattern):  # a 403 or a refused connection is no missing file
            raise InputError(f"cannot read input {pattern!r}: {why}")
        raise InputError(f"input {pattern!r} matches no file")


def _size_and_version(url: str, looked: literals.Looked, dynamic: dict | None) -> tuple[int, str | None]:
    """What identifies the object the store said ``looked`` of (as :func:`identify` from its info)."""
    try:
        if looked.error is not None:
            raise looked.error
        size = _size_of(url, looked.info)
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever the store raised names the input, as identify
        raise InputError(f"cannot read the metadata of input {url!r}: {e}") from None
    if looked.stamps is not None and dynamic is not None:
        dynamic[url] = looked.stamps
    return size, version_of(looked.info)


def _size_of(url: str, meta: dict) -> int:
    """The object's size from its info. An http(s) server may send none (no ``Content-Length``: an answer
    streamed by a dynamic endpoint, or compressed in transit), where ``int(None)`` was the listing's message."""
    if meta.get("size") is None and storage.scheme(url) in ("http", "https"):
        raise InputError(f"cannot read input {url!r}: its server sends no size for it (no Content-Length to a HEAD "
                         "or a GET, or the body compressed in transit: Content-Encoding), and the corpus stage needs "
                         "each input's size (its identity, the check after its read): download it and name the "
                         "local file in --input")
    return int(meta["size"])


def _store_folder(pattern: str) -> bool:
    """Whether ``pattern`` (no glob character) names a folder in a store: keys below it."""
    if any(c in pattern for c in "*?[") or not pattern.split("://", 1)[-1].strip("/"):
        return False
    try:
        return storage.info(pattern).get("type") == "directory"
    except Exception:  # noqa: BLE001 - nothing there, or a store that cannot answer: "matches no file"
        return False


def _local_matches(pattern: str) -> Iterator[str]:
    """What Beam's ``FileSystems.match`` gives for a local pattern (``FileSystem.match`` and
    ``LocalFileSystem._list``: the folder before the first glob character walked whole, every file
    that still exists matched by ``FileSystem.translate_pattern``, whose translation
    :mod:`kolectra.corpus.local_glob` repeats without importing Beam), a path at a time: Beam's answer
    is a list of every match with its size and time (about 200 bytes a file held)."""
    if pattern.endswith(("/", "\\")):
        pattern += "*"
    prefix = re.match(r"^[^[*?]*", pattern).group(0)
    if prefix == pattern:
        if os.path.exists(pattern):
            yield pattern
        return
    if os.path.dirname(prefix) != prefix:
        prefix = os.path.dirname(prefix)
    # a glob in the working directory itself (`*.jsonl.gz`, `**/*.txt`) has no folder before it: walk `.`
    # and match the names as the pattern spells them (Beam's match finds nothing there: ./ works)
    here = prefix == ""
    if not os.path.exists(prefix or os.curdir):
        return
    match = re.compile(translate_pattern(pattern)).match
    for folder, _, names in os.walk(prefix or os.curdir):
        for name in names:
            path = os.path.join(folder, name)[2:] if here else os.path.join(folder, name)  # less `./`
            if match(path) and os.path.exists(path):  # as Beam: a link that leads nowhere is no file
                yield path


def identify(path: str, time_stamp: bool = True) -> InputFile:
    """The listing-only identity of one file (see the module docstring). ``time_stamp=False``: an
    http(s) object's Last-Modified left out (the listing found it to be each response's own time)."""
    try:
        if not storage.is_url(path):  # a path, or a file:// URL: a file of this machine, stat'ed as one
            st = os.stat(storage.local_path(path))
            # the change time too: a rewrite that keeps the size and puts the modification time back
            # (touch -r, rsync -t, a restore, an editor keeping it) has another one, which no program can
            # set back; before, it kept the identity and the next build reused the artifact of the old bytes
            return InputFile(path, st.st_size, f"local:{path}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}")
        meta = _info(path)
        if not time_stamp:
            meta = {k: v for k, v in meta.items() if k != "Last-Modified"}
        return object_file(path, _size_of(path, meta), version_of(meta))
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever the store raises names the input
        # without a URL's credentials: the check after a read (input_reads.changed_since) records this in stats
        raise InputError(url_secrets.redacted(f"cannot read the metadata of input {path!r}: {e}")) from None


def _info(path: str) -> dict:
    """A store object's info; an http(s) one's as the listing asked for it, bounded (``core.object_infos``:
    aiohttp's own bound, 300 s for the HEAD and 300 for the GET, held the job's check after a read 10 minutes
    on a server that stopped answering)."""
    if storage.scheme(path) not in ("http", "https"):
        return storage.info(path)
    [found] = object_infos.object_infos([path])
    if isinstance(found, Exception):
        raise found
    if found is None:
        raise FileNotFoundError(path)
    return found


# what a write moves in an object's info, where its store keeps no checksum of it (sftp://: mtime;
# memory://: created; http(s)://: the headers fsspec keeps, of which a server without an ETag (Python's
# http.server, many static hosts) sends Last-Modified alone; a file:// URL is a local file: identify)
_WRITTEN = ("mtime", "LastModified", "last_modified", "updated", "created", "Content-MD5", "Digest", "Last-Modified")


def version_of(meta: dict) -> str | None:
    """What tells one version of an object from another: the store's checksum (S3's ETag, GCS's
    generation), else its time stamps. Before, a file system with no checksum gave ``None``: an object
    rewritten to the same size kept its identity, and the corpus of its old bytes was reused."""
    if (checksum := storage.checksum_of(meta)) is not None:
        return checksum
    return ",".join(f"{k}={meta[k]}" for k in _WRITTEN if meta.get(k) is not None) or None


def object_file(path: str, size: int, checksum: str | None) -> InputFile:
    """A store object's identity, from its info (HEAD) or from the listing that found it: the same
    fields (S3's ETag; GCS's generation), so a worker's :func:`identify` after its read compares
    equal to the launcher's listing."""
    # recorded less a credential (a signature, user:password@): one signed again is the same input
    recorded = url_secrets.recorded(path)
    return InputFile(recorded, size, f"object:{recorded}:{size}:{checksum}", path if recorded != path else None)


def list_inputs(patterns: list[str]) -> list[InputFile]:
    return list(iter_inputs(patterns))


def iter_inputs(patterns: list[str]) -> Iterator[InputFile]:
    """:func:`list_inputs` a file at a time, for a caller that keeps them elsewhere (the launcher's
    records file): neither the names nor their identities are held (:func:`_sorted_listing`). A
    store object found by a glob is identified from the listing (one request a page of 1,000 keys),
    not asked for again (a HEAD each, one after the other); a URL named as it is, from the one
    request that found it there (:mod:`kolectra.corpus.literals`); one a glob found with nothing
    that identifies it (an HTTP server's index page) is asked for as those are, many at a time."""
    try:
        yield from _identified(patterns)
    except InputError as e:  # it names the pattern: without its credential
        raise InputError(url_secrets.redacted(str(e))) from None


def _identified(patterns: list[str]) -> Iterator[InputFile]:
    """:func:`iter_inputs`'s files (its errors are said there, without a URL's credentials)."""
    unversioned, first, dynamic = 0, None, {}
    names = _sorted_listing(patterns, dynamic)
    while batch := list(itertools.islice(names, literals.LITERALS_AT_ONCE)):
        looked = literals.look([path for path, listed in batch if listed is None and storage.is_url(path)])
        for path, listed in batch:
            seen = looked.get(path, literals.Looked(None))
            if listed is None and (seen.info is not None or isinstance(seen.error, TimeoutError)):
                listed = object_file(path, *_size_and_version(path, seen, dynamic))  # or its error
            found = listed if listed is not None else identify(path)  # not found by then: identify's error
            if found.identity.endswith(":None") and is_remote(path) and found.where not in dynamic:
                unversioned, first = unversioned + 1, first or found.path
            yield found
    if dynamic:  # the time of each response: an identity holding it would fail every job as changed
        url, (then, now) = next(iter(dynamic.items()))
        url = url_secrets.recorded(url)
        warn(f"{len(dynamic):,} input(s) ({url}{', ...' if len(dynamic) > 1 else ''}) are served with a "
             f"Last-Modified that moved between two requests while the size and all else stayed ({then!r}, then "
             f"{now!r}): each response's own time (a dynamic endpoint), not the file's, so they are told apart "
             "without it, by their size (and a Content-MD5 or Digest where sent): a change that keeps the size "
             "would not be noticed and the corpus of the old bytes reused; download them and name the local files "
             "in --input, or use --force after a change")
    if unversioned:  # size alone: a rewrite to the same size would reuse the corpus of the old bytes, unsaid
        warn(f"{unversioned:,} input(s) ({first}{', ...' if unversioned > 1 else ''}) are served with no checksum "
             "or time stamp (no ETag, Last-Modified, Content-MD5 or Digest: a dynamic endpoint?), so they are told "
             "apart by their size alone: a change that keeps the size would not be noticed and the corpus of the "
             "old bytes reused; download them and name the local files in --input, or use --force after a change")


class Files:
    """The input files of ``records`` (the request's: path, bytes, identity each; a tuple, or a
    store's ``RecordFile`` read again at every pass), as :class:`InputFile` s: what the corpus
    build takes as ``listed`` (len, and iterated as often as it needs). ``urls``: the URL each
    recorded path is read from where they differ (:attr:`InputFile.url`: never in the records)."""

    def __init__(self, records: Collection[dict], urls: dict[str, str] | None = None):
        self.records = records
        self.urls = urls or {}

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[InputFile]:
        for r in self.records:
            yield InputFile(r["path"], r["bytes"], r["identity"], self.urls.get(r["path"]))
