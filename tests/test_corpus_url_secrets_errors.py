"""A read that fails during the corpus job prints no ``--input`` URL's credentials: not the one-line error
(aiohttp's ``403, message='Forbidden', url='https://...?X-Amz-Signature=...'`` of a signed URL that expired
during the job), not the traceback each local worker process prints, not the log under ``ROOT/.logs``
(the command line and the traceback) nor any other file under the root.

Served by a real local HTTP server that answers the listing's HEAD and then refuses (403) or cuts off the read.
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
    assert main(argv) == 1
    err = capfd.readouterr().err
    [log] = (root / ".logs").glob("*.log")  # the traceback is kept, for the bug report
    assert "kolectra corpus --input http://127.0.0.1:" in log.read_text() and "internal error" in err
    if "refused" in log.name or "Forbidden" in log.read_text():  # the server's answer, and the URL it was to
        assert "403" in err and "/reviews.jsonl" in err
    leaked = [s for s in SECRETS if s in err + _everything_under(root)]
    assert not leaked, err


def test_a_progress_line_or_warning_names_no_credential(capsys):
    stage.warn(f"input 'https://h/a.jsonl{SIGNED}' is served dynamically")
    stage.progress("reading https://user:hunter2@h/a.jsonl")
    err = capsys.readouterr().err
    assert "https://h/a.jsonl" in err and not [s for s in SECRETS if s in err]


@pytest.mark.parametrize("failing", ["refused"], indirect=True)
def test_beams_logged_error_at_v_names_no_credential(failing, tmp_path):
    """At ``-v`` Beam logs the failed bundle's error and traceback: through kolectra's handler (its own process)."""
    import subprocess

    done = subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", "corpus", "--input", failing,
                           "--out", str(tmp_path / "root"), "-v"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "ERROR apache_beam" in done.stderr and "403" in done.stderr
    assert not [s for s in SECRETS if s in done.stderr + _everything_under(tmp_path / "root")], done.stderr
