"""An s3:// input deleted after the listing (as the job starts), a gs:// one whose access is withdrawn then, is
one line, exit 2, naming it: not an internal error, not a "damaged" file to accept. moto's S3 server and
fake-gcs-server, reached by s3fs and gcsfs as a user's bucket is."""

from __future__ import annotations

import json
import os

from kolectra.core import storage
from kolectra.corpus import listing
from kolectra.pipeline.cli import main
from tests.gcs_support import gcs_endpoint, gs_bucket, iam  # noqa: F401  (fixtures)
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)

BODY = "".join(json.dumps({"text": f"The film was a delight and every actor was at their best, review {i}."}) + "\n"
               for i in range(300)).encode()


def test_an_object_deleted_after_the_listing_is_one_line_naming_it(bucket, tmp_path, monkeypatch, capfd):  # noqa: F811
    """Before: '1 damaged input file(s) ...: cannot open: FileNotFoundError: ... accept what could be read with
    --set max_damaged_files=1': no damage, and nothing of it to accept. (The line crosses worker processes as
    the https one does: tests/test_corpus_http_read_failures.py.)"""
    url = f"{bucket}/in/reviews.jsonl"
    storage.write_bytes(url, BODY)
    write = listing.write

    def deleting(*a, **k):  # the job starts: the object goes
        storage.remove(url)
        return write(*a, **k)

    monkeypatch.setattr(listing, "write", deleting)
    code = main(["corpus", "--input", url, "--out", str(tmp_path / "root"), "--set", "language=en"])
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("kolectra corpus:")]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert f"could not be read after the listing: {url}: gone from the store since the listing" in lines[0], lines[0]


def test_a_store_read_refused_or_pinned_to_a_version_gone_says_which():
    """s3fs's own translations of botocore's errors (as its reads raise them), sorted by what the user does next."""
    from botocore.exceptions import ClientError
    from s3fs.errors import translate_boto_error

    from kolectra.corpus import read_failures

    def raised(code: str) -> BaseException:
        error = ClientError({"Error": {"Code": code, "Message": code}}, "GetObject")
        try:
            raise translate_boto_error(error) from error
        except Exception as e:  # noqa: BLE001 - what a read of the object would raise
            return e

    said = {code: read_failures.of("s3://b/in/reviews.jsonl", raised(code)).why
            for code in ("NoSuchKey", "AccessDenied", "PreconditionFailed", "SlowDown")}
    assert said["NoSuchKey"].startswith("gone from the store since the listing")
    assert said["AccessDenied"].startswith("the store refused its read (access denied)")
    assert said["PreconditionFailed"].startswith("it changed during the read")
    assert said["SlowDown"].startswith("the store failed its read (OSError:")
    assert read_failures.of("s3://b/x", TypeError("a bug")) is None and read_failures.of("/local/x", OSError()) is None


def test_a_gs_object_whose_read_is_refused_after_the_listing_is_one_line_naming_it(gs_bucket, tmp_path,  # noqa: F811
                                                                                  monkeypatch, capfd):
    """Access withdrawn as the job starts (fake-gcs-server behind a front that answers GCS's 403 from then on:
    the IAM it does not model). Before: the 'damaged input file(s)' line, or an internal error."""
    url = f"{gs_bucket}/in/reviews.jsonl"
    storage.write_bytes(url, BODY)
    withdrawn = []
    refused = (403, "team@p.iam.gserviceaccount.com does not have storage.objects.get access to the Google Cloud "
                    "Storage object. Permission 'storage.objects.get' denied on resource (or it may not exist).")
    write = listing.write

    def withdrawing(*a, **k):  # the job starts: access goes
        withdrawn.append(True)
        return write(*a, **k)

    monkeypatch.setattr(listing, "write", withdrawing)
    with iam(os.environ["STORAGE_EMULATOR_HOST"], lambda method, path: refused if withdrawn else None) as front:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", front.url)
        storage.reset()
        try:
            code = main(["corpus", "--input", url, "--out", str(tmp_path / "root"), "--set", "language=en"])
        finally:
            monkeypatch.undo()
            storage.reset()
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("kolectra corpus:")]
    assert code == 2 and len(lines) == 1 and "internal error" not in err, err  # (the front's threads print theirs)
    assert f"could not be read after the listing: {url}: the store refused or failed it after the listing (permission" \
        in lines[0] and "restore access" in lines[0], lines[0]
