"""The artifact store on an object store (tests/test_store_s3.py's moto server): failures to reach it (no
bucket, no endpoint, no credentials, a secret or key refused) are one line and exit 2, and credentials
confined to the root's prefix (no HEAD of the bucket) open it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from tests.s3_support import free_port, s3_endpoint  # noqa: F401  (fixtures)
from tests.store_s3_support import _child, _cli, _own_cache  # noqa: F401  (_own_cache: autouse)


# ---- failures -------------------------------------------------------------------------------------
def test_a_missing_bucket_is_one_line(s3_endpoint):
    r = _cli("artifacts", "list", "--out", "s3://no-such-bucket-kolectra/x")
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "does not exist" in r.stderr and "no-such-bucket" in r.stderr


def test_a_root_without_a_bucket_is_one_line(s3_endpoint):
    r = _cli("artifacts", "list", "--out", "s3://")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "names no bucket" in r.stderr, r.stderr


def test_an_unreachable_endpoint_is_one_line(s3_endpoint):
    closed = f"http://127.0.0.1:{free_port()}"
    r = _cli("artifacts", "list", "--out", "s3://b/x", env={"AWS_ENDPOINT_URL": closed, "AWS_MAX_ATTEMPTS": "1"})
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "cannot reach the store" in r.stderr and closed in r.stderr


def test_missing_credentials_are_one_line(s3_endpoint, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    env.update(AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"), AWS_CONFIG_FILE=str(tmp_path / "none"))
    r = subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", "artifacts", "list", "--out", "s3://b/x"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "credentials" in r.stderr


def test_credentials_confined_to_the_roots_prefix_open_it(tmp_path):
    # a shared bucket's usual grant: list, read and write below a prefix, no HEAD of the bucket (on
    # S3 that needs s3:ListBucket on the whole bucket, refused under an s3:prefix condition; moto
    # models it as the separate s3:HeadBucket action). The root was refused: "permission refused"
    import boto3

    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", "from moto.server import main; main()", "-H", "127.0.0.1",
                               "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True, env={**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "4"})
    try:
        endpoint = f"http://127.0.0.1:{port}"
        admin = {"endpoint_url": endpoint, "region_name": "us-east-1", "aws_access_key_id": "admin",
                 "aws_secret_access_key": "admin"}
        deadline = time.monotonic() + 60
        while True:
            try:
                boto3.client("s3", **admin).create_bucket(Bucket="shared")  # the 4 actions before IAM applies
                break
            except Exception:  # noqa: BLE001 - not listening yet
                assert server.poll() is None and time.monotonic() < deadline, "moto server did not start"
                time.sleep(0.2)
        iam = boto3.client("iam", **admin)
        iam.create_user(UserName="team")
        iam.put_user_policy(UserName="team", PolicyName="team-prefix", PolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": "arn:aws:s3:::shared"},
                {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
                 "Resource": "arn:aws:s3:::shared/team/*"}]}))
        key = iam.create_access_key(UserName="team")["AccessKey"]
        env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": key["AccessKeyId"],
               "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"], "AWS_DEFAULT_REGION": "us-east-1",
               "AWS_EC2_METADATA_DISABLED": "true", "KOLECTRA_CACHE": str(tmp_path / "cache")}
        ok = _child("toy", "s3://shared/team/kolectra", "none", "--text", "a team's prefix", env=env)
        assert ok.returncode == 0, ok.stderr
        assert ok.stdout.startswith("s3://shared/team/kolectra/corpus/toy-")
        listed = _cli("artifacts", "list", "--out", "s3://shared/team/kolectra", env=env)
        assert listed.returncode == 0 and "toy-" in listed.stdout, listed.stderr
        # what the credentials may not touch is still one line naming it
        other = _cli("artifacts", "list", "--out", "s3://elsewhere/k", env=env)
        assert other.returncode == 2 and other.stderr.count("\n") == 1 and "s3://elsewhere/k" in other.stderr
        assert "permission refused" in other.stderr
        # a wrong secret or an unknown key is named as such, not as a permission refused
        for wrong in ({"AWS_SECRET_ACCESS_KEY": "not-the-secret"}, {"AWS_ACCESS_KEY_ID": "AKIANOSUCHKEY0000000"}):
            refused = _cli("artifacts", "list", "--out", "s3://shared/team/kolectra", env={**env, **wrong})
            assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
            assert "refused the credentials (check the access key and secret)" in refused.stderr
    finally:
        server.terminate()
        server.wait(timeout=30)
