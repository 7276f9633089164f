"""A kind folder that is a symlink (``ROOT/corpus -> /elsewhere``: a root copied from elsewhere, or a
user's attempt to keep one kind on another disk) receives nothing: a build is refused before its stage
runs, in one line saying what to do instead, and ``artifacts gc`` keeps a complete build it would have
published there. Before, both published through the link (and the store then refused what it had just
written, as it refuses every artifact found through a link). The root itself may be a link."""

from __future__ import annotations

import signal

import pytest

from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import ArtifactError, Store
from tests.fault_child import toy_request
from tests.test_faults_publish import _private, _writes, child


def _linked_kind(tmp_path):
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    (elsewhere / "precious-0123456789abcdef").mkdir(parents=True)
    (elsewhere / "precious-0123456789abcdef" / "mine.txt").write_text("not the store's")
    root.mkdir()
    (root / "corpus").symlink_to(elsewhere)
    return root, elsewhere


@pytest.mark.parametrize("force", [False, True])
def test_a_build_is_refused_before_its_stage_runs_when_its_kind_folder_is_a_link(tmp_path, force):
    root, elsewhere = _linked_kind(tmp_path)
    calls = []
    with pytest.raises(ArtifactError) as refused:
        Store(root).build(toy_request("linked kind"), _writes("linked kind", calls), force=force)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{root / 'corpus'} is a symlink (to {elsewhere})"), message
    assert "make the root a folder there (--out /disk2/kolectra" in message
    assert calls == []  # the stage never ran
    assert sorted(p.name for p in elsewhere.iterdir()) == ["precious-0123456789abcdef"]  # nothing written there


def test_the_cli_says_it_in_one_line(tmp_path, capsys):
    root, elsewhere = _linked_kind(tmp_path)
    sample = tmp_path / "a.txt"
    sample.write_text("한국어 문장입니다. 두 번째 문장입니다.\n")
    assert main(["corpus", "--input", str(sample), "--out", str(root)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "is a symlink" in err, err
    assert sorted(p.name for p in elsewhere.iterdir()) == ["precious-0123456789abcdef"]


def test_gc_keeps_a_complete_build_it_would_publish_through_a_linked_kind_folder(tmp_path, capsys):
    root = tmp_path / "root"
    proc = child("toy", str(root), "sealed", "--text", "sealed, not published")
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    (kept,) = _private(root)[".tmp"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "corpus").symlink_to(elsewhere)
    assert main(["artifacts", "gc", "--out", str(root)]) == 0
    assert f"not publishing {root / '.tmp' / kept}" in capsys.readouterr().err
    assert list(elsewhere.iterdir()) == [] and _private(root)[".tmp"] == [kept]
    (root / "corpus").unlink()  # the folder back: the next gc publishes it
    assert main(["artifacts", "gc", "--out", str(root)]) == 0
    (art,) = Store(root).list()
    assert (art.path / "data" / "a.txt").read_text() == "sealed, not published" and Store(root).verify(art) == []


def test_gc_dry_run_says_it_would_keep_what_gc_keeps_through_a_linked_kind_folder(tmp_path, capsys):
    """Before: `gc --dry-run` printed 'would publish D' for the complete build gc then keeps ('not publishing D')."""
    root = tmp_path / "root"
    assert child("toy", str(root), "sealed", "--text", "sealed").returncode == -signal.SIGKILL
    (kept,) = _private(root)[".tmp"]
    (tmp_path / "elsewhere").mkdir()
    (root / "corpus").symlink_to(tmp_path / "elsewhere")
    capsys.readouterr()
    assert main(["artifacts", "gc", "--dry-run", "--out", str(root)]) == 0
    out, err = capsys.readouterr()
    assert "would publish" not in out and f"not publishing {root / '.tmp' / kept}" in err, (out, err)
    assert main(["artifacts", "gc", "--out", str(root)]) == 0
    assert "published" not in capsys.readouterr().out and _private(root)[".tmp"] == [kept]


def test_a_root_that_is_itself_a_link_is_the_folder_the_user_named(tmp_path):
    (tmp_path / "disk2" / "kolectra").mkdir(parents=True)
    (tmp_path / "root").symlink_to(tmp_path / "disk2" / "kolectra")
    store = Store(tmp_path / "root")
    art = store.build(toy_request("on another disk"), _writes("on another disk", []))
    assert store.verify(art) == [] and [a.id for a in store.list()] == [art.id]
    assert (tmp_path / "disk2" / "kolectra" / "corpus" / art.path.name / "data" / "a.txt").is_file()
