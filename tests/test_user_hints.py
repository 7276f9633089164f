"""What a first user's common slips are told: a corpus input that is not UTF-8 (a Korean file saved
on Windows, cp949) is told to convert the file, not to check --format; a misspelt --set key names
the key it most likely meant; a raw file given where an artifact is wanted says it is a file; a
mistyped option names the closest; JSONL saved as .txt is not read as text, JSON syntax and all;
`artifacts show` and finetune's results give a model's health verdict; an interrupted demo names what it kept."""

from __future__ import annotations

import json

import pytest

from kolectra.core.config import ConfigError, override
from kolectra.core.stage import StageOutput
from kolectra.corpus import build, field_check
from kolectra.corpus.config import default_config
from kolectra.model.presets import preset
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.request import Request


def _refusal(worst: str) -> str:
    stats = build.make_stats({("records_in",): 10, ("rejected", "invalid_utf8"): 9, ("train", "documents"): 1},
                             default_config(), {"k": {"records_in": 10, "rejected": 9}})
    with pytest.raises(build.CorpusError) as e:
        build.check_stats(stats, default_config(), {"k": worst})
    return str(e.value)


def test_a_cp949_corpus_input_is_told_to_convert_not_to_check_the_format():
    line = _refusal("/data/reviews.jsonl")
    assert "most common reason: invalid_utf8" in line and "Check --format" not in line
    # the copy keeps the extension, so --format auto reads it as JSONL again
    assert "iconv -f cp949 -t utf-8 /data/reviews.jsonl > /data/reviews.utf8.jsonl" in line
    assert "decompress it" in _refusal("/data/reviews.jsonl.gz")


def test_a_misspelt_set_key_names_the_key_it_likely_meant():
    with pytest.raises(ConfigError, match=r"unknown config key 'min_char' \(did you mean 'min_chars'\?"):
        override(default_config(), ["min_char=5"])
    with pytest.raises(ConfigError, match=r"'trian.lr' \(did you mean 'train.lr'\?"):  # the whole key, fixed
        override(preset("tiny"), ["trian.lr=1e-3"])
    with pytest.raises(ConfigError) as e:  # nothing close: no guess, the known keys only
        override(default_config(), ["zzz=1"])
    assert "did you mean" not in str(e.value) and "known at this level" in str(e.value)


def test_a_raw_file_given_as_the_corpus_says_it_is_a_file(tmp_path, capsys):
    raw = tmp_path / "reviews.jsonl"
    raw.write_text('{"text": "좋은 영화였어요"}\n', encoding="utf-8")
    assert main(["vocab", "--corpus", str(raw), "--out", str(tmp_path / "root")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{str(raw)!r} is a file, not an artifact" in err
    assert f"kolectra corpus --input {raw}" in err
    (tmp_path / "manifest.json").write_text("{}")
    assert main(["pretrain", "--examples", str(tmp_path / "manifest.json"), "--out", str(tmp_path / "root")]) == 2
    assert f"give its artifact's directory, {str(tmp_path)!r}" in capsys.readouterr().err


@pytest.mark.parametrize("argv, expected", [
    (["pretrain", "--examples", "x", "--stpes", "5"],
     "kolectra pretrain: error: unknown option --stpes (did you mean --steps?)"),
    (["finetune", "nsmc", "--model", "x", "--train", "a", "--test", "b", "--epohcs", "3"],
     "kolectra finetune nsmc: error: unknown option --epohcs (did you mean --epochs?)"),
    (["artifacts", "list", "--knd", "corpus"], "kolectra artifacts list: error: unknown option --knd (did you mean --kind?)"),
    (["pretrain", "--examples", "x", "extra"], "kolectra pretrain: error: unexpected argument 'extra'"),
])
def test_a_mistyped_option_of_a_command_without_beam_is_refused_in_its_own_words(tmp_path, capsys, argv, expected):
    # was argparse's top level: "kolectra: error: unrecognized arguments: --stpes 5" under `kolectra COMMAND ...`
    assert main([*argv, "--out", str(tmp_path / "root")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(expected)


def test_jsonl_under_a_text_extension_is_refused_before_the_job(tmp_path, capsys):
    lines = [f'{{"id": "{i}", "text": "좋은 영화였어요 정말 {i}"}}' for i in range(3)]
    path = tmp_path / "reviews.txt"
    path.write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    # was a corpus of 3 documents each '{"id": "0", "text": ...}', braces and ids included, and no word
    assert main(["corpus", "--input", str(path), "--out", str(tmp_path / "root")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "each of its first 3 lines is a JSON object" in err
    assert "use --format jsonl" in err and not (tmp_path / "root" / "corpus").exists()
    assert field_check.jsonl_as_text_problem(str(path), "text", 1 << 20) is None  # asked for: taken as meant
    path.write_text(lines[0] + "\n그냥 한 줄의 글입니다\n", encoding="utf-8")
    assert field_check.jsonl_as_text_problem(str(path), "auto", 1 << 20) is None  # text with one JSON-looking line


def test_artifacts_show_says_when_a_model_learned_nothing(tmp_path, capsys):
    store = Store(tmp_path / "root")

    def produce(out):
        (out / "metrics.json").write_text("{}")
        return StageOutput(stats={"accuracy": 0.5, "warnings": ["5 test rows also in the training file"],
                                  "health": {"status": "not_learning", "problems": ["it predicts class 0 for all rows"]}})

    art = store.build(Request(kind="eval", name="e", stage_version=1, config={}), produce)
    assert main(["artifacts", "show", art.id, "--out", str(store.root)]) == 0
    out = capsys.readouterr().out  # was the scalar stats alone: accuracy 0.5 and no word of either
    assert "  health    learned nothing: it predicts class 0 for all rows\n" in out
    assert "  warning   5 test rows also in the training file\n" in out


def test_finetune_results_carry_a_verdict_that_is_not_ok(tmp_path, capsys):
    from kolectra.pipeline.cli.finetune import _print_metrics

    path = tmp_path / "metrics.json"
    health = {"status": "not_learning", "problems": ["the model predicts class '0' for all 20 dev rows"]}
    path.write_text(json.dumps({"accuracy": 0.47, "health": health}))
    _print_metrics(path)  # stdout: what -q keeps, and all a reused artifact prints (was the scores alone)
    assert capsys.readouterr().out.splitlines() == [
        "                accuracy  0.4700",
        "                  health  learned nothing: the model predicts class '0' for all 20 dev rows"]
    path.write_text(json.dumps({"accuracy": 0.9, "health": {"status": "ok"}}))
    _print_metrics(path)
    assert "health" not in capsys.readouterr().out


def test_an_interrupted_demo_says_which_stages_it_kept():
    from kolectra.pipeline.run import timed_stage

    def stopped():
        raise KeyboardInterrupt

    timings = {"corpus": 1.0, "vocab": 0.1, "examples": 0.1}
    with pytest.raises(KeyboardInterrupt) as e:  # the command's line said "interrupted; nothing was published"
        timed_stage(timings, "pretrain", stopped)
    assert e.value.__notes__ == ["pretrain: nothing published",
                                 "done before it and kept: corpus, vocab, examples (the same `kolectra run` without --force reuses them)"]
    with pytest.raises(KeyboardInterrupt) as e:
        timed_stage({}, "corpus", stopped)
    assert not getattr(e.value, "__notes__", None)  # nothing done yet: the store's own words stand
