"""An ``--input`` URL's credentials (a signed URL's ``X-Amz-Signature``/``X-Amz-Credential``, an Azure SAS's
``sig``, ``user:password@``) are used to read it and recorded nowhere: not in the manifest's inputs, the
identity (a URL signed again is the same corpus), document ids, stats or rejects, nor the lines printed.
A URL without any keeps its identity, byte for byte.

Served by a real local HTTP server that refuses (403) a request without its signature or its password.
"""

from __future__ import annotations

import base64
import functools
import gzip
import http.server
import json
import sys
import threading
from pathlib import Path

import pytest

from kolectra.core.url_secrets import recorded, redacted
from kolectra.corpus import inputs
from kolectra.pipeline import stages
from kolectra.pipeline.store.artifacts import Store

TEXTS = [f"이 영화 정말 재밌었어요 배우들 연기도 최고였고 {i}번째로 본 영화입니다." for i in range(30)]
SECRETS = ("AKIASECRETKEY", "SIGSECRET", "SESSIONSECRET", "hunter2")


def _signed(sig: str, date: str = "20261201T000000Z") -> str:
    return (f"?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIASECRETKEY%2F20261201%2Fus-east-1&X-Amz-Date={date}"
            f"&X-Amz-Expires=3600&X-Amz-Security-Token=SESSIONSECRET&X-Amz-SignedHeaders=host&X-Amz-Signature={sig}")


