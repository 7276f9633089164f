"""pyproject.toml's requirements against the tested set. Each library is a range (kolectra installs
beside other packages) whose floor is a version CI tests, bar the pins named below; the exact set
CI installs is in requirements/ci.txt and requirements/ci-xla.txt (written by .ci/lock), which
``.ci/run`` gives both installers as constraints, and which agrees with pyproject.toml and with the
worker image's pins. Reads files only: no resolver, no network."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
EXTRAS = PROJECT["optional-dependencies"]
# (extra or "" for the base, name) -> why it is pinned, not a range
PINNED = {("", "apache-beam"): "corpus/beam_local.py patches exactly 2.77.0; the worker image's Beam",
          ("gcp", "apache-beam"): "the same Beam",
          ("xla", "torch"): "torch-xla 2.9.0 needs exactly it", ("xla", "torch-xla"): "its last release"}
CALENDAR = {"s3fs", "gcsfs"}  # calendar versions: no major to stop below
# each lock file: the extras CI installs with it (.ci/run)
LOCKS = {"requirements/ci.txt": ("test",), "requirements/ci-xla.txt": ("xla", "test")}


def requirements(extra: str = "") -> list[Requirement]:
    return [Requirement(r) for r in (EXTRAS[extra] if extra else PROJECT["dependencies"])]


def every_requirement() -> list[tuple[str, Requirement]]:
    return [("", r) for r in requirements()] + [(e, r) for e in EXTRAS for r in requirements(e)]


def locked(path: str) -> dict[str, Version]:
    """name -> version of a file uv's `pip compile` wrote (`name==version` lines, `# via` comments)."""
    text = (REPO / path).read_text(encoding="utf-8")
    pins = re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)$", text, re.MULTILINE)
    assert pins, f"{path} holds no pins"
    return {canonicalize_name(n): Version(v) for n, v in pins}


def test_each_library_is_a_range_from_a_floor_to_a_ceiling_but_the_named_pins():
    for extra, req in every_requirement():
        name = canonicalize_name(req.name)
        specs = {s.operator: Version(s.version) for s in req.specifier}
        where = f"{req} ({extra or 'dependencies'})"
        if (extra, name) in PINNED:
            assert set(specs) == {"=="}, where
            continue
        assert "==" not in specs and ">=" in specs, f"{where}: a range with a floor, or a pin named in PINNED"
        if name in CALENDAR:
            continue
        assert "<" in specs, f"{where}: no ceiling"
        floor, ceiling = specs[">="], specs["<"]
        # at most the next major; for a 0.x library, whose minors break, the next minor
        limit = Version(f"{floor.major + 1}") if floor.major else Version(f"0.{floor.minor + 1}")
        assert floor < ceiling <= limit, f"{where}: a ceiling past {limit}"


@pytest.mark.parametrize("path", LOCKS)
def test_the_tested_set_satisfies_pyproject_and_names_every_requirement(path):
    pins = locked(path)
    for req in requirements() + [r for e in LOCKS[path] for r in requirements(e)]:
        if req.marker is not None and not req.marker.evaluate({"sys_platform": "linux"}):
            continue
        name = canonicalize_name(req.name)
        assert name in pins, f"{path} has no {name}: run .ci/lock"
        assert req.specifier.contains(pins[name], prereleases=True), f"{path}: {name} {pins[name]} not in {req}"
    if "xla" not in LOCKS[path]:
        assert "torch-xla" not in pins


def test_each_floor_is_a_tested_version():
    """The floor is what CI ran: raising a lock file's version (.ci/lock --upgrade) without the floor,
    or a floor to a version no lock holds, fails here. torch's floor is the XLA venv's torch."""
    tested = [locked(path) for path in LOCKS]
    for extra, req in every_requirement():
        name = canonicalize_name(req.name)
        floors = [Version(s.version) for s in req.specifier if s.operator in (">=", "==")]
        assert floors, req
        held = {pins[name] for pins in tested if name in pins}
        assert floors[0] in held, f"{req} ({extra or 'dependencies'}): floor {floors[0]}, tested {sorted(map(str, held))}"


def test_ci_installs_each_venv_with_its_lock_file():
    script = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    installs = [line for line in script.splitlines() if re.search(r"\bpip\"? install\b.* -e ", line)]
    assert len(installs) == 2, installs  # uv's, and pip's where uv cannot be installed
    for line in installs:
        assert re.search(r' (-c|--constraint) "\$3" ', line), f"installs without the tested set: {line}"
    for path, extras in LOCKS.items():
        assert re.search(rf"^venv \S+ {','.join(extras)} {re.escape(path)}$", script, re.MULTILINE), path


def test_the_worker_images_pins_are_the_tested_versions():
    """docker/worker.Dockerfile installs the worker-side libraries by exact version (with --no-deps
    for kolectra itself): the tested ones."""
    dockerfile = (REPO / "docker" / "worker.Dockerfile").read_text(encoding="utf-8")
    pins = locked("requirements/ci.txt")
    image = {canonicalize_name(n): Version(v) for n, v in re.findall(r"(?<=\s)([A-Za-z][\w.-]*)==([\d.]+)(?=\s)", dockerfile)}
    image["apache-beam"] = Version(re.search(r"^ARG BEAM_VERSION=(\S+)$", dockerfile, re.MULTILINE).group(1))
    assert {"kiwipiepy", "kiwipiepy-model", "numpy", "tokenizers", "zstandard", "apache-beam"} <= set(image)
    assert {n: v for n, v in image.items() if pins.get(n) != v} == {}


def test_the_gpu_bundle_downloads_the_tested_versions():
    # benchmarks/gpu_bundle.sh carries the wheels a lent CUDA image lacks; it read `==` pins out of
    # pyproject.toml, which holds ranges now, and stopped at pip's "Invalid requirement: ''"
    script = (REPO / "benchmarks" / "gpu_bundle.sh").read_text(encoding="utf-8")
    assert "requirements/ci.txt" in script and "pyproject.toml\"" not in script
    names = re.findall(r"\$\(pins ([\w.-]+)\)", script)
    assert names, "gpu_bundle.sh no longer downloads its wheels through pins()"
    tested = locked("requirements/ci.txt")
    assert [n for n in names if canonicalize_name(n) not in tested] == []
