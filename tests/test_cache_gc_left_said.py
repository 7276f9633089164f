"""``kolectra artifacts gc --cache``: a copy whose lock file gc cannot open (another user's: EACCES; played here by a
folder in its place, EISDIR, as root opens any file) is left whole, and its line says the bytes left there, as
``artifacts gc``'s own lines do (``(0 B freed, 300.0 kB left)``): it said only the error, the copy's size unsaid."""

from __future__ import annotations

import os
import time

from kolectra.pipeline.cli import main
from kolectra.pipeline.store import copies


def test_a_copy_whose_lock_cannot_be_opened_is_said_with_the_bytes_left(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))
    d = tmp_path / "cache" / "artifacts" / "corpus" / "stuck-0123456789abcdef-0123456789ab"
    d.mkdir(parents=True)
    (d / "shard-0.bin").write_bytes(b"x" * 300_000)
    (d / "manifest.json").write_text("{}")
    copies.lock_of(d).mkdir()  # not a file gc may open read-write
    then = time.time() - 30 * 86400
    for p in (d, d / "manifest.json", d / "shard-0.bin", copies.lock_of(d)):
        os.utime(p, (then, then))
    for flags, verb in (("--dry-run",), "prune"), ((), "remove"):
        capsys.readouterr()
        code = main(["artifacts", "gc", "--cache", "--older-than", "7", *flags, "--out", str(tmp_path / "root")])
        err = capsys.readouterr().err
        line = next(ln for ln in err.splitlines() if ln.startswith(f"could not {verb} {d}: "))
        assert code == 2 and line.endswith("(0 B freed, 300.0 kB left)"), (verb, err)
    assert (d / "shard-0.bin").is_file()
