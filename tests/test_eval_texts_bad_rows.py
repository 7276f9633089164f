"""The texts `kolectra report` checks against the pretraining corpus (finetune/eval_texts.py) are exactly the rows
the task scored, with max_eval_examples set and bad rows among the file's first N: the rows the task's own reader
(``Task.read``: the test split it scores) keeps, compared here with what eval_texts gives."""

from __future__ import annotations

import dataclasses
import json

import pytest

from kolectra.core.config import to_dict
from kolectra.finetune import config
from kolectra.finetune.classify import Classify
from kolectra.finetune.eval_texts import eval_texts
from kolectra.finetune.nsmc import Nsmc
from kolectra.finetune.regress import Regress


def _write(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


def _scored(task, cfg, train, test) -> dict[str, list[str]]:
    """The scored rows' texts by column, as the task read them."""
    split = task.read(cfg, train, test).test
    return {c: list(split[c]) for c in ("text", "text_pair") if c in split.column_names}


def _checked(task: str, cfg, test) -> tuple[dict[str, list[str]], set[int]]:
    texts = eval_texts(task, to_dict(cfg), test)
    return {t.column: t.values for t in texts}, {t.of for t in texts}


def _capped(cfg, cap: int = 3, **more):
    return dataclasses.replace(cfg, **{"max_eval_examples": cap, "max_dev_examples": 0, "max_bad_fraction": 0.5,
                                       "dev_fraction": 0.25, **more})


def test_classify_rows_with_a_label_the_task_refuses_are_not_among_the_rows_checked(tmp_path):
    train = _write(tmp_path / "train.tsv", "text\tlabel\n" + "".join(f"학습 {i}\t{'pos' if i % 2 else 'neg'}\n"
                                                                     for i in range(12)))
    # an empty label and one of invisible characters only (classify's label_text refuses both) in the first 3 rows
    test = _write(tmp_path / "test.tsv", "text\tlabel\n첫 리뷰\t\n둘째 리뷰\tpos\n셋째 리뷰\t\u200b\n"
                                         "넷째 리뷰\tneg\n다섯째 리뷰\tpos\n여섯째 리뷰\tneg\n")
    cfg = _capped(config.sample_classify())
    scored = _scored(Classify(), cfg, train, test)
    assert scored == {"text": ["둘째 리뷰", "넷째 리뷰", "다섯째 리뷰"]}
    assert _checked("classify", cfg, test) == (scored, {4})  # of: the rows the task read, not the file's lines


def test_classify_label_names_refuse_a_code_past_them_as_the_task_does(tmp_path):
    """label_names=neg,pos: a label 5 (no name) and a JSON null are bad rows; a text null too (row_of)."""
    rows = [{"text": f"학습 {i}", "label": i % 2} for i in range(12)]
    train = _write(tmp_path / "train.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    test_rows = [{"text": "가", "label": 5}, {"text": "나", "label": None}, {"text": None, "label": 1},
                 {"text": "라", "label": 1}, {"text": "마", "label": "pos"}, {"text": "바", "label": 0},
                 {"text": "사", "label": 1}]
    test = _write(tmp_path / "test.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in test_rows))
    cfg = _capped(config.sample_classify(), max_bad_fraction=0.6, label_names=("neg", "pos"))
    scored = _scored(Classify(), cfg, train, test)
    assert scored == {"text": ["라", "마", "바"]}
    assert _checked("classify", cfg, test) == (scored, {4})


def test_regress_rows_whose_score_the_task_refuses_are_not_among_the_rows_checked(tmp_path):
    train = _write(tmp_path / "train.tsv", "s1\ts2\tscore\n" + "".join(f"가 {i}\t나 {i}\t{i % 5}.5\n"
                                                                       for i in range(12)))
    # "abc", an empty score, "1_0" (float() reads 10) and nan: all bad rows to regress's score_value
    test = _write(tmp_path / "test.tsv", "s1\ts2\tscore\n하나\t일\tabc\n둘\t이\t\n셋\t삼\t1_0\n넷\t사\t2.5\n"
                                         "다섯\t오\tnan\n여섯\t육\t4\n일곱\t칠\t0\n여덟\t팔\t1\n")
    cfg = _capped(config.sample_regress(), max_bad_fraction=0.6, text_column="s1", text_pair_column="s2",
                  label_column="score")
    scored = _scored(Regress(), cfg, train, test)
    assert scored == {"text": ["넷", "여섯", "일곱"], "text_pair": ["사", "육", "칠"]}
    assert _checked("regress", cfg, test) == ({"s1": scored["text"], "s2": scored["text_pair"]}, {4})


@pytest.mark.parametrize("cap", [3, 0])
def test_nsmc_rows_the_reader_drops_are_not_checked_and_an_empty_review_scored_is(tmp_path, cap):
    """NSMC's reader (read_nsmc) drops a row of 2 columns and a label 2; a review that is empty is scored."""
    train = _write(tmp_path / "train.txt", "id\tdocument\tlabel\n" + "".join(f"{i}\t리뷰 {i}\t{i % 2}\n"
                                                                             for i in range(12)))
    test = _write(tmp_path / "test.txt", "id\tdocument\tlabel\n1\t두 칸\n2\t나쁜 라벨\t2\n3\t\t1\n4\t좋다\t1\n"
                                         "5\t싫다\t0\n6\t그냥\t0\n")
    cfg = _capped(config.sample_nsmc(), cap, max_bad_fraction=0.5)
    scored = _scored(Nsmc(), cfg, train, test)
    assert scored == {"text": ["", "좋다", "싫다", "그냥"][:cap or None]}
    assert _checked("nsmc", cfg, test) == ({"review": scored["text"]}, {4 if cap else 0})


def test_the_overlap_cache_keeps_results_of_other_label_names_and_older_checks_apart():
    """label_names changes which classify rows are scored, so a result is cached under it too; the check's number
    (pipeline/overlap.CHECK 3: rows refused for their label left out) keeps results counted before apart."""
    from types import SimpleNamespace  # noqa: PLC0415

    from kolectra.pipeline import overlap  # noqa: PLC0415

    corpus = SimpleNamespace(id="corpus-1", manifest={"digest": "d"})
    keys = {overlap._key(corpus, "train", "", "f" * 64, "classify", c)
            for c in ({}, {"label_names": ["neg", "pos"]}, {"label_names": ["pos", "neg"]})}
    assert len(keys) == 3
    assert overlap.CHECK >= 3


def test_reading_the_scored_rows_by_the_tasks_rules_imports_no_task(tmp_path):
    """eval_texts runs in `kolectra report`: the tasks' rules come from finetune/row_rules.py, not from the tasks'
    modules, whose imports (torch, scikit-learn, scipy) cost seconds."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    test = _write(tmp_path / "test.tsv", "text\tlabel\n가\t\n나\t1\n")
    code = ("import json, sys\nfrom pathlib import Path\nfrom kolectra.finetune.eval_texts import eval_texts\n"
            f"for task in ('classify', 'regress'):\n    assert eval_texts(task, {{}}, Path({str(test)!r}))[0].values == ['나']\n"
            "print(json.dumps([m for m in ('torch', 'sklearn', 'scipy', 'kolectra.finetune.text_task') "
            "if m in sys.modules]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == []
