"""benchmarks/compile_cache.py: Inductor's compile cache packed into parts a lent GPU machine can send
back, and unpacked on the next one, where a real compile (on the CPU here) then hits it."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from benchmarks import compile_cache

ROOT = Path(__file__).resolve().parents[1]


def test_pack_cuts_parts_and_unpack_gives_the_same_files(tmp_path):
    src = tmp_path / "cache"
    (src / "fxgraph" / "ab").mkdir(parents=True)
    files = {"fxgraph/ab/entry": os.urandom(50_000), "triton/k.cubin": os.urandom(30_000), "top.json": b"{}"}
    for name, data in files.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(data)
    out = tmp_path / "out"
    out.mkdir()
    (out / f"{compile_cache.PREFIX}07").write_bytes(b"an earlier run's part")
    packed = compile_cache.pack(src, out, part_bytes=20_000)  # random bytes do not compress: several parts
    assert packed["files"] == 3 and packed["bytes"] == sum(map(len, files.values()))
    assert len(packed["parts"]) > 1 and [p.name for p in compile_cache.parts(out)] == packed["parts"]
    assert all((out / p).stat().st_size <= 20_000 for p in packed["parts"])
    got = compile_cache.unpack(out, tmp_path / "again")
    assert got == {"files": 3, "bytes": packed["bytes"]}
    assert {str(p.relative_to(tmp_path / "again")): p.read_bytes()
            for p in (tmp_path / "again").rglob("*") if p.is_file()} == files
    assert compile_cache.unpack(tmp_path / "nothing-here", tmp_path / "empty") == {"files": 0, "bytes": 0}


def test_a_part_that_would_write_outside_the_cache_is_refused(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz") as tar:
        info = tarfile.TarInfo("../escaped")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"bad"))
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / f"{compile_cache.PREFIX}00").write_bytes(buf.getvalue())
    with pytest.raises(tarfile.TarError):
        compile_cache.unpack(parts, tmp_path / "cache")
    assert not (tmp_path / "escaped").exists()


def test_use_points_inductor_at_one_folder_a_machine_and_a_broken_carry_is_said(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    (tmp_path / "old" / "fxgraph").mkdir(parents=True)
    (tmp_path / "old" / "fxgraph" / "entry").write_bytes(b"compiled")
    compile_cache.pack(tmp_path / "old", tmp_path / "parts")
    cache_dir, unpacked = compile_cache.use(tmp_path / "parts")
    assert cache_dir == tmp_path / "tmp" / compile_cache.CACHE_DIR and unpacked == {"files": 1, "bytes": 8}
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(cache_dir)  # the phases' processes inherit it
    (cache_dir / "new-on-this-machine").write_bytes(b"x")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / f"{compile_cache.PREFIX}00").write_bytes(b"not xz at all")
    again, broken = compile_cache.use(tmp_path / "bad")  # a second call on the same machine, a damaged carry
    assert again == cache_dir and broken["error"] == "ReadError: not an lzma file"
    assert compile_cache.keep(cache_dir, tmp_path / "out")["files"] == 2  # the first call's work is kept
    (tmp_path / "a-file").write_bytes(b"")
    assert "error" in compile_cache.keep(cache_dir, tmp_path / "a-file")


# Ends as the kolectra command does (pipeline/cli/exiting.py: atexit handlers run, output flushed) less the
# interpreter's freeing of torch's and Inductor's modules: about 1.7 CPU s a process
COMPILE = """
import json, sys, torch
from kolectra.pipeline.cli.exiting import exit_now
sys.path.insert(0, sys.argv[1])
import gpu_phases
f = torch.compile(lambda x: (x.sin() * 3 + x.cos()).sum(dim=1))
f(torch.randn(8, 16))
print(json.dumps(gpu_phases.cache_counts()))
exit_now(0)
"""


def _compile_in(cache: Path) -> dict:
    # no vector-ISA probes (nine test programs compiled and loaded) and no precompiled header: the cache
    # behaves the same, and a cold compile takes about 9 CPU s here instead of 25. A machine of its own: its
    # own temporary folder (Inductor's default cache), home and caches, so what it finds is in ``cache`` alone
    machine = cache.with_name(cache.name + "-machine")
    for folder in ("tmp", "home", "cache"):
        (machine / folder).mkdir(parents=True)
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache), "CUDA_VISIBLE_DEVICES": "",
           "TORCHINDUCTOR_VEC_ISA_OK": "0", "TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS": "0",
           "TMPDIR": str(machine / "tmp"), "HOME": str(machine / "home"), "XDG_CACHE_HOME": str(machine / "cache")}
    r = subprocess.run([sys.executable, "-c", COMPILE, str(ROOT / "benchmarks")], capture_output=True, text=True,
                       env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_carried_cache_is_hit_by_a_compile_on_another_machine(tmp_path):
    # machine 1 compiles cold and packs its cache; machine 2 (another directory, a fresh process, its own
    # temporary folder and home) unpacks the parts and compiles the same graph: Inductor finds it instead
    # of compiling it. Machine 2 shares nothing with machine 1 but the parts, so its hit is theirs: a third
    # compile without them (cold again, 12 CPU s) was the check of that while the machines shared /tmp
    def fx(counts: dict) -> dict:
        return {k: v for k, v in counts.items() if k.startswith("fxgraph_cache_")}

    assert fx(_compile_in(tmp_path / "first")) == {"fxgraph_cache_miss": 1}
    compile_cache.pack(tmp_path / "first", tmp_path / "parts")
    assert compile_cache.unpack(tmp_path / "parts", tmp_path / "second")["files"] > 0
    assert fx(_compile_in(tmp_path / "second")) == {"fxgraph_cache_hit": 1}
