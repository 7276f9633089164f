"""A store endpoint that does not answer (a closed port on 127.0.0.1) fails in one line that names the
endpoint and the setting of the client's retries, within a bound the clients' own settings give
(core/store_clients.py): botocore's standard retries (5 attempts, ``AWS_MAX_ATTEMPTS`` kept when the
user sets it) for S3 (s3fs keeps its 5 s connect timeout); aiohttp's connect timeout under gcsfs, and fsspec's call
timeout on opening a gs:// root, for GCS (gcsfs's retry count has no setting). No timed asserts."""

from __future__ import annotations

import pytest

from kolectra.core import storage, store_clients
from tests.gcs_support import NO_METADATA  # noqa: F401  (imported first: google-auth never probes a metadata server)
from tests.s3_support import free_port


@pytest.fixture()
def closed(monkeypatch, tmp_path):
    """The URL of a port nobody listens on, and the store clients made afresh around the test."""
    endpoint = f"http://127.0.0.1:{free_port()}"
    for k, v in {
        "AWS_ACCESS_KEY_ID": "kolectra-test",
        "AWS_SECRET_ACCESS_KEY": "kolectra-test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_ENDPOINT_URL": endpoint,
        "STORAGE_EMULATOR_HOST": endpoint,
        "GOOGLE_CLOUD_PROJECT": "kolectra-test",
    }.items():
        monkeypatch.setenv(k, v)
    for k in ("AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE", "AWS_PROFILE", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(k, raising=False)
    storage.reset()
    yield endpoint
    storage.reset()


def test_s3_tries_five_times_and_says_which_setting_sets_that(closed):
    with pytest.raises(storage.StoreError) as failed:
        storage.check_bucket("s3://b/x")
    message = str(failed.value)
    assert "\n" not in message and message.startswith("s3://b/x: cannot reach the store"), message
    assert f"at {closed} (AWS_ENDPOINT_URL) after 5 attempts (AWS_MAX_ATTEMPTS sets them)" in message
    config = storage.filesystem("s3://b")[0].s3.meta.config  # what the client that failed was given
    assert config.retries == {"mode": "standard", "total_max_attempts": 5}
    assert config.connect_timeout == 5  # s3fs's own


def test_s3_keeps_the_retries_the_user_set(closed, monkeypatch):
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    with pytest.raises(storage.StoreError, match=r"\(botocore's retries: max_attempts=1, as you set them\)"):
        storage.check_bucket("s3://b/x")
    fs = storage.filesystem("s3://b")[0]
    assert "retries" not in fs.config_kwargs  # none of kolectra's
    assert fs.s3.meta.config.retries == {"total_max_attempts": 1, "mode": "legacy"}  # botocore's, from the variable


def test_opening_a_gcs_root_is_bounded_by_fsspec_s_timeout_and_names_the_endpoint(closed, monkeypatch):
    monkeypatch.setattr(storage, "GCS_OPEN_SECONDS", 2)  # gcsfs's own retries would go on about 35 s
    with pytest.raises(storage.StoreError) as failed:
        storage.check_bucket("gs://b/x")
    message = str(failed.value)
    assert "\n" not in message and message.startswith("gs://b/x: cannot reach the store"), message
    assert f"at {closed} (STORAGE_EMULATOR_HOST; gcsfs retries a request 6 times" in message, message
    assert message.endswith("no answer within 2 s"), message
    fs = storage.filesystem("gs://b")[0]
    assert fs.requests_timeout.sock_connect == store_clients.CONNECT_SECONDS and fs.requests_timeout.total is None


def test_a_profile_that_is_not_there_is_one_store_line_as_before(closed, monkeypatch):
    """AWS_PROFILE naming no profile (a typo): botocore reports it at the request, which the store
    says in one line; the retry setting looked up beside it must not raise it first, unnamed (the
    command ended in 'internal error', exit 1)."""
    monkeypatch.setenv("AWS_PROFILE", "kolectra-no-such-profile")
    with pytest.raises(storage.StoreError, match=r"^s3://b/x: ProfileNotFound: .*kolectra-no-such-profile"):
        storage.read_bytes("s3://b/x")


def test_the_gcs_line_without_an_emulator_names_google_s_endpoint(monkeypatch):
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    assert store_clients.endpoint_and_retries("gs") == (
        " at https://storage.googleapis.com (gcsfs retries a request 6 times over about 35 s and has no setting for it)")


@pytest.mark.parametrize("attempts", [None, "1"])
def test_s3_keeps_the_client_settings_given_through_fsspec_s_config(closed, monkeypatch, attempts):
    """fsspec reads s3fs's options from the environment (``FSSPEC_S3``, docs/scale.md) or its config files:
    botocore settings there (``config_kwargs``: a path-style bucket address for an S3-compatible server,
    a longer read timeout) were replaced by kolectra's own config_kwargs (fsspec lets a caller's options
    win, key by key), on every S3 client since 39c2ff4 (its connection pool) and before that where the user
    set no retries. They are merged now: the user's settings win, kolectra's fill the rest."""
    import fsspec.config

    if attempts:
        monkeypatch.setenv("AWS_MAX_ATTEMPTS", attempts)
    given = {"s3": {"addressing_style": "path"}, "read_timeout": 61, "max_pool_connections": 20}
    monkeypatch.setitem(fsspec.config.conf, "s3", {"config_kwargs": given})
    storage.reset()
    config = storage.filesystem("s3://b")[0].s3.meta.config
    assert (config.s3, config.read_timeout, config.max_pool_connections) == ({"addressing_style": "path"}, 61, 20)
    assert config.connect_timeout == 5  # s3fs's own, as before
    if attempts:  # botocore's, from the variable, as test_s3_keeps_the_retries_the_user_set
        assert config.retries == {"total_max_attempts": 1, "mode": "legacy"}
    else:
        assert config.retries == {"mode": "standard", "total_max_attempts": 5}


def test_s3_retries_given_through_fsspec_s_config_are_kept_and_named(closed, monkeypatch):
    """Retries set in fsspec's config (``config_kwargs.retries``) are the user's: kept, and the line for an
    unreachable store names them, not kolectra's 5 attempts."""
    import fsspec.config

    monkeypatch.setitem(fsspec.config.conf, "s3", {"config_kwargs": {"retries": {"max_attempts": 0}}})
    storage.reset()
    with pytest.raises(storage.StoreError) as failed:
        storage.check_bucket("s3://b/x")
    assert "(botocore's retries: retries={'max_attempts': 0} in fsspec's config, as you set them)" in str(failed.value)
    assert storage.filesystem("s3://b")[0].s3.meta.config.retries == {"total_max_attempts": 1, "mode": "legacy"}
