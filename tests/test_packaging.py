"""What ``pip install kolectra`` gets, built as a release builds it: the sdist from a copy of the
repository's files (tracked, or new and not ignored), the wheel from the unpacked sdist (what
``uv build`` and ``python -m build`` do). The wheel holds every file of the package folders (each
module, the embedded sample ``kolectra run`` reads) and the license, and nothing else; the sdist
holds what builds it, and no half of the test suite; the wheel is the same bytes twice under
``SOURCE_DATE_EPOCH``. A module or data file left out of ``[tool.setuptools]`` would work from the
checkout (the editable install maps each whole folder) and fail only after a real install.

setuptools is the build backend, run in a child process without build isolation (no download:
the ``test`` extra installs it)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
# package folder -> its place in the installed tree ("core" -> "kolectra/core")
FOLDERS = {folder: package.replace(".", "/") for package, folder in
           PYPROJECT["tool"]["setuptools"]["package-dir"].items()}
DIST_INFO = {"METADATA", "WHEEL", "RECORD", "entry_points.txt", "top_level.txt", "licenses/LICENSE"}
SDIST_OWN = {"PKG-INFO", "setup.cfg", "pyproject.toml", "README.md", "LICENSE", "MANIFEST.in"}

BUILD = """
import sys
import setuptools.build_meta as backend
print(getattr(backend, "build_" + sys.argv[1])(sys.argv[2]))
"""


def repository_files() -> list[str]:
    """The files a clean checkout of this tree has: tracked, plus new files git does not ignore."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                             capture_output=True, check=True, timeout=60).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"needs a git checkout of the repository ({e})")
    return sorted(p for p in out.decode().split("\0") if p and (REPO / p).is_file())


def folder_files(files: list[str]) -> set[str]:
    """The repository's files under the package folders."""
    return {rel for rel in files if rel.partition("/")[0] in FOLDERS and "__pycache__" not in rel}


def installed_name(rel: str) -> str:
    """Where a file of a package folder lands in the wheel: ``core/x.py`` -> ``kolectra/core/x.py``."""
    top, _, rest = rel.partition("/")
    return f"{FOLDERS[top]}/{rest}"


def build(kind: str, source: Path, out: Path, env: dict | None = None) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([sys.executable, "-c", BUILD, kind, str(out)], cwd=source, capture_output=True, text=True,
                       timeout=300, env={**os.environ, **(env or {})})
    assert r.returncode == 0, r.stderr[-3000:]
    return out / r.stdout.strip().splitlines()[-1]


