"""A local input rewritten in place is a new corpus request, even with its size and modification time kept.

A corpus request's local inputs enter the artifact id by their listing (path, size, modification
time: no pass over 300 GB before the job). A file edited to the same size and then given its old
modification time back (``touch -r``, ``rsync -t``, a restore, an editor that keeps it) kept its
identity, so the next ``kolectra corpus`` printed "reusing ..." and handed on the corpus of the old
bytes; ``artifacts verify`` said ok. The identity now holds the change time as well, which any write
moves and no program can set back.
"""

from __future__ import annotations

import hashlib
import os

from kolectra.corpus import input_reads, inputs
from kolectra.pipeline import stages
from kolectra.pipeline.store.artifacts import Store

OLD = "이 영화 정말 재밌었어요 배우들 연기도 최고\n두 번째 리뷰는 조금 지루했지만 괜찮았어요\n"
NEW = OLD.replace("영화", "연극")  # the same number of UTF-8 bytes


def _rewrite_keeping_size_and_time(path) -> None:
    st = path.stat()
    with path.open("r+b") as f:  # in place: the same inode, the same size
        f.write(NEW.encode())
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # touch -r: the old modification time back
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns


def test_a_same_size_rewrite_with_its_time_put_back_has_another_identity(tmp_path):
    path = tmp_path / "리뷰.txt"
    path.write_text(OLD, encoding="utf-8")
    [before] = inputs.list_inputs([str(path)])
    assert inputs.list_inputs([str(path)]) == [before]  # untouched: the same
    _rewrite_keeping_size_and_time(path)
    [after] = inputs.list_inputs([str(path)])
    assert (after.path, after.bytes) == (before.path, before.bytes)
    assert after.identity != before.identity


def test_the_next_corpus_build_reads_the_new_bytes_instead_of_reusing_the_old_artifact(tmp_path):
    (tmp_path / "in").mkdir()
    path = tmp_path / "in" / "reviews.txt"
    path.write_text(OLD, encoding="utf-8")
    store = Store(tmp_path / "store")
    first = stages.corpus(store, [str(tmp_path / "in" / "*.txt")])
    assert stages.corpus(store, [str(tmp_path / "in" / "*.txt")]).path == first.path  # unchanged: reused
    _rewrite_keeping_size_and_time(path)
    second = stages.corpus(store, [str(tmp_path / "in" / "*.txt")])
    assert second.id != first.id
    [record] = second.manifest["inputs"]
    assert record["sha256"] == hashlib.sha256(NEW.encode()).hexdigest()  # built from the bytes on disk now


def test_a_file_url_input_rewritten_to_the_same_size_has_another_identity(tmp_path):
    """``--input file:///...``: fsspec's local file system keeps no checksum, so the identity was
    ``object:file:///...:SIZE:None``, the same after any rewrite to the same size (even with a new
    modification time): the next build reused the corpus of the old bytes. It is a local file's now."""
    path = tmp_path / "in" / "reviews.txt"
    path.parent.mkdir()
    path.write_text(OLD, encoding="utf-8")
    patterns = [f"file://{tmp_path}/in/*.txt", f"file://{path}"]
    before = [inputs.list_inputs([p]) for p in patterns]
    assert all(f.identity.startswith(f"local:{f.path}:") for files in before for f in files)
    assert [inputs.list_inputs([p]) for p in patterns] == before  # untouched: the same
    path.write_text(NEW, encoding="utf-8")  # a plain rewrite: new bytes, the same size
    for p, [was] in zip(patterns, before):
        [now] = inputs.list_inputs([p])
        assert (now.path, now.bytes) == (was.path, was.bytes) and now.identity != was.identity, p
    _rewrite_keeping_size_and_time(path)
    assert [inputs.list_inputs([p]) for p in patterns] != before


