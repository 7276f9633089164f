"""classify on a file of scores (KorSTS's 0.0-5.0 read as labels): said, and a refusal lists a few labels, not all."""

import pytest

from kolectra.finetune.classify import Classify
from kolectra.finetune.config import sample_classify
from kolectra.finetune.files import FinetuneError


def test_score_labels_are_said_and_a_refusal_lists_twenty_of_them(tmp_path, capsys):
    """KorSTS's TSV given to classify trained a class a score without a word (its 26 scores of one decimal), and a
    test score the training file lacked was refused in a line listing every training label (200 of them here) (a6).
    Integer labels (1-5 star ratings, class codes) are as before."""
    train = tmp_path / "sts.tsv"
    train.write_text("text\tlabel\n" + "".join(f"문장 {i}\t{i / 40:.3f}\n" for i in range(200)), encoding="utf-8")
    test = tmp_path / "test.tsv"
    test.write_text("text\tlabel\n시험\t4.999\n", encoding="utf-8")
    with pytest.raises(FinetuneError, match=r"test\.tsv:2: label '4\.999' is not among the training labels \(0, 0\.025, "
                                            r"[^)]*, \.\.\. \(200 in all\)\); the 200 training labels are numbers, 195 "
                                            r"with decimals \(0\.025, 0\.050, 0\.075, \.\.\.\): scores\? classify makes "
                                            r"each one a class of its own; kolectra finetune regress reads a score per "
                                            r"row$"):
        Classify().read(sample_classify(), train, test)
    assert "WARNING: classify: " in capsys.readouterr().err
    stars = tmp_path / "stars.tsv"
    stars.write_text("text\tlabel\n" + "".join(f"리뷰 {i}\t{i % 5 + 1}\n" for i in range(50)), encoding="utf-8")
    stars_test = tmp_path / "stars_test.tsv"
    stars_test.write_text("text\tlabel\n시험\t3\n", encoding="utf-8")
    Classify().read(sample_classify(), stars, stars_test)
    assert "scores?" not in capsys.readouterr().err
