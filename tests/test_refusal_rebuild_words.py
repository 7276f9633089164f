"""The refusal of a damaged parent says what each remedy does to what was built from it.

It said 'restore its files, or rebuild it (its command with --force)', as if the two were the same. A rebuild
publishes a new manifest (its provenance, at least, is new: a new ``fields_digest``), so everything built from the
parent is rebuilt when next asked for (a walkthrough's pretraining was retrained after one shard of its examples
was rebuilt to the same bytes); restored files keep the manifest, and what was built from it stays valid."""

from __future__ import annotations

import pytest

from kolectra.core.stage import StageOutput
from kolectra.pipeline.store.artifacts import ArtifactError, Store
from kolectra.pipeline.store.request import Request


def test_the_refusal_of_a_damaged_parent_says_that_a_rebuild_rebuilds_what_was_built_from_it(tmp_path):
    store = Store(tmp_path / "root")

    def produce(out):
        (out / "data").mkdir()
        (out / "data" / "a.txt").write_text("text")
        return StageOutput(stats={})

    art = store.build(Request(kind="corpus", name="c", stage_version=1, config={}), produce)
    (art.path / "data" / "a.txt").write_text("tExt")
    with pytest.raises(ArtifactError) as refused:
        store.require(art.id, "corpus")
    said = str(refused.value)
    assert "restore its files (what was built from it stays valid)" in said, said
    assert ("rebuild it (its command with --force), which rebuilds what was built from it when next asked for"
            in said), said