def test_an_object_of_a_store_without_checksums_is_told_by_its_time_stamps(tmp_path):
    """A file system whose info holds no checksum (fsspec's memory://; sftp://) gave ``None`` for
    every version of an object; its time stamps tell them apart now."""
    import fsspec

    fs = fsspec.filesystem("memory")
    where = f"/kolectra-identity-{tmp_path.name}"
    fs.pipe(f"{where}/a.txt", OLD.encode())
    try:
        [before] = inputs.list_inputs([f"memory://{where}/*.txt"])
        assert "None" not in before.identity
        assert inputs.list_inputs([f"memory://{where}/*.txt"]) == [before]
        fs.pipe(f"{where}/a.txt", NEW.encode())
        [after] = inputs.list_inputs([f"memory://{where}/*.txt"])
        assert after.bytes == before.bytes and after.identity != before.identity
    finally:
        fs.rm(where, recursive=True)


def test_an_http_input_without_an_etag_is_told_by_its_last_modified(tmp_path):
    """A web server that sends no ETag (Python's http.server, many static hosts) gives Last-Modified: the
    identity was 'object:URL:SIZE:None' for every version, so a file replaced by another of its size found
    the corpus of the old bytes."""
    import functools
    import http.server
    import threading

    path = tmp_path / "a.txt"
    path.write_text(OLD, encoding="utf-8")
    quiet = type("Quiet", (http.server.SimpleHTTPRequestHandler,), {"log_message": lambda *a: None})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(quiet, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/a.txt"
        [before] = inputs.list_inputs([url])
        assert "None" not in before.identity and "Last-Modified" in before.identity
        assert inputs.list_inputs([url]) == [before]
        path.write_text(NEW, encoding="utf-8")
        os.utime(path, (path.stat().st_atime + 5, path.stat().st_mtime + 5))  # Last-Modified: whole seconds
        [after] = inputs.list_inputs([url])
        assert after.bytes == before.bytes and after.identity != before.identity
        assert "changed during the read" in input_reads.changed_since(before, before.bytes)  # a read meanwhile
    finally:
        server.shutdown()
        server.server_close()


def _serve(headers):
    """A web server of one text whose responses carry ``headers()`` (no ETag, no Last-Modified unless given)."""
    import http.server
    import threading

    body = OLD.encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_HEAD(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            for k, v in headers().items():
                self.send_header(k, v)
            self.end_headers()

        def do_GET(self):
            self.do_HEAD()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_an_http_input_served_with_neither_etag_nor_last_modified_is_warned_of(capsys):
    """A dynamic endpoint sends no ETag and no Last-Modified: its identity is its size alone, so a change that
    keeps the size reuses the corpus of the old bytes; that was silent."""
    server = _serve(dict)
    try:
        url = f"http://127.0.0.1:{server.server_port}/reviews.txt"
        [found] = inputs.list_inputs([url])
        assert found.identity.endswith(":None")
        err = capsys.readouterr().err
        assert "WARNING" in err and url in err and "would not be noticed" in err
    finally:
        server.shutdown()
        server.server_close()


def test_an_http_input_whose_last_modified_is_each_request_s_time_is_told_by_its_size_with_a_warning(capsys):
    """A server that sends every response's own time as Last-Modified looked changed after every read: every
    corpus job failed at its end (381a7b2). The listing's second request sees the stamp move with the size
    kept: it is left out of the identity, which is the size's alone as before 381a7b2, and said."""
    import email.utils
    import itertools

    ticks = itertools.count()
    server = _serve(lambda: {"Last-Modified": email.utils.formatdate(1_700_000_000 + next(ticks), usegmt=True)})
    try:
        url = f"http://127.0.0.1:{server.server_port}/reviews.txt"
        [found] = inputs.list_inputs([url])
        assert found.identity == f"object:{url}:{len(OLD.encode())}:None"
        err = capsys.readouterr().err
        assert err.count("WARNING") == 1 and url in err and "each response's own time" in err
        assert "would not be noticed" in err and "Tue, 14 Nov 2023 22:13:20 GMT" in err
        assert input_reads.changed_since(found, found.bytes) is None
        assert inputs.list_inputs([url]) == [found]
    finally:
        server.shutdown()
        server.server_close()


def test_a_dynamic_endpoint_stamping_the_clock_s_second_builds_a_corpus_and_reuses_it(tmp_path, capsys):
    """The real clock's whole seconds: the listing's two requests, milliseconds apart, mostly see one stamp,
    and the job's check after its read another: 'changed while the job read them' at every run. A stamp this
    recent is asked for once more a second later, which a response's own time cannot survive."""
    import email.utils
    import time

    server = _serve(lambda: {"Last-Modified": email.utils.formatdate(time.time(), usegmt=True)})
    try:
        url = f"http://127.0.0.1:{server.server_port}/reviews.txt"
        store = Store(tmp_path / "store")
        first = stages.corpus(store, [url])
        [record] = first.manifest["inputs"]
        assert record["identity"] == f"object:{url}:{len(OLD.encode())}:None"
        assert record["sha256"] == hashlib.sha256(OLD.encode()).hexdigest()
        assert stages.corpus(store, [url]).path == first.path  # the same request: reused
        assert "each response's own time" in capsys.readouterr().err
    finally:
        server.shutdown()
        server.server_close()


def test_a_same_size_change_after_the_listing_of_a_stamped_http_input_still_fails_the_read(capsys):
    """A file whose Last-Modified held through the listing's requests and moved after it (a real rewrite;
    a cache renewing a dynamic page's stamp) is still changed during the read, and the reason names both."""
    import email.utils
    import itertools

    seen = itertools.count()
    server = _serve(lambda: {"Last-Modified": email.utils.formatdate(1_700_000_000 + 60 * (next(seen) >= 2),
                                                                     usegmt=True)})
    try:
        url = f"http://127.0.0.1:{server.server_port}/reviews.txt"
        [found] = inputs.list_inputs([url])
        assert "Last-Modified=Tue, 14 Nov 2023 22:13:20 GMT" in found.identity
        why = input_reads.changed_since(found, found.bytes)
        assert why and "changed during the read" in why and "dynamic endpoint" in why
        assert "WARNING" not in capsys.readouterr().err  # its stamp held: no size-only warning
    finally:
        server.shutdown()
        server.server_close()


def test_literal_urls_are_asked_for_many_at_a_time():
    """Each literal URL took two HEADs, one after the other, and the URLs one after the other: 1,000 URLs
    answered in 100 ms each listed in 200 s before the job's first line. They are asked for at once now (a
    bounded number in flight), once each."""
    import threading
    import time

    lock, counts = threading.Lock(), {"now": 0, "most": 0, "heads": 0}

    def slow():
        with lock:
            counts["now"] += 1
            counts["most"], counts["heads"] = max(counts["most"], counts["now"]), counts["heads"] + 1
        time.sleep(0.2)
        with lock:
            counts["now"] -= 1
        return {"ETag": '"v1"'}

    server = _serve(slow)
    try:
        urls = [f"http://127.0.0.1:{server.server_port}/{i}.txt" for i in range(8)]
        found = inputs.list_inputs(urls)
        assert [f.identity for f in found] == [f"object:{u}:{len(OLD.encode())}:v1" for u in urls]
        assert counts["most"] > 1 and counts["heads"] == len(urls)
    finally:
        server.shutdown()
        server.server_close()


def test_a_glob_over_an_http_index_page_lists_its_files_many_at_a_time(tmp_path):
    """--input 'http://host/dumps/*.txt' over a server's index page failed 'cannot read the metadata of input
    'http://http://host/dumps/a.txt'' (fsspec's HTTP paths keep their scheme, and the glob put another before
    them); the files it finds are asked for their info as literal URLs are, many at a time."""
    import functools
    import http.server
    import threading
    import time

    for i in range(6):
        (tmp_path / f"{i}.txt").write_text(OLD, encoding="utf-8")
    lock, counts = threading.Lock(), {"now": 0, "most": 0}

    class Slow(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_HEAD(self):
            with lock:
                counts["now"] += 1
                counts["most"] = max(counts["most"], counts["now"])
            time.sleep(0.2)
            with lock:
                counts["now"] -= 1
            super().do_HEAD()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Slow, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_port}"
        found = inputs.list_inputs([f"{base}/*.txt"])
        assert [f.path for f in found] == [f"{base}/{i}.txt" for i in range(6)]
        assert all(f.bytes == len(OLD.encode()) and "Last-Modified=" in f.identity for f in found)
        assert counts["most"] > 1
    finally:
        server.shutdown()
        server.server_close()
