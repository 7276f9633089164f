"""``kolectra report EVAL EVAL ...`` (a table of scores) says, under the table, how much of each eval's scored texts
its pretraining corpus holds verbatim, as one eval's report does (pipeline/overlap.py); the table had said nothing
of it. The same real chain as tests/test_eval_overlap.py (Beam corpus, a floor checkpoint, real nsmc evals) (h4)."""

from __future__ import annotations

import shutil

import pytest

from kolectra.pipeline import overlap, stages
from kolectra.pipeline.cli import main
from kolectra.pipeline.scores import score_table
from tests.test_eval_overlap import CLEAN, FT, PLANTED, chain, nsmc  # noqa: F401  (chain: a fixture)


def test_a_table_of_evals_gives_each_ones_share_in_its_pretraining_corpus(chain, capsys, monkeypatch):
    store, corpus, floor, train, tmp = chain
    planted = nsmc(tmp / "table_test.txt", [t for t, _ in PLANTED][:3] + CLEAN)
    clean = nsmc(tmp / "table_clean.txt", CLEAN)
    dirty = stages.finetune(store, "nsmc", floor, train, planted, preset="sample", sets=FT, seed=1, name="planted")
    tidy = stages.finetune(store, "nsmc", floor, train, clean, preset="sample", sets=FT, seed=1, name="clean")
    hf = shutil.copytree(floor.path / "hf" / "discriminator", tmp / "hf-table")  # no corpus known for it
    foreign = stages.finetune(store, "nsmc", hf, train, clean, preset="sample", sets=FT, seed=1, name="clean")
    arts = [dirty, tidy, foreign]
    table_before, _ = score_table(store, arts)
    capsys.readouterr()
    dest = tmp / "table-report"
    assert main(["report", *(a.path.name for a in arts), "--out", str(store.root), "--dest", str(dest)]) == 0
    out, err = capsys.readouterr()
    md = (dest / "report.md").read_text(encoding="utf-8")
    # the table itself as it was: the same columns, in the same order, and the same printed lines
    assert "\n".join(table_before) in md and "\n".join(table_before) in out
    section = md.split("Eval texts in the pretraining corpus")[1].split("Sources:")[0]
    where = f"`corpus/{corpus.path.name}` (train split)"
    assert f"- `eval/{dirty.path.name}`: 3 of 7 rows (42.9%) in {where}." in section  # the empty review counted
    assert f"- `eval/{tidy.path.name}`: 0 of 4 rows (0.0%) in {where}." in section
    assert f"- `eval/{foreign.path.name}`: Not checked: no pretraining corpus in this eval's lineage" in section
    assert (f"WARNING: eval/{dirty.path.name}: NSMC test (table_test.txt): 3 of 7 rows (42.9%) appear verbatim in "
            f"the pretraining corpus corpus/{corpus.path.name}") in err  # which eval: several may share a test file

    # kept per corpus and scored file: a table again, or the eval's own report, reads no corpus
    monkeypatch.setattr(overlap, "scan", lambda *a, **k: pytest.fail("the corpus was read again"))
    assert main(["report", *(a.path.name for a in arts), "--out", str(store.root), "--dest", str(dest)]) == 0
    assert f"3 of 7 rows (42.9%) in {where}" in (dest / "report.md").read_text(encoding="utf-8")
    assert main(["report", dirty.path.name, "--out", str(store.root), "--dest", str(tmp / "one")]) == 0
    assert "**3 of 7 rows (42.9%)**" in (tmp / "one" / "report.md").read_text(encoding="utf-8")
