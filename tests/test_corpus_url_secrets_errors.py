"""A read that fails during the corpus job prints no ``--input`` URL's credentials: not the one-line error
(aiohttp's ``403, message='Forbidden', url='https://...?X-Amz-Signature=...'`` of a signed URL that expired
during the job), not the traceback each local worker process prints, not the log under ``ROOT/.logs``
(the command line and the traceback) nor any other file under the root.

Served by a real local HTTP server that answers the listing's HEAD and then refuses (403) or cuts off the read.
Since z1 such a read is no internal error: one line naming the file (exit 2, corpus/read_failures.py), no
traceback log; its credentials stay out of it all the same.
"""

from __future__ import annotations

import gzip
import http.server
import json
import socket
import sys
import threading
from pathlib import Path

import pytest

from kolectra.core import stage
from kolectra.pipeline.cli import main

SECRETS = ("AKIASECRETKEY", "SIGSECRET", "hunter2")
SIGNED = "?X-Amz-Credential=AKIASECRETKEY%2F20261201%2Fus-east-1&X-Amz-Signature=SIGSECRET"
BODY = "".join(json.dumps({"text": f"이 영화 정말 재밌었어요 배우들 연기도 최고였고 {i}번째로 본 영화입니다."},
                          ensure_ascii=False) + "\n" for i in range(200)).encode()


@pytest.fixture()
def failing(request):
    """A server whose files list fine and whose reads fail: ``refused`` (403, a signature expired since the
    listing) or ``cut`` (the connection closed a third of the way in)."""
    how = request.param

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def _head(self, status: int = 200, size: int = len(BODY)):
            self.send_response(status)
            self.send_header("Content-Length", str(size))
            self.send_header("ETag", '"v1"')
            self.end_headers()

        def do_HEAD(self):
            self._head()

        def do_GET(self):
            if how == "refused":
                return self._head(403, 0)
            self._head()
            self.wfile.write(BODY[: len(BODY) // 3])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://user:hunter2@127.0.0.1:{server.server_port}/reviews.jsonl{SIGNED}"
    server.shutdown()
    server.server_close()


def _everything_under(root: Path) -> str:
    return "".join((gzip.decompress(f.read_bytes()) if f.suffix == ".gz" else f.read_bytes()).decode("utf-8", "replace")
                   for f in sorted(root.rglob("*")) if f.is_file())


@pytest.mark.parametrize("workers", [[], ["--direct_num_workers", "2"]], ids=["in-process", "2-worker-processes"])
@pytest.mark.parametrize("failing", ["refused", "cut"], indirect=True)
def test_a_read_that_fails_prints_and_logs_no_credential_of_its_url(failing, workers, tmp_path, capfd, monkeypatch):
    root = tmp_path / "root"
    argv = ["corpus", "--input", failing, "--out", str(root), *workers]
    monkeypatch.setattr(sys, "argv", ["kolectra", *argv])
    monkeypatch.setenv("KOLECTRA_READ_RETRY_WAITS", "0.05")  # a cut read is tried again once, the workers' too
    assert main(argv) == 2
    err = capfd.readouterr().err
    assert "internal error" not in err and "Traceback" not in err and not (root / ".logs").exists()
    assert "could not be read after the listing: http://127.0.0.1:" in err and "/reviews.jsonl" in err
    assert "403 Forbidden" in err or "ClientPayloadError" in err  # refused, or cut
    leaked = [s for s in SECRETS if s in err + _everything_under(root)]
    assert not leaked, err


def test_a_progress_line_or_warning_names_no_credential(capsys):
    stage.warn(f"input 'https://h/a.jsonl{SIGNED}' is served dynamically")
    stage.progress("reading https://user:hunter2@h/a.jsonl")
    err = capsys.readouterr().err
    assert "https://h/a.jsonl" in err and not [s for s in SECRETS if s in err]


@pytest.mark.parametrize("failing", ["cut"], indirect=True)
def test_beams_logged_error_at_v_names_no_credential(failing, tmp_path):
    """At ``-v`` the lines logged in the job (a cut read's retry, corpus/read_failures.py; before z1, Beam's
    failed bundle and its traceback) go through kolectra's handler (its own process)."""
    import os
    import subprocess

    done = subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", "corpus", "--input", failing,
                           "--out", str(tmp_path / "root"), "-v"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "KOLECTRA_READ_RETRY_WAITS": "0.05"})
    assert done.returncode == 2 and "trying again in" in done.stderr and "ClientPayloadError" in done.stderr
    assert not [s for s in SECRETS if s in done.stderr + _everything_under(tmp_path / "root")], done.stderr
