"""``kolectra finetune korquad --split-dev-by-article FRACTION`` (issue 46): one KorQuAD-format file,
no dev file, split by whole articles (seeded) from the command line, where it took a Python call;
no article on both sides, and the figures say "by-article split, not the official dev set" in the
metrics, the learning curve's title, the score table and report.md. Driven through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

from kolectra.pipeline.cli import main
from tests.test_finetune_e2e import FIXTURE, tiny_model  # noqa: F401 - tiny_model is a fixture

SETS = ["--preset", "sample", "--set", "max_length=64", "--set", "doc_stride=32", "--set", "max_query_length=24",
        "--set", "batch_size=16", "--set", "epochs=1", "--set", "optim.lr=1e-9"]


def test_one_file_is_split_by_article_and_every_figure_says_so(tiny_model, tmp_path, capsys):
    root = ["--out", str(tmp_path / "root")]
    assert main(["finetune", "korquad", "--model", str(tiny_model), "--train", str(FIXTURE),
                 "--split-dev-by-article", "0.25", *SETS, *root]) == 0
    art = Path(capsys.readouterr().out.strip().splitlines()[-1])
    metrics = json.loads((art / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["eval_set"].startswith("by-article split (side dev, seed 42, dev_fraction 0.25) of "
                                          f"{FIXTURE.name}")
    # whole articles on each side: the scored questions are exactly those of 3 of the 12 articles
    articles = [{qa["id"] for p in a["paragraphs"] for qa in p["qas"]}
                for a in json.loads(FIXTURE.read_text(encoding="utf-8"))["data"]]
    scored = set(json.loads((art / "predictions.json").read_text(encoding="utf-8")))
    dev = [ids for ids in articles if ids & scored]
    assert len(dev) == 3 and set().union(*dev) == scored and metrics["shared_contexts"] == 0
    assert metrics["train_questions"] + metrics["questions"] == sum(map(len, articles))

    assert main(["report", art.name, "--dest", str(tmp_path / "rep"), *root]) == 0
    report = (tmp_path / "rep" / "report.md").read_text(encoding="utf-8")
    assert "Scored on a **by-article split, not the official dev set**" in report
    capsys.readouterr()

    # the same file and fraction: the same split, so the same request (reused, not rebuilt)
    assert main(["finetune", "korquad", "--model", str(tiny_model), "--train", str(FIXTURE),
                 "--split-dev-by-article", "0.25", *SETS, *root]) == 0
    assert Path(capsys.readouterr().out.strip().splitlines()[-1]) == art


def test_a_dev_file_and_a_split_together_or_neither_are_refused_in_one_line(tiny_model, tmp_path, capsys):
    base = ["finetune", "korquad", "--model", str(tiny_model), "--train", str(FIXTURE), *SETS,
            "--out", str(tmp_path / "root")]
    for extra in (["--dev", str(FIXTURE), "--split-dev-by-article", "0.2"], []):
        assert main([*base, *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "give --dev FILE or --split-dev-by-article FRACTION, one of them" in err[0], err
    for bad in ("1.5", "0", "nan"):  # in the flag's words, not the reader's dev_fraction
        assert main([*base, "--split-dev-by-article", bad]) == 2
        assert f"--split-dev-by-article takes the share of articles for the dev side, between 0 and 1 (e.g. 0.1), " \
               f"got {float(bad)}" in capsys.readouterr().err
