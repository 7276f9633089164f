"""An ``--input https://...`` the server refuses, or that no server answers, says so: not "matches no file".

fsspec's HTTP client turns every failure of its HEAD and GET (a 403 behind a login or a signed URL
that expired, a 500, a refused connection, a name that does not resolve) into FileNotFoundError, so
the corpus job refused such an input with "input 'https://...' matches no file", sending the user to
look for a typo in a URL that was right. A 404 is still "matches no file".
"""

from __future__ import annotations

import http.server
import socket
import threading
import time

import pytest

from kolectra.corpus import input_reads, inputs


def _serve(status: int):
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_HEAD(self):
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_HEAD

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize("status, said", [(403, "the server answered 403 Forbidden"),
                                          (500, "the server answered 500 Internal Server Error")])
@pytest.mark.parametrize("name", ["reviews.txt", "dumps/*.txt"])
def test_an_http_input_the_server_refuses_says_what_the_server_answered(status, said, name):
    server = _serve(status)
    try:
        url = f"http://127.0.0.1:{server.server_port}/{name}"
        with pytest.raises(inputs.InputError) as e:
            inputs.list_inputs([url])
        assert (said if "*" not in name else str(status)) in str(e.value)  # a glob's listing may say it first
        assert "matches no file" not in str(e.value)
    finally:
        server.shutdown()
        server.server_close()


def test_an_http_input_no_server_answers_says_it_could_not_connect():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(inputs.InputError) as e:
        inputs.list_inputs([f"http://127.0.0.1:{port}/reviews.txt"])
    assert "Cannot connect to host" in str(e.value) and "matches no file" not in str(e.value)


def test_a_missing_http_input_still_matches_no_file():
    server = _serve(404)
    try:
        with pytest.raises(inputs.InputError, match="matches no file$"):
            inputs.list_inputs([f"http://127.0.0.1:{server.server_port}/reviews.txt"])
    finally:
        server.shutdown()
        server.server_close()


def test_an_http_input_whose_server_never_answers_is_refused_in_bounded_time(monkeypatch):
    """A server that takes the connection and sends nothing (a stuck proxy, an overloaded origin) held the
    listing with no line: aiohttp's 300 s for the HEAD, 300 more for the GET, then the glob's own request."""
    from kolectra.core import object_infos

    monkeypatch.setattr(object_infos, "HTTP_INFO_SECONDS", 1.0, raising=False)
    with socket.socket() as mute:  # the kernel completes the connection; nothing ever reads or answers it
        mute.bind(("127.0.0.1", 0))
        mute.listen(64)
        said = []

        def listing():
            try:
                inputs.list_inputs([f"http://127.0.0.1:{mute.getsockname()[1]}/reviews.txt"])
            except inputs.InputError as e:
                said.append(str(e))

        worker = threading.Thread(target=listing, daemon=True)
        worker.start()
        worker.join(30)
        assert not worker.is_alive(), "the listing still waits on a server that never answers"
    assert said and "no answer in 1 s" in said[0] and "matches no file" not in said[0]


