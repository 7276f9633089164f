"""Second read of corpus/read_failures.py: the waits before a failed https read's retries.

- the checks before the job read an input with the job's 5 retries over 15 s each, and passed over its
  failure all the same (the job's read names it): a server that answers HEAD and fails every GET held the
  job 16 s a check and a file; they try once more now;
- a ``Retry-After`` in its HTTP-date form was taken for none.

A real local http.server on 127.0.0.1 (tests/test_corpus_http_read_failures_ranges.py's), the real job in process.
"""

from __future__ import annotations

from kolectra.corpus import listing, read_failures
from tests.test_corpus_http_read_failures import FAST, WAITS, _corpus
from tests.test_corpus_http_read_failures_ranges import Flaky


def test_the_checks_before_the_job_try_a_failing_read_once_more_the_jobs_read_as_many_times_as_set(tmp_path,
                                                                                                 monkeypatch, capfd):
    """A server that answers HEAD and fails every GET: each check before the job (its text field, whether it is
    Parquet misnamed, its JSONL text's share) read the file with the job's 5 retries over 15 s, and passed over
    its failure all the same (the job's read names it): one file took 50 s to its line, 16 of them the job's
    (here, 3 retries each: 9 GETs before the job). They try once more now; the job's read as set."""
    monkeypatch.setenv(WAITS, FAST)
    with Flaky({"reviews.jsonl": b'{"text": "a review"}\n' * 50}, plan=lambda n: "503") as server:
        server.armed = True
        began = []
        write = listing.write

        def started(*a, **k):
            began.append(len(server.gets))
            return write(*a, **k)

        monkeypatch.setattr(listing, "write", started)
        assert _corpus(server.url("reviews.jsonl"), tmp_path / "root") == 2
        err = capfd.readouterr().err
        assert "failed its read 4 times in a row, the last: 503 Service Unavailable" in err, err
        [before] = began
        assert 0 < before <= 6 and len(server.gets) - before == 4, (before, server.gets)
    assert read_failures.retry_waits() == (0.05, 0.05, 0.05)  # after the checks: the job's own
    with read_failures.before_the_job():
        assert read_failures.retry_waits() == (0.05,)
    monkeypatch.delenv(WAITS)
    with read_failures.before_the_job():
        assert read_failures.retry_waits() == read_failures.RETRY_WAITS[:1]


def test_a_retry_after_given_as_a_date_is_waited_for_up_to_the_most():
    """Before: ``Retry-After: <HTTP-date>`` (a CDN's or a maintenance page's form) was read as no header, the
    back-off's 0.5 s against a 503 that asked for 20 s; a delay in seconds was already honoured."""
    import datetime
    import email.utils

    import aiohttp
    from multidict import CIMultiDict

    def failed(after: str):
        return aiohttp.ClientResponseError(None, (), status=503, message="Service Unavailable",
                                           headers=CIMultiDict({"Retry-After": after}))

    later = email.utils.format_datetime(datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=20),
                                        usegmt=True)
    assert 17 <= read_failures.wait_before(failed(later), 0, (0.5,)) <= 20
    ages_ago = "Wed, 21 Oct 2015 07:28:00 GMT"
    far = email.utils.format_datetime(datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=2),
                                      usegmt=True)
    assert read_failures.wait_before(failed(ages_ago), 0, (0.5,)) <= 0.6  # past: the back-off's own
    assert read_failures.wait_before(failed(far), 0, (0.5,)) == read_failures.MOST_RETRY_AFTER
    for odd in ("soon", "-5", "nan", "inf", ""):
        assert 0.4 <= read_failures.wait_before(failed(odd), 0, (0.5,)) <= read_failures.MOST_RETRY_AFTER, odd
