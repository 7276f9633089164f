"""``kolectra artifacts gc --cache`` and the report's eval-in-corpus results (pipeline/overlap.py: one small JSON
file per corpus and scored file in ``ROOT/.cache/overlap/``, a bucket root's in ``$KOLECTRA_CACHE/roots/<hash>/``).
Before, nothing removed them: a rebuilt corpus's (another digest) and an older check's (``overlap.CHECK``) were
never read again and stayed, one more per corpus and eval file, and ``gc --cache`` said nothing of them. Now each
read touches its file, and ``gc --cache`` prunes those not used within ``--older-than`` (default: all) as it
prunes fine-tuning's tokenised splits, counted in its lines, never while a report holds the folder."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kolectra.pipeline import stages
from kolectra.pipeline.cli import main
from kolectra.pipeline.store import copies
from tests.test_eval_overlap import FT, PLANTED, chain, nsmc, report_of  # noqa: F401  (chain: a fixture)

DAY = 86400


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))


def _age(paths, days: float) -> None:
    then = time.time() - days * DAY
    for p in paths:
        os.utime(p, (then, then))


def _gc(capsys, *args: str) -> tuple[str, str]:
    capsys.readouterr()
    assert main(["artifacts", "gc", "--cache", *args]) == 0
    return capsys.readouterr()


def test_an_overlap_result_is_kept_while_used_and_pruned_once_unused(chain, capsys):  # noqa: F811
    store, corpus, floor, train, tmp = chain
    test = nsmc(tmp / "gc_test.txt", [PLANTED[0][0], "처음 보는 배우인데 인상 깊었다"])
    ev = stages.finetune(store, "nsmc", floor, train, test, preset="sample", sets=FT, seed=3)
    folder = Path(store.root) / ".cache" / "overlap"
    before = set(folder.glob("*.json"))
    md, err = report_of(store, ev, tmp, capsys)
    assert "overlap: reading" in err and "**1 of 3 rows (33.3%)**" in md
    [entry] = set(folder.glob("*.json")) - before
    _age(folder.glob("*.json"), 30)
    md, err = report_of(store, ev, tmp, capsys)  # read back, not measured: and this is its last use now
    assert "overlap: reading" not in err and "**1 of 3 rows (33.3%)**" in md
    assert time.time() - entry.stat().st_mtime < DAY
    out, err = _gc(capsys, "--older-than", "7", "--out", str(store.root))
    assert entry.is_file() and str(entry) not in out
    assert all(f"removed {p} (" in out and not p.exists() for p in before), out  # the other tests' results: 30 days
    _age([entry], 30)
    out, err = _gc(capsys, "--older-than", "7", "--out", str(store.root))
    assert not entry.exists() and f"removed {entry} (" in out, out
    assert "1 removed" in err, err
    md, err = report_of(store, ev, tmp, capsys)  # read again, the same figure
    assert "overlap: reading" in err and "**1 of 3 rows (33.3%)**" in md and entry.is_file()


def test_a_bucket_roots_results_are_pruned_but_not_while_a_report_holds_them(tmp_path, capsys):
    cache = tmp_path / "cache"
    idle, held = (cache / "roots" / h / ".cache" / "overlap" for h in ("0123456789abcdef", "fedcba9876543210"))
    for folder in (idle, held):
        folder.mkdir(parents=True)
        (folder / f"{'a' * 32}.json").write_text('{"rows": 3}\n')
        _age([folder / f"{'a' * 32}.json"], 30)
    holder = subprocess.Popen(  # a report reading or measuring a result holds the folder (overlap.overlap)
        [sys.executable, "-c", "import sys\nfrom pathlib import Path\nfrom kolectra.pipeline.store import copies\n"
         "copies.hold(Path(sys.argv[1]))\nprint('held', flush=True)\nsys.stdin.read()\n", str(held)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[1])
    try:
        assert holder.stdout.readline().strip() == "held"
        out, err = _gc(capsys, "--out", str(tmp_path / "root"))
    finally:
        holder.communicate("", timeout=60)
    assert not (idle / f"{'a' * 32}.json").exists() and f"removed {idle / ('a' * 32 + '.json')} (12 B)" in out, out
    assert (held / f"{'a' * 32}.json").is_file() and f"kept {held}: in use" in out, out
    assert copies.lock_of(held).exists()
