"""Launch paths that say what they need: a distributed runner that cannot start from this launcher
is one line naming what to install or pass, exit 2, never an internal error (docs/scale.md)."""

import subprocess
import sys
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[1] / "pipeline" / "sample" / "reviews.jsonl.gz"


def _corpus(tmp_path, *beam_args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", "corpus", "--input", str(SAMPLE),
                           "--out", str(tmp_path / "root"), *beam_args], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)


def test_dataflow_without_googles_libraries_names_the_extra(tmp_path):
    r = _corpus(tmp_path, "--runner", "DataflowRunner", "--project", "my-project", "--region", "europe-west4",
                "--temp_location", "gs://my-bucket/tmp", "--corpus_staging", "gs://my-bucket/staging")
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert "internal error" not in r.stderr
    assert "pip install 'kolectra[gcp]'" in last or "GOOGLE_APPLICATION_CREDENTIALS" in last, last


def test_flink_without_its_job_server_jar_names_the_flags(tmp_path):
    r = _corpus(tmp_path, "--runner", "FlinkRunner", "--flink_master", "localhost:8081")
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert "internal error" not in r.stderr
    assert "--flink_job_server_jar" in last and "--job_endpoint" in last, last


def test_spark_without_its_job_server_jar_names_sparks_flags_not_flinks(tmp_path):
    r = _corpus(tmp_path, "--runner", "SparkRunner", "--spark_master_url", "spark://localhost:7077")
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert "--spark_job_server_jar" in last and "--job_endpoint" in last, last
    assert "flink" not in last.lower(), last  # it named --flink_version, which SparkRunner does not take


def test_an_unknown_flink_version_lists_the_known_ones(tmp_path):
    r = _corpus(tmp_path, "--runner", "FlinkRunner", "--flink_version", "0.1")
    assert r.returncode == 2 and "1.20" in r.stderr and "internal error" not in r.stderr, r.stderr


def test_google_failing_a_dataflow_launch_is_one_line_not_an_internal_error():
    """Beam checks Dataflow's options (the --temp_location bucket) through Google's client before any
    job. A launcher that cannot reach Google (kolectra[gcp], credentials set, no route) retried for
    about 4 minutes, then ended in ``internal error: RetryError`` (exit 1): now one line, exit 2."""
    from google.api_core.exceptions import RetryError

    from kolectra.corpus.runners import runner_setup_problem

    cause = ConnectionError("Failed to resolve 'oauth2.googleapis.com'")
    e = RetryError("Timeout of 120.0s exceeded, last exception: HTTPSConnectionPool(host='oauth2.googleapis.com', "
                   "port=443): Max retries exceeded with url: /token", cause)
    why = runner_setup_problem(e, "DataflowRunner")
    assert why is not None and "\n" not in why, why
    assert why.startswith("DataflowRunner: Google Cloud did not answer this launcher") and "oauth2.googleapis.com" in why
    assert "--temp_location" in why
    assert runner_setup_problem(e, "the runner") is None  # a local job's own failures are not the runner's setup
