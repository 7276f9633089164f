"""Carry Inductor's compile cache from one GPU machine to the next, for :mod:`benchmarks.gpu`.

A lent GPU comes for minutes and starts bare, and on the 2026-11-28 H200 a cold compile of the
CUDA-graph step took over 75 s, 22-51 s with Inductor's cache warm (docs/benchmarks.md): most of a
check's minutes went to compiling. Inductor keeps what it compiled under ``TORCHINDUCTOR_CACHE_DIR``
(its FX graphs, AOTAutograd's graphs and, bundled with them or beside them, the Triton kernels'
binaries); a process that finds a graph there with the same key (same torch, Triton, GPU and code)
loads it instead of compiling it. So the check can take that directory with it: packed as an xz
tar cut into parts a lent machine can send back (at most 16 MiB a file), and unpacked from those
parts on the next machine before anything compiles. A cache from another torch or GPU is simply not
used (its keys differ); nothing in it is trusted beyond what Inductor itself checks.

    python benchmarks/compile_cache.py pack CACHE_DIR OUT_DIR      # -> OUT_DIR/inductor-cache.tar.xz.00, .01, ...
    python benchmarks/compile_cache.py unpack PARTS_DIR CACHE_DIR

Users do the same without this script: ``TORCHINDUCTOR_CACHE_DIR`` on a disk that outlives the
machine (docs/pretraining.md).
"""

from __future__ import annotations

import argparse
import io
import json
import lzma
import os
import tarfile
import tempfile
from pathlib import Path

PREFIX = "inductor-cache.tar.xz."
PART_BYTES = 15 * 2**20  # under the lent machine's 16 MiB a returned file
# xz's preset 1: a CPU Inductor cache of 8.4 MB packed to 0.83 MB in 0.45 CPU s; preset 6 (the
# default) to 0.52 MB in 2.6 s, gzip to 2.0-2.3 MB. A lent GPU's seconds are dearer than the bytes.
XZ_PRESET = 1
CACHE_DIR = "kolectra-gpu-check-inductor"  # under the temporary folder, unless TORCHINDUCTOR_CACHE_DIR names one
BROKEN = (OSError, EOFError, tarfile.TarError, lzma.LZMAError)


def parts(folder: Path) -> list[Path]:
    """The packed cache's parts in ``folder``, in order (none: an empty list)."""
    return sorted(p for p in Path(folder).glob(PREFIX + "*") if p.name[len(PREFIX):].isdigit())


def pack(cache_dir: Path, out_dir: Path, part_bytes: int = PART_BYTES) -> dict:
    """``cache_dir``'s files as one xz tar cut into parts of ``part_bytes`` in ``out_dir`` (earlier
    parts there are replaced) -> {files, bytes (unpacked), packed_bytes, parts}."""
    cache_dir, out_dir = Path(cache_dir), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in parts(out_dir):
        old.unlink()
    files = sorted(p for p in cache_dir.rglob("*") if p.is_file() and not p.is_symlink())
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz", preset=XZ_PRESET) as tar:
        for f in files:  # sorted names: the same cache gives the same order
            tar.add(f, arcname=str(f.relative_to(cache_dir)), recursive=False)
    data = buf.getvalue()
    names = []
    for i in range(0, max(len(data), 1), part_bytes):
        name = out_dir / f"{PREFIX}{i // part_bytes:02d}"
        name.write_bytes(data[i:i + part_bytes])
        names.append(name.name)
    return {"files": len(files), "bytes": sum(f.stat().st_size for f in files), "packed_bytes": len(data),
            "parts": names}


def unpack(parts_dir: Path, cache_dir: Path) -> dict:
    """The parts in ``parts_dir`` into ``cache_dir`` -> {files, bytes}; no parts: {files: 0, bytes: 0}.
    A member whose path would leave ``cache_dir`` (absolute, ``..``) raises ``tarfile.TarError``
    before anything of it is written (tarfile's ``data`` filter); links are not unpacked."""
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    found = parts(parts_dir)
    if not found:
        return {"files": 0, "bytes": 0}
    data = b"".join(p.read_bytes() for p in found)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:xz") as tar:
        members = [m for m in tar.getmembers() if m.isfile()]
        tar.extractall(cache_dir, members=members, filter="data")
    return {"files": len(members), "bytes": sum(m.size for m in members)}


def use(parts_dir: Path) -> tuple[Path, dict]:
    """Point Inductor, in this process and the ones it starts, at one cache folder a machine
    (``TORCHINDUCTOR_CACHE_DIR``, else :data:`CACHE_DIR` under the temporary folder, so a second call
    on the same machine finds what the first compiled) and unpack ``parts_dir``'s parts into it ->
    (the folder, what was unpacked); a broken carry is said, not raised: the compiles are cold then."""
    cache_dir = Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR") or Path(tempfile.gettempdir()) / CACHE_DIR)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir)
    try:
        return cache_dir, unpack(parts_dir, cache_dir)
    except BROKEN as e:
        return cache_dir, {"error": f"{type(e).__name__}: {e}"[:300]}


def keep(cache_dir: Path, out_dir: Path) -> dict:
    """:func:`pack`, with a failure said instead of raised (the check's figures still go out)."""
    try:
        return pack(cache_dir, out_dir)
    except BROKEN as e:
        return {"error": f"{type(e).__name__}: {e}"[:300]}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("verb", choices=("pack", "unpack"))
    p.add_argument("source", type=Path)
    p.add_argument("target", type=Path)
    args = p.parse_args(argv)
    if not args.source.is_dir():
        p.error(f"{args.source}: not a directory")
    r = pack(args.source, args.target) if args.verb == "pack" else unpack(args.source, args.target)
    print(json.dumps(r))
    return r


if __name__ == "__main__":
    main()