@pytest.fixture()
def server(tmp_path):
    """Python's file server, refusing a request without a signature in its query or, for /private/, a password."""
    root = tmp_path / "served"
    (root / "private").mkdir(parents=True)
    lines = "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in TEXTS)
    for name in ("reviews.jsonl", "private/reviews.jsonl"):
        (root / name).write_text(lines, encoding="utf-8")
    (root / "other.jsonl").write_text(lines[: len(lines) // 2], encoding="utf-8")
    login = "Basic " + base64.b64encode(b"user:hunter2").decode()

    class Guarded(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def translate_path(self, path):  # an API serving each token's own file
            return super().translate_path(path.replace("reviews.jsonl?token=B", "other.jsonl"))

        def _allowed(self) -> bool:
            if self.path.startswith("/private/"):
                return self.headers.get("Authorization") == login
            return any(k in self.path for k in ("Signature=SIG", "id=2", "token=", "key=AIza")) or "?" not in self.path

        def do_HEAD(self):
            if not self._allowed():
                return self.send_error(403)
            return super().do_HEAD()

        def do_GET(self):
            if not self._allowed():
                return self.send_error(403)
            return super().do_GET()

    served = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Guarded, directory=str(root)))
    threading.Thread(target=served.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{served.server_port}"
    served.shutdown()
    served.server_close()


def test_the_recorded_form_drops_credentials_and_keeps_the_rest_as_written():
    assert recorded("https://h/a.jsonl" + _signed("x")) == "https://h/a.jsonl"
    assert recorded("https://h/a.jsonl?id=2&X-Amz-Signature=x&part=a%20b#f") == "https://h/a.jsonl?id=2&part=a%20b#f"
    assert recorded("https://user:pw@h:8080/a.txt") == "https://h:8080/a.txt"
    assert recorded("https://acct.blob.core.windows.net/c/a.txt?sv=2022&se=2026&sr=b&sp=r&sig=abc%3D") == \
        "https://acct.blob.core.windows.net/c/a.txt"
    assert recorded("https://h/a.txt?Expires=1&Signature=abc&Key-Pair-Id=K") == "https://h/a.txt"
    assert recorded("https://h/a.txt?expires=1&v=2") == "https://h/a.txt?expires=1&v=2"  # no signature: kept
    for same in ("https://h/a.jsonl?id=2", "https://h/%EB%A6%AC.txt?a=1&&b", "s3://b/k?X-Amz-Signature=1",
                 "/data/a.txt", "file:///x?token=1"):
        assert recorded(same) is same
    assert "SIG" not in redacted(f"cannot read input 'https://h/a.jsonl{_signed('SIG')}': 403")


def test_a_url_without_credentials_keeps_its_identity(server):
    for url in (f"{server}/reviews.jsonl", f"{server}/reviews.jsonl?id=2"):
        [f] = inputs.list_inputs([url])
        assert f.path == url and getattr(f, "url", None) is None
        assert f.identity.startswith(f"object:{url}:{f.bytes}:Last-Modified=")


def _published_text(path: Path) -> str:
    """Every file of an artifact as text, gzip ones decompressed."""
    return "".join((gzip.decompress(f.read_bytes()) if f.suffix == ".gz" else f.read_bytes()).decode("utf-8", "replace")
                   for f in sorted(path.rglob("*")) if f.is_file())


def test_a_signed_url_is_read_and_recorded_without_its_signature_and_signed_again_is_the_same_corpus(
        tmp_path, server, capsys, monkeypatch):
    store, url = Store(tmp_path / "store"), f"{server}/reviews.jsonl{_signed('SIGSECRET')}"
    monkeypatch.setattr(sys, "argv", ["kolectra", "corpus", "--input", url])  # the manifest's provenance.argv
    art = stages.corpus(store, [url])
    stats = json.loads((art.path / "stats.json").read_text())
    assert stats["records_in"] == len(TEXTS) and not stats.get("rejected")
    assert art.manifest["inputs"][0]["path"] == f"{server}/reviews.jsonl"
    text = _published_text(art.path) + capsys.readouterr().err
    assert not [s for s in SECRETS if s in text]
    # signed again, later: the same object, the same corpus (reused, not built again)
    again = stages.corpus(store, [f"{server}/reviews.jsonl{_signed('SIGAGAIN', '20261202T000000Z')}"])
    assert again.path == art.path


def test_a_signed_url_read_in_pieces_by_worker_processes_is_read_with_its_signature(tmp_path, server, capsys):
    art = stages.corpus(Store(tmp_path / "store"), [f"{server}/reviews.jsonl{_signed('SIGSECRET')}"],
                        sets=["split_bytes=1024"], beam_args=["--direct_num_workers=2"])
    stats = json.loads((art.path / "stats.json").read_text())
    assert stats["records_in"] == len(TEXTS) and not stats.get("rejected")
    assert not [s for s in SECRETS if s in _published_text(art.path) + capsys.readouterr().err]


def test_a_url_with_a_password_is_read_with_it_and_recorded_without(tmp_path, server, capsys):
    art = stages.corpus(Store(tmp_path / "store"), [f"http://user:hunter2@{server[7:]}/private/reviews.jsonl"])
    assert json.loads((art.path / "stats.json").read_text())["records_in"] == len(TEXTS)
    assert art.manifest["inputs"][0]["path"] == f"{server}/private/reviews.jsonl"
    assert "hunter2" not in _published_text(art.path) + capsys.readouterr().err


def test_a_refused_signed_url_is_named_without_its_signature(server):
    with pytest.raises(inputs.InputError) as e:
        inputs.list_inputs([f"{server}/reviews.jsonl{_signed('WRONGSIG')}"])
    assert "WRONGSIG" not in str(e.value) and "AKIASECRETKEY" not in str(e.value)
    assert f"{server}/reviews.jsonl" in str(e.value)


def test_two_files_whose_urls_differ_only_in_a_token_are_refused_not_one_dropped(server):
    with pytest.raises(inputs.InputError, match="differ only in credentials") as e:
        inputs.list_inputs([f"{server}/reviews.jsonl?token=A", f"{server}/reviews.jsonl?token=B"])
    assert "token=" not in str(e.value)
    # the same object signed twice is one input
    assert len(inputs.list_inputs([f"{server}/reviews.jsonl{_signed('SIG1')}", f"{server}/reviews.jsonl{_signed('SIG2')}"])) == 1


GOOGLE_KEY = "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW"  # the form of one: AIza and 35 more


def test_other_common_credentials_are_recorded_without_them_and_a_key_that_selects_content_is_kept():
    """S3's older presigned form (and an S3-compatible store's: MinIO, Ceph) named its access key in
    AWSAccessKeyId, kept where X-Amz-Credential is dropped; Alibaba OSS's and Tencent COS's signatures, GitLab's
    private_token, Google's API key (key=AIza...) were kept whole."""
    cases = {
        "https://b.s3.amazonaws.com/a.jsonl?AWSAccessKeyId=AKIASECRETKEY&Expires=1780000000&Signature=SIG%3D":
            "https://b.s3.amazonaws.com/a.jsonl",
        "https://b.oss-cn-hangzhou.aliyuncs.com/a.jsonl?OSSAccessKeyId=STS.SECRETID&Expires=1&Signature=SIG"
        "&security-token=SESSIONSECRET": "https://b.oss-cn-hangzhou.aliyuncs.com/a.jsonl",
        "https://b.oss-cn-hangzhou.aliyuncs.com/a.jsonl?x-oss-signature-version=OSS4-HMAC-SHA256&x-oss-credential="
        "SECRETID%2F20261201&x-oss-date=20261201T000000Z&x-oss-expires=3600&x-oss-signature=SIG":
            "https://b.oss-cn-hangzhou.aliyuncs.com/a.jsonl",
        "https://b-1250000000.cos.ap-seoul.myqcloud.com/a.jsonl?q-sign-algorithm=sha1&q-ak=AKIDSECRET&q-sign-time=1;2"
        "&q-key-time=1;2&q-header-list=host&q-url-param-list=&q-signature=SIG": "https://b-1250000000.cos.ap-seoul.myqcloud.com/a.jsonl",
        "https://gitlab.com/api/v4/projects/1/repository/files/a.jsonl/raw?ref=main&private_token=glpat-SECRET":
            "https://gitlab.com/api/v4/projects/1/repository/files/a.jsonl/raw?ref=main",
        f"https://www.googleapis.com/drive/v3/files/1AbC?alt=media&key={GOOGLE_KEY}":
            "https://www.googleapis.com/drive/v3/files/1AbC?alt=media",
    }
    for url, kept in cases.items():
        assert recorded(url) == kept, url
    # a key that names the content (no API key's form): the URL as given, its ids as before
    for same in ("https://h/get?key=reviews/2024.jsonl", "https://h/get?key=AIza", "https://h/a.txt?expires=1&q-ak=x"):
        assert recorded(same) is same


def test_a_url_signed_the_older_way_or_with_a_google_api_key_is_recorded_without_it(tmp_path, server, capsys):
    store = Store(tmp_path / "store")
    v2 = f"{server}/reviews.jsonl?AWSAccessKeyId=AKIASECRETKEY&Expires=1780000000&Signature=SIGSECRET"
    art = stages.corpus(store, [v2])
    assert json.loads((art.path / "stats.json").read_text())["records_in"] == len(TEXTS)
    assert art.manifest["inputs"][0]["path"] == f"{server}/reviews.jsonl"
    assert not [s for s in SECRETS if s in _published_text(art.path) + capsys.readouterr().err]
    [f] = inputs.list_inputs([f"{server}/reviews.jsonl?alt=media&key={GOOGLE_KEY}"])
    assert f.path == f"{server}/reviews.jsonl?alt=media" and GOOGLE_KEY not in f.identity


def test_urls_recorded_as_one_are_told_apart_or_joined_whatever_sorts_between_them(server):
    """The listing sorted the URLs as given and joined (or refused) two recorded as one only when next to each
    other: a URL between them (``?id=2`` sorts between ``reviews.jsonl`` and ``reviews.jsonl?token=A``) left
    the same file read twice, and two files that differ only in a token (``?token=A``, ``?token=B``, with
    ``?token=AB&id=2`` between) recorded under one path, both read. They are sorted by their recorded form."""
    found = inputs.list_inputs([f"{server}/reviews.jsonl", f"{server}/reviews.jsonl?id=2",
                                f"{server}/reviews.jsonl?token=A"])
    assert [f.path for f in found] == [f"{server}/reviews.jsonl", f"{server}/reviews.jsonl?id=2"]
    with pytest.raises(inputs.InputError, match="differ only in credentials") as e:
        inputs.list_inputs([f"{server}/reviews.jsonl?token=A", f"{server}/reviews.jsonl?token=AB&id=2",
                            f"{server}/reviews.jsonl?token=B"])
    assert "token=" not in str(e.value)


def test_an_input_whose_filesystem_needs_its_server_is_refused_in_one_line_without_its_password(
        tmp_path, capfd, monkeypatch):
    """``--input ftp://user:password@host/...`` (an fsspec protocol, as the help's 'hdfs://' suggests) was
    'internal error: TypeError: FTPFileSystem.__init__() missing 1 required positional argument: 'host'' (the
    half-made filesystem's ``__del__`` printing a traceback after it), with the password in the command line
    ROOT/.logs kept: kolectra makes one filesystem a protocol, never one a server. Now one line, exit 2, and
    a URL of any scheme is named without its ``user:password@``."""
    from kolectra.pipeline.cli import main

    root = tmp_path / "root"
    argv = ["corpus", "--input", "ftp://user:hunter2@127.0.0.1:1/reviews.jsonl", "--out", str(root)]
    monkeypatch.setattr(sys, "argv", ["kolectra", *argv])
    assert main(argv) == 2
    err = capfd.readouterr().err
    assert "kolectra does not read ftp:// (its fsspec filesystem is made for one host" in err
    assert "internal error" not in err and "Traceback" not in err and "hunter2" not in err
    assert not (root / ".logs").exists()
    assert redacted("smb://u:pw@host/share/a.txt, sftp://me@h/x and s3://b/k@v") == \
        "smb://host/share/a.txt, sftp://h/x and s3://b/k@v"


def test_a_signed_url_refused_at_the_check_after_its_read_is_recorded_without_its_signature(tmp_path):
    """A signed URL that expires between the job's read and the check after it (input_reads.changed_since asks
    the server again) failed the job as changed, and the reason kept in ROOT/failed/.../stats.json and
    stats/files.jsonl was 'cannot read the metadata of input 'https://...?X-Amz-Credential=AKIA...&
    X-Amz-Signature=...'', key id and signature; it is recorded without them."""
    from kolectra.corpus import input_reads

    class Expired(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_HEAD(self):
            self.send_error(403)

        do_GET = do_HEAD

    served = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Expired)
    threading.Thread(target=served.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{served.server_port}/reviews.jsonl{_signed('SIGSECRET')}"
        listed = inputs.object_file(url, 100, '"v1"')
        why = input_reads.changed_since(listed, 100)
    finally:
        served.shutdown()
        served.server_close()
    assert why is not None and "failed the check after its read (the server answered 403 Forbidden)" in why, why
    assert not [s for s in SECRETS if s in why], why
