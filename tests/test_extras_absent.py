"""The base install (``pip install kolectra``, no extra) as a user meets it: a command that needs an
extra ends with one line naming it (``pip install 'kolectra[EXTRA]'``), exit 2, no traceback; the
light commands need neither the extras nor torch nor Beam.

The test venv has the extras' libraries (s3fs, gcsfs for the store tests), so each command runs in
a child process whose ``sitecustomize`` (on ``PYTHONPATH``) makes the named modules unimportable,
as where they are not installed: a finder first on ``sys.meta_path`` raises ``ModuleNotFoundError``
for them and their submodules."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "pipeline" / "sample" / "reviews.jsonl.gz"

SITECUSTOMIZE = '''
import os
import sys

ABSENT = tuple(n for n in os.environ.get("KOLECTRA_TEST_ABSENT", "").split(",") if n)
RECORD = os.environ.get("KOLECTRA_TEST_IMPORTS")  # a file: each top-level module imported, a line


class Absent:
    """Modules named in KOLECTRA_TEST_ABSENT (and their submodules) import as if not installed."""

    def find_spec(self, name, path=None, target=None):
        if any(name == a or name.startswith(a + ".") for a in ABSENT):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        if RECORD and "." not in name:
            with open(RECORD, "a", encoding="utf-8") as f:
                f.write(name + "\\n")
        return None


sys.meta_path.insert(0, Absent())
'''

# what no extra installs: torch-xla (`xla`), s3fs (`s3`), gcsfs and Google's client libraries
# (`gcs`, `gcp`; not `google.protobuf`, which Beam needs), Beam's GCP modules (`gcp`)
EXTRAS_ONLY = ("torch_xla", "s3fs", "gcsfs", "google.auth", "google.cloud", "google.api_core",
               "apache_beam.io.gcp.gcsio", "apache_beam.runners.dataflow.internal.apiclient")


def kolectra(tmp_path: Path, *argv: str, absent: tuple[str, ...] = EXTRAS_ONLY,
             env: dict | None = None) -> subprocess.CompletedProcess:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
           "KOLECTRA_TEST_ABSENT": ",".join(absent), "HF_HUB_OFFLINE": "1", **(env or {})}
    r = subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", *argv], capture_output=True, text=True,
                       cwd=tmp_path, env=env, timeout=300)
    assert "Error in sitecustomize" not in r.stderr, r.stderr  # Python goes on without it, saying only this
    return r


def one_line_error(r: subprocess.CompletedProcess, command: str) -> str:
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith(f"kolectra {command}: error:")]
    assert len(errors) == 1 and r.stderr.strip().splitlines()[-1] == errors[0], r.stderr
    return errors[0]


def test_the_blocker_makes_a_module_absent(tmp_path):
    r = kolectra(tmp_path, "--version", absent=("s3fs",))
    assert r.returncode == 0, r.stderr
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site"), "KOLECTRA_TEST_ABSENT": "s3fs,email.mime"}
    probe = subprocess.run([sys.executable, "-c", "import importlib\nfor n in ('s3fs', 'email', 'email.mime.text'):\n"
                            "    try:\n        print(importlib.import_module(n).__name__)\n"
                            "    except ModuleNotFoundError as e:\n        print('absent', e.name)"],
                           capture_output=True, text=True, env=env, timeout=60)
    assert probe.stdout.splitlines() == ["absent s3fs", "email", "absent email.mime"], probe.stderr


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["run", "--help"], ["corpus", "--help"],
                                  ["pretrain", "--print-config", "keys"], ["artifacts", "list", "--out", "ROOT"]])
def test_the_light_commands_need_no_extra_nor_torch_nor_beam(tmp_path, argv):
    argv = [str(tmp_path / "root") if a == "ROOT" else a for a in argv]
    r = kolectra(tmp_path, *argv, absent=(*EXTRAS_ONLY, "torch", "apache_beam", "transformers"))
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(("url", "extra"), [("s3://bucket/kolectra", "s3"), ("gs://bucket/kolectra", "gcs")])
def test_a_root_on_a_store_without_its_extra_names_it(tmp_path, url, extra):
    line = one_line_error(kolectra(tmp_path, "artifacts", "list", "--out", url), "artifacts list")
    assert f"{url}: no filesystem for {url.split(':')[0]}://" in line and f"pip install 'kolectra[{extra}]'" in line


def test_dataflow_without_the_gcp_extra_names_it_and_leaves_the_store_alone(tmp_path):
    """Refused before its job, the launch has written nothing on the store and opens no client of it:
    it removed the job's folder it never made, and gcsfs's search for credentials (the GCE metadata
    server, with back-off) held the refusal for about 50 s where gcsfs is installed."""
    imports = tmp_path / "imports.txt"
    r = kolectra(tmp_path, "corpus", "--input", str(SAMPLE), "--out", str(tmp_path / "root"), "--runner",
                 "DataflowRunner", "--project", "p", "--region", "europe-west4", "--temp_location", "gs://b/tmp",
                 "--corpus_staging", "gs://b/staging", absent=("torch_xla", "google.auth", "google.cloud"),
                 env={"KOLECTRA_TEST_IMPORTS": str(imports)})
    assert "pip install 'kolectra[gcp]'" in one_line_error(r, "corpus")
    assert "gcsfs" not in imports.read_text(encoding="utf-8").split()


def test_device_xla_without_the_xla_extra_names_it_as_pip_installs_it(tmp_path):
    """The line names the extra as a user of the published package installs it, and as a clone does
    (the README's ``pip install -e .``); it said only ``pip install -e '.[xla]'``, which run in a
    user's own project installs that project."""
    r = kolectra(tmp_path, "pretrain", "--examples", "absent", "--out", str(tmp_path / "root"), "--device", "xla")
    line = one_line_error(r, "pretrain")
    assert "train.device=xla needs torch-xla" in line
    assert "pip install 'kolectra[xla]'" in line and "pip install -e '.[xla]'" in line


def test_dataflow_with_the_gcs_extra_but_not_the_gcp_one_names_the_extra_before_credentials(tmp_path):
    """``kolectra[gcs]`` brings google.auth (gcsfs's) but not Beam's Dataflow client: the line said to
    set up credentials, and only once they were, that the `gcp` extra was missing."""
    r = kolectra(tmp_path, "corpus", "--input", str(SAMPLE), "--out", str(tmp_path / "root"), "--runner",
                 "DataflowRunner", "--project", "p", "--region", "europe-west4", "--temp_location", "gs://b/tmp",
                 "--corpus_staging", "gs://b/staging",
                 absent=("torch_xla", "apache_beam.runners.dataflow.internal.apiclient", "apitools"),
                 env={"GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "no-such-key.json")})
    assert "pip install 'kolectra[gcp]'" in one_line_error(r, "corpus")
