"""How long a store's client tries a store that does not answer, through the clients' own settings (no
retry loop of kolectra's): the storage options :func:`kolectra.core.storage.filesystem` gives s3fs and
gcsfs, and the words a failure to reach a store ends with (docs/scale.md, "A store that does not answer").

- S3 (s3fs on botocore): where the user set no retries (``AWS_MAX_ATTEMPTS``, ``AWS_RETRY_MODE``, or
  ``max_attempts``/``retry_mode`` in the profile), botocore's ``standard`` mode with :data:`S3_ATTEMPTS`
  attempts in all (its ``legacy`` default: 5, about 10 s of waits); what the user set is kept. Each
  connection attempt waits s3fs's ``connect_timeout``, 5 s. Up to :data:`S3_CONNECTIONS` connections
  at once (botocore's default, 10, held the corpus plan's small GETs to 10 round trips at a time).
  Botocore settings the user gave s3fs through fsspec's config (``config_kwargs`` in ``FSSPEC_S3`` or
  its config files; retries, a pool size) win over these: fsspec takes a caller's options over its
  config key by key, so kolectra's ``config_kwargs`` would otherwise replace them whole.
- GCS (gcsfs on aiohttp): each connection attempt waits at most :data:`CONNECT_SECONDS` (aiohttp's
  ``sock_connect``, through gcsfs's ``requests_timeout``; none before: the system's, about 2 minutes);
  gcsfs retries a request 6 times, about 35 s of waits, and has no setting for that count, so opening a
  root (its first request) is bounded at :data:`GCS_OPEN_SECONDS` by fsspec's own call timeout.
"""

from __future__ import annotations

import contextlib
import copy
import os

CONNECT_SECONDS = 5  # each connection attempt under gcsfs (aiohttp's sock_connect): s3fs's own connect_timeout
S3_ATTEMPTS = 5  # botocore's standard mode, where neither AWS_MAX_ATTEMPTS/AWS_RETRY_MODE nor the profile sets one: legacy's count, so a long run's uploads ride out a throttling burst as before
# opening a gs:// root (its first request, check_bucket) waits at most this: gcsfs retries a request 6 times
# (about 35 s of waits, the count fixed in gcsfs: it has no setting for it); fsspec's own call timeout bounds it
GCS_OPEN_SECONDS = 15
# connections s3fs's client keeps open at once (botocore's max_pool_connections, default 10): the corpus
# plan asks for 64 files' trailers at a time (corpus/memory_model.STORE_READERS); gcsfs's aiohttp allows 100
S3_CONNECTIONS = 64


def _s3_retries_set() -> str | None:
    """The retry setting the user gave botocore (its environment or the profile's config file), or None."""
    import botocore.session  # noqa: PLC0415 - only for s3:// roots

    session = botocore.session.Session()
    with contextlib.suppress(Exception):  # a profile that is not there is botocore's to report, at the request
        attempts = session.get_config_variable("max_attempts")
        if attempts is not None:
            return f"max_attempts={attempts}"
    given = _fsspec_config_kwargs().get("retries")
    if given is not None:
        return f"retries={given} in fsspec's config"
    mode = os.environ.get("AWS_RETRY_MODE")
    with contextlib.suppress(Exception):  # (as above)
        mode = mode or session.get_scoped_config().get("retry_mode")
    return f"retry_mode={mode}" if mode else None


def _fsspec_config_kwargs() -> dict:
    """The botocore settings (``config_kwargs``) the user gave s3fs through fsspec's config."""
    import fsspec.config  # noqa: PLC0415 - only for s3:// locations

    given: dict = {}
    for proto in ("s3", "s3a"):  # s3fs's protocols, in fsspec's order
        kwargs = (fsspec.config.conf.get(proto) or {}).get("config_kwargs")
        given.update(kwargs if isinstance(kwargs, dict) else {})
    return copy.deepcopy(given)  # botocore fills in a retries dict it is given: fsspec's config stays as set


def client_options(proto: str) -> dict:
    """The storage options kolectra gives a store's fsspec filesystem: on S3, :data:`S3_CONNECTIONS`
    connections and, where the user set none, botocore's standard retries, beside (under) the botocore
    settings fsspec's config gives; on GCS a bound on each connection attempt."""
    if proto in ("s3", "s3a"):
        ours: dict = {"max_pool_connections": S3_CONNECTIONS}
        if _s3_retries_set() is None:  # "total": the first attempt included
            ours["retries"] = {"mode": "standard", "total_max_attempts": S3_ATTEMPTS}
        return {"config_kwargs": {**ours, **_fsspec_config_kwargs()}}  # the user's settings win
    if proto in ("gs", "gcs"):
        import aiohttp  # noqa: PLC0415 - gcsfs's HTTP client

        return {"requests_timeout": aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_SECONDS)}
    return {}


def endpoint_and_retries(proto: str) -> str:
    """' at ENDPOINT (the variable naming it), after what retries (their setting)', for a store of
    protocol ``proto`` that did not answer."""
    if proto in ("s3", "s3a"):
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        where = f" at {endpoint} (AWS_ENDPOINT_URL)" if endpoint else ""
        with contextlib.suppress(Exception):
            given = _s3_retries_set()
            tries = (
                f" (botocore's retries: {given}, as you set them)"
                if given
                else (f" after {S3_ATTEMPTS} attempts (AWS_MAX_ATTEMPTS sets them)")
            )
            return where + tries
        return where
    if proto in ("gs", "gcs"):
        endpoint = os.environ.get("STORAGE_EMULATOR_HOST")
        where = f" at {endpoint} (STORAGE_EMULATOR_HOST; " if endpoint else " at https://storage.googleapis.com ("
        return where + "gcsfs retries a request 6 times over about 35 s and has no setting for it)"
    return ""
