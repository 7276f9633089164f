"""A root moved keeps its mark (``ROOT/.kolectra-root.json``, docs/artifacts.md "Roots sharing a .tmp or .work");
the file is rewritten with the root's new path by the next command that writes in the root (a build, ``gc``),
never by one that only reads: ``artifacts list`` (aside.py: "Nothing here writes"), ``gc --dry-run``."""

from __future__ import annotations

import json
import os
import signal

from kolectra.pipeline.cli import main
from kolectra.pipeline.store.shared_areas import ROOT_MARK, mark
from tests.test_faults_publish import child
from tests.test_store_shared_roots import _shared_tmp


def _seen(path):
    st = os.stat(path)
    return path.read_bytes(), st.st_mtime_ns, st.st_ino


def test_list_and_a_dry_run_gc_of_a_root_moved_leave_its_mark_file_as_it_is_and_gc_updates_it(tmp_path, capsys):
    """b's --force killed between its renames left its copy in the .tmp b links to; b moved to b2. b2's
    ``artifacts list`` and ``gc --dry-run`` rewrote b2/.kolectra-root.json with b2's path (46 -> 47 bytes, a new
    inode: found with the real command line); now they read the mark and name the copy as b2's, the file
    untouched, and the plain gc (which writes) rewrites it, so a copy of b2 made after it takes a mark of its own."""
    a, b = _shared_tmp(tmp_path)
    assert child("toy", str(b), "none", "--text", "same").returncode == 0
    assert child("toy", str(b), "old_moved", "--force", "--text", "same").returncode == -signal.SIGKILL
    b2 = b.rename(tmp_path / "b2")
    kept = b2 / ROOT_MARK
    before = _seen(kept)
    assert json.loads(before[0])["path"] == os.path.realpath(b)
    capsys.readouterr()
    assert main(["artifacts", "list", "--out", str(b2)]) == 0
    assert "corpus/toy-" in capsys.readouterr().err  # the copy is b2's: its mark read as kept
    assert _seen(kept) == before
    assert main(["artifacts", "gc", "--dry-run", "--out", str(b2)]) == 0
    assert "would publish" in capsys.readouterr().err
    assert _seen(kept) == before and len(list((a / ".tmp").iterdir())) == 2
    assert main(["artifacts", "gc", "--out", str(b2)]) == 0
    assert json.loads(kept.read_text()) == {"mark": json.loads(before[0])["mark"], "path": os.path.realpath(b2)}
    copy = tmp_path / "c"
    copy.mkdir()
    (copy / ROOT_MARK).write_bytes(kept.read_bytes())
    assert mark(copy) != mark(b2)
