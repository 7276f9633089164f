"""``kolectra finetune ... --seeds 1-3`` stopped (Ctrl-C, SIGTERM) or failed after its first seeds were
published: the line said 'interrupted; eval: nothing published; its partial build ... was removed' (the
seed under way's), so the seeds done looked lost; it now names them, kept, as ``kolectra run`` names its
stages done (the same command again reuses them)."""

from __future__ import annotations

import os
import re
import signal
import threading
import time

import pytest

from benchmarks.tiny_model import build_tiny_model_dir
from kolectra.pipeline.cli import main
from tests.test_finetune_tasks import all_texts, topics_tsv


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_model_dir(tmp_path_factory.mktemp("tiny-seeds"), all_texts(), seed=0, hidden=32, layers=1,
                                heads=2, vocab_size=400, max_position=128)


def _ctrl_c_once_published(root, stop: threading.Event) -> None:
    """A real SIGINT to this process once the first seed's eval artifact is in place and the next one's
    build has begun (its folder in .tmp)."""
    while not stop.is_set():
        if any((root / "eval").glob("topics-*/manifest.json")) and any((root / ".tmp").glob("eval-*")):
            os.kill(os.getpid(), signal.SIGINT)
            return
        time.sleep(0.005)


@pytest.mark.parametrize("force", [False, True], ids=["", "--force"])
def test_a_stop_after_a_seed_was_published_names_the_seeds_kept(tiny, tmp_path, capsys, force):
    """With --force the same command again rebuilds every seed: the line said it reuses them."""
    root = tmp_path / "root"
    train, test = topics_tsv(tmp_path / "train.tsv", 60, 0), topics_tsv(tmp_path / "test.tsv", 15, 1)
    argv = ["finetune", "classify", "--model", str(tiny), "--train", str(train), "--test", str(test), "--out",
            str(root), "--name", "topics", "--seeds", "1-3", "--preset", "sample", "--set", "epochs=1",
            "--set", "max_length=32", *(["--force"] if force else [])]
    stop = threading.Event()
    watcher = threading.Thread(target=_ctrl_c_once_published, args=(root, stop), daemon=True)
    watcher.start()
    try:
        code = main(argv)
    finally:
        stop.set()
        watcher.join()
    line = capsys.readouterr().err.strip().splitlines()[-1]
    published = sorted(p.parent.name for p in (root / "eval").glob("topics-*/manifest.json"))
    assert code == 130 and line.startswith("kolectra finetune classify: interrupted"), line
    assert len(published) < 4, "the summary was published: no stop came in time"
    again = "without --force" if force else "again"
    m = re.search(rf"; seeds? ([\d, ]+) done before it and kept: (.+) \(the same command {again} reuses them\)$", line)
    assert m, line  # before: '...; eval: nothing published; its partial build in ... was removed', no seed named
    assert sorted(x.removeprefix("eval/") for x in m.group(2).split(", ")) == published
    assert len(m.group(1).split(", ")) == len(published)