def unpack(sdist: Path, into: Path) -> Path:
    with tarfile.open(sdist) as tar:
        tar.extractall(into, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))  # 3.11.4+
    (root,) = into.iterdir()
    return root


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(repository files, sdist, two wheels built from two unpacked copies of it)."""
    pytest.importorskip("setuptools", minversion="77", reason="the `test` extra installs setuptools, the backend")
    tmp = tmp_path_factory.mktemp("packaging")
    files = repository_files()
    source = tmp / "source"
    for rel in files:
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, source / rel)
    sdist = build("sdist", source, tmp / "dist")
    epoch = {"SOURCE_DATE_EPOCH": "1700000000"}
    first = build("wheel", unpack(sdist, tmp / "a"), tmp / "wheel-a", epoch)
    second_source = unpack(sdist, tmp / "b")
    for path in second_source.rglob("*"):  # other file times: the epoch alone must fix the wheel's
        os.utime(path, (2_000_000_000, 2_000_000_000))
    second = build("wheel", second_source, tmp / "wheel-b", epoch)
    return files, sdist, first, second


def wheel_names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as z:
        return set(z.namelist())


def test_the_wheel_holds_every_file_of_the_package_folders_and_nothing_else(built):
    files, _, wheel, _ = built
    dist_info = f"kolectra-{PYPROJECT['project']['version']}.dist-info/"
    names = wheel_names(wheel)
    expected = {installed_name(rel) for rel in folder_files(files)} | {dist_info + n for n in DIST_INFO}
    assert {"kolectra/pipeline/run.py", "kolectra/pipeline/sample/reviews.jsonl.gz"} <= expected
    missing, stray = sorted(expected - names), sorted(names - expected)
    assert not missing, f"in the package folders but not in the wheel ([tool.setuptools] in pyproject.toml): {missing}"
    assert not stray, f"in the wheel but not in the package folders: {stray}"


def test_the_wheels_metadata_names_the_license_extras_and_command(built):
    _, _, wheel, _ = built
    with zipfile.ZipFile(wheel) as z:
        info = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = z.read(info).decode()
        entry_points = z.read(info.replace("METADATA", "entry_points.txt")).decode()
        license_text = z.read(info.replace("METADATA", "licenses/LICENSE")).decode()
    fields = [tuple(line.split(": ", 1)) for line in metadata.split("\n\n", 1)[0].splitlines()]
    assert ("License-Expression", PYPROJECT["project"]["license"]) in fields
    assert ("License-File", "LICENSE") in fields and "Apache License" in license_text
    assert ("Requires-Python", PYPROJECT["project"]["requires-python"]) in fields
    assert {v for k, v in fields if k == "Provides-Extra"} == set(PYPROJECT["project"]["optional-dependencies"])
    assert "kolectra = kolectra.pipeline.cli:entry" in entry_points


def test_the_sdist_holds_what_builds_the_wheel_and_no_tests(built):
    files, sdist, _, _ = built
    with tarfile.open(sdist) as tar:
        names = {m.name.partition("/")[2] for m in tar.getmembers() if m.isfile()}
    own = {n for n in names if n.startswith("kolectra.egg-info/")} | SDIST_OWN
    in_folders = folder_files(files)
    missing, stray = sorted(in_folders - names), sorted(names - in_folders - own)
    assert not missing, f"in the package folders but not in the sdist: {missing}"
    assert not stray, f"in the sdist besides the packages, README and LICENSE (MANIFEST.in): {stray}"


def test_the_wheel_is_the_same_bytes_twice_under_source_date_epoch(built):
    _, _, first, second = built
    assert first.read_bytes() == second.read_bytes()


def test_python_m_kolectra_runs_the_command_from_the_wheel(built, tmp_path):
    """``python -m kolectra`` (no script on the PATH): ``kolectra`` is a namespace package, and
    ``kolectra/__main__.py``, the one file of the repository's kolectra/ folder, is its ``__main__``.
    Run from the unpacked wheel, first on the path, in an empty folder."""
    _, _, wheel, _ = built
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    assert not (site / "kolectra" / "__init__.py").exists()
    env = {**os.environ, "PYTHONPATH": str(site)}
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    r = subprocess.run([sys.executable, "-m", "kolectra", "--help"], cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("usage: kolectra "), r.stderr[-2000:]
    where = subprocess.run([sys.executable, "-c", "import kolectra.__main__ as m, kolectra.pipeline.cli as c; "
                            "print(m.__file__); print(c.__file__)"], cwd=cwd, env=env, capture_output=True,
                           text=True, timeout=120)
    assert where.returncode == 0, where.stderr[-2000:]
    assert all(Path(f).is_relative_to(site) for f in where.stdout.split()), where.stdout


def test_the_build_backends_floor_reads_this_pyproject():
    """``project.license`` as an SPDX expression (PEP 639) is read by setuptools 77 and later;
    68 to 76 refuse the whole file ("`project.license` must be valid exactly by one definition"),
    which a build without isolation (a distribution's, an offline one) would meet."""
    floor = [re.fullmatch(r"setuptools\s*>=\s*(\d+)(?:\.\d+)*", r) for r in PYPROJECT["build-system"]["requires"]]
    assert [m for m in floor if m], PYPROJECT["build-system"]["requires"]
    if isinstance(PYPROJECT["project"].get("license"), str):
        assert int(next(m for m in floor if m).group(1)) >= 77


def _load_copy(source: Path, dest: Path):
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, dest)
    spec = importlib.util.spec_from_file_location(f"manifest_copy_{abs(hash(dest))}", dest)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args], cwd=cwd,
                          capture_output=True, text=True, check=True, timeout=60).stdout.strip()


