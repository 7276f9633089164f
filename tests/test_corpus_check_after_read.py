"""The check after an http(s) input's read (corpus/input_reads.changed_since asks its server again) that the
server refuses: a signed URL expired between the job's read and that check (403 to the HEAD and to fsspec's GET
after it). Before, the job failed saying the file 'changed while the job read them' with 'cannot read the
metadata of input ...: <the URL>' (no status) and 'Rerun once they are complete': nothing had changed. It is
now the job's one line of inputs that could not be read after the listing, naming the server's answer and what
to do. A real local http.server in a thread; the real corpus stage (main, Beam's local runner)."""

from __future__ import annotations

import http.server
import json
import re
import threading

from kolectra.corpus import listing
from kolectra.pipeline.cli import main

BODY = "".join(json.dumps({"text": f"The film was a delight and every actor was at their best, review {i}."}) + "\n"
               for i in range(300)).encode()
SIGNED = "?X-Amz-Credential=AKIASECRETKEY%2F20261201&X-Amz-Signature=SIGSECRET"


def test_a_check_after_the_read_the_server_refuses_is_said_as_refused_not_as_a_change(monkeypatch, tmp_path, capfd):
    seen = {"armed": False, "read": False}

    class Expiring(http.server.BaseHTTPRequestHandler):
        """Serves BODY (ranges too); once the job has read it whole, refuses what asks for its info (HEAD, a GET
        of no range): the signature expired."""

        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def _head(self, status: int, size: int, extra: dict | None = None):
            self.send_response(status)
            self.send_header("Content-Length", str(size))
            self.send_header("ETag", '"v1"')
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()

        def do_HEAD(self):
            self._head(403, 0) if seen["read"] else self._head(200, len(BODY))

        def do_GET(self):
            asked = self.headers.get("Range")
            if seen["read"] and asked is None:
                return self._head(403, 0)
            start, end = 0, len(BODY)
            if m := re.fullmatch(r"bytes=(\d+)-(\d+)", asked or ""):
                start, end = int(m[1]), min(int(m[2]) + 1, len(BODY))
                self._head(206, end - start, {"Content-Range": f"bytes {start}-{end - 1}/{len(BODY)}"})
            else:
                self._head(200, end)
            self.wfile.write(BODY[start:end])
            if seen["armed"] and end == len(BODY):
                seen["read"] = True

    write = listing.write

    def arming(*a, **k):  # the job starts: every check before it read the file cleanly
        seen["armed"] = True
        return write(*a, **k)

    monkeypatch.setattr(listing, "write", arming)
    served = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Expiring)
    served.daemon_threads = True
    threading.Thread(target=served.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{served.server_port}/reviews.jsonl{SIGNED}"
        rc = main(["corpus", "--input", url, "--out", str(tmp_path / "root"), "--set", "language=en"])
    finally:
        served.shutdown()
        served.server_close()
    err = capfd.readouterr().err
    assert rc == 2 and seen["read"], err
    [line] = [x for x in err.splitlines() if x.startswith("kolectra corpus:")]
    assert "changed while the job read" not in line, line
    assert "could not be read after the listing" in line and "403 Forbidden" in line, line
    assert "sign it again" in line and "no corpus was kept" in line, line
    kept = "".join(p.read_text() for p in (tmp_path / "root" / "failed").rglob("*") if p.is_file() and p.suffix != ".gz")
    assert "check after its read" in kept and "AKIASECRETKEY" not in kept and "SIGSECRET" not in err + kept
    assert not list((tmp_path / "root").glob("corpus/*/manifest.json"))