def test_an_http_input_served_without_a_size_says_so():
    """A server that sends no Content-Length (a dynamic endpoint streaming its answer) left fsspec's size None:
    the listing said "cannot read the metadata of input ...: int() argument must be a string, a bytes-like
    object or a real number, not 'NoneType'"."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_HEAD(self):
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()

        def do_GET(self):
            self.do_HEAD()
            self.wfile.write("이 영화 정말 재밌었어요\n".encode())

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/reviews.txt"
        with pytest.raises(inputs.InputError) as e:
            inputs.list_inputs([url])
        assert "sends no size" in str(e.value) and "Content-Length" in str(e.value), str(e.value)
        assert "NoneType" not in str(e.value)
        with pytest.raises(inputs.InputError, match="sends no size"):  # the job's check after its read
            inputs.identify(url)
    finally:
        server.shutdown()
        server.server_close()


def test_a_glob_of_a_korean_name_finds_the_files_an_index_page_names_percent_encoded(tmp_path):
    """An index page links its files percent-encoded (Python's http.server, nginx, Apache): 리뷰.txt is
    %EB%A6%AC%EB%B7%B0.txt there, so --input 'http://host/리뷰*.txt' (or 'http://host/a b*.txt') matched
    nothing, "matches no file", though 'http://host/*.txt' listed them. The names the page gives are kept."""
    import functools

    for name in ("리뷰-1.txt", "리뷰-2.txt", "a b.txt", "other.txt"):
        (tmp_path / name).write_text("이 영화 정말 재밌었어요\n", encoding="utf-8")
    (tmp_path / "폴더").mkdir()
    (tmp_path / "폴더" / "리뷰-3.txt").write_text("두 번째 리뷰입니다\n", encoding="utf-8")
    quiet = type("Quiet", (http.server.SimpleHTTPRequestHandler,), {"log_message": lambda *a: None})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(quiet, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_port}"
        everything = [f.path for f in inputs.list_inputs([f"{base}/*.txt"])]
        korean = "%EB%A6%AC%EB%B7%B0"
        assert everything == [f"{base}/{korean}-1.txt", f"{base}/{korean}-2.txt", f"{base}/a%20b.txt", f"{base}/other.txt"]
        assert [f.path for f in inputs.list_inputs([f"{base}/리뷰*.txt"])] == everything[:2]
        assert [f.path for f in inputs.list_inputs([f"{base}/a b*.txt"])] == everything[2:3]
        assert [f.path for f in inputs.list_inputs([f"{base}/폴더/리뷰*.txt"])] == [f"{base}/폴더/{korean}-3.txt"]
    finally:
        server.shutdown()
        server.server_close()


def test_many_urls_of_a_server_that_never_answers_are_refused_within_the_bound_not_a_bound_a_wave(monkeypatch):
    """Each info request is bounded (60 s), 32 in flight at a time: 1,000 URLs of a server that took the
    connections and never answered waited 32 waves of the bound (32 minutes, no line) before the listing
    failed on the first. The first request that runs out its bound ends the asking: those not yet asked
    are not, and the listing fails naming it."""
    from kolectra.core import object_infos

    monkeypatch.setattr(object_infos, "HTTP_INFO_SECONDS", 1.0, raising=False)
    with socket.socket() as mute:
        mute.bind(("127.0.0.1", 0))
        mute.listen(1024)
        urls = [f"http://127.0.0.1:{mute.getsockname()[1]}/reviews-{i:03d}.txt" for i in range(320)]
        started = time.monotonic()
        with pytest.raises(inputs.InputError) as e:
            inputs.list_inputs(urls)
        took = time.monotonic() - started
    assert took < 4, f"{took:.1f} s: 10 waves of the 1 s bound"
    assert str(e.value).startswith(f"cannot read input {urls[0]!r}: ") and "no answer in 1 s" in str(e.value)


def test_the_check_after_a_read_of_a_server_that_stopped_answering_ends_within_the_bound(monkeypatch):
    """The job's check after a file's read asks for its info again (changed_since -> identify): that request
    had aiohttp's own bound, 300 s for the HEAD and 300 more for the GET, where the listing's has 60 s, so a
    server that stopped answering meanwhile held the worker 10 minutes at the file's end."""
    from kolectra.core import object_infos

    monkeypatch.setattr(object_infos, "HTTP_INFO_SECONDS", 1.0, raising=False)
    body, mute = "이 영화 정말 재밌었어요\n".encode(), threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_HEAD(self):
            if mute.is_set():
                mute.wait(3)
                time.sleep(30)  # taken, never answered in time
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("ETag", '"v1"')
            self.end_headers()

        do_GET = do_HEAD

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        [listed] = inputs.list_inputs([f"http://127.0.0.1:{server.server_port}/reviews.txt"])
        mute.set()
        said = []
        worker = threading.Thread(target=lambda: said.append(input_reads.changed_since(listed, listed.bytes)), daemon=True)
        worker.start()
        worker.join(20)
        assert not worker.is_alive(), "the check still waits on a server that stopped answering"
        assert said and "no answer in 1 s" in said[0]
    finally:
        server.shutdown()
        server.server_close()