def test_an_install_inside_another_repository_records_no_commit_of_its_own(tmp_path):
    """A manifest's ``provenance.git_commit`` is the commit of the kolectra checkout that ran. An
    installed kolectra inside a git repository of the user's (``project/.venv/.../site-packages``,
    the venv ignored) recorded the *project's* HEAD as kolectra's commit; a copy git tracks (a
    checkout, kolectra vendored into a larger repository) still records it."""
    if shutil.which("git") is None:
        pytest.skip("needs git")
    project = tmp_path / "project"
    project.mkdir()
    _git(project, "init", "-q")
    (project / ".gitignore").write_text(".venv/\n", encoding="utf-8")
    _git(project, "add", ".gitignore")
    _git(project, "commit", "-q", "-m", "the user's project")
    source = REPO / "pipeline" / "store" / "manifest.py"
    installed = _load_copy(source, project / ".venv/lib/site-packages/kolectra/pipeline/store/manifest.py")
    assert installed._git_commit() is None
    vendored = _load_copy(source, project / "third_party/kolectra/pipeline/store/manifest.py")
    _git(project, "add", "third_party")
    _git(project, "commit", "-q", "-m", "vendored")
    assert vendored._git_commit() == _git(project, "rev-parse", "HEAD")


def test_a_checkout_with_edited_code_records_that_its_commit_is_not_the_whole_story(tmp_path):
    """``provenance.git_commit`` named the commit alone, so an artifact built from a checkout with edited
    (uncommitted) code claimed that commit's code; ``git_dirty`` says so now, and ``artifacts show`` /
    ``report`` name it. Edits to docs or tests, and untracked files, do not count; an install records null."""
    if shutil.which("git") is None:
        pytest.skip("needs git")
    project = tmp_path / "project"
    project.mkdir()
    _git(project, "init", "-q")
    vendored = _load_copy(REPO / "pipeline" / "store" / "manifest.py",
                          project / "third_party/kolectra/pipeline/store/manifest.py")
    (project / "third_party/kolectra/docs").mkdir()
    (project / "third_party/kolectra/docs/a.md").write_text("a\n", encoding="utf-8")
    (project / "elsewhere.py").write_text("y = 1\n", encoding="utf-8")
    _git(project, "add", "third_party", "elsewhere.py")
    _git(project, "commit", "-q", "-m", "vendored")
    assert vendored._git_dirty() is False
    (project / "third_party/kolectra/docs/a.md").write_text("b\n", encoding="utf-8")  # docs: not code
    (project / "third_party/kolectra/pipeline/new.py").write_text("x = 1\n", encoding="utf-8")  # untracked
    (project / "elsewhere.py").write_text("y = 2\n", encoding="utf-8")  # the project's code, not kolectra's
    assert vendored._git_dirty() is False
    source = project / "third_party/kolectra/pipeline/store/manifest.py"
    source.write_text(source.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    assert vendored._git_dirty() is True
    p = vendored.provenance([], "s", "f")
    assert p["git_commit"] == _git(project, "rev-parse", "HEAD") and p["git_dirty"] is True
    assert vendored.commit_label(p) == f"git {p['git_commit'][:12]} with uncommitted changes"
    assert vendored.commit_label({**p, "git_dirty": False}) == f"git {p['git_commit'][:12]}"
    assert vendored.commit_label({"git_commit": p["git_commit"]}) == f"git {p['git_commit'][:12]}"  # older manifests
    installed = _load_copy(REPO / "pipeline" / "store" / "manifest.py",
                           tmp_path / "site-packages/kolectra/pipeline/store/manifest.py")
    assert installed.provenance([], "s", "f")["git_dirty"] is None
