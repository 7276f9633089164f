"""Bad input found by the input audit, each refused in one line that names what is wrong and how to
fix it: a cp949 data file (the line, and the iconv command), an NSMC file with a header and no
rows, the bad-row limit (the setting and the value that lets the counted rows through), negative or
NaN pretraining settings (the value given), an empty KorQuAD question (refused with its JSON path,
as the other malformed questions are), settings that crashed later (AdamW's betas), a ref to an
artifact of another kind or too short a prefix, --out below a regular file, an unreadable holdout
list, a damaged safetensors header; Ctrl-C while fine-tuning. Real readers, store and tokenizer; the CLI cases through
``kolectra.pipeline.cli.main``."""

from __future__ import annotations

import copy
import json
import re
import shutil
import signal

import pytest

from kolectra.core.stage import StageOutput
from kolectra.finetune.files import FinetuneError
from kolectra.finetune.readers.korquad import questions_of, read_squad
from kolectra.finetune.readers.nsmc import read_nsmc
from kolectra.finetune.readers.tables import read_csv
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.request import Request
from tests.model_support import small_chain
from tests.test_faults_cli import kolectra
from tests.test_finetune_e2e import FIXTURE, nsmc_file, tiny_model  # noqa: F401 - tiny_model is a fixture


def _one_line(err: str, command: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.startswith(f"kolectra {command}:")]
    assert len(lines) == 1 and "Traceback" not in err, err[-2000:]
    return lines[0]


def test_a_cp949_nsmc_file_names_its_line_and_the_iconv_command(tiny_model, tmp_path, capsys):
    train = nsmc_file(tmp_path / "train.txt", 40, 0)
    test = tmp_path / "test.txt"
    test.write_bytes(nsmc_file(tmp_path / "t.txt", 10, 1).read_text(encoding="utf-8").encode("cp949"))
    argv = ["finetune", "nsmc", "--model", str(tiny_model), "--train", str(train), "--test", str(test),
            "--out", str(tmp_path / "root"), "--preset", "sample", "--set", "epochs=1"]
    assert main(argv) == 2
    line = _one_line(capsys.readouterr().err, "finetune nsmc")
    assert f"{test}:2: not UTF-8" in line  # line 1 is the ASCII header
    assert f"iconv -f cp949 -t utf-8 {test} > " in line


def test_a_csv_in_an_unknown_encoding_names_its_line_and_a_generic_iconv(tmp_path):
    path = tmp_path / "x.csv"
    path.write_bytes(b"text,label\n" + "좋다,1\n".encode() * 3 + b"\xff\xff\xff,0\n")
    with pytest.raises(FinetuneError, match=r"x\.csv:5: not UTF-8 .*byte 0xff.*iconv -f <its encoding> -t utf-8"):
        read_csv(path)


def test_an_nsmc_file_with_a_header_and_no_rows_says_so(tmp_path):
    path = tmp_path / "ratings_test.txt"
    path.write_text("id\tdocument\tlabel\n", encoding="utf-8")
    with pytest.raises(FinetuneError, match="a header and no rows"):
        read_nsmc(path)


def test_the_bad_row_limit_names_the_setting_and_a_value_that_lets_the_rows_through(tmp_path):
    path = nsmc_file(tmp_path / "train.txt", 40, 0)
    with open(path, "a", encoding="utf-8") as f:
        f.write("41\t별로\t2\n42\t두 칸\n43\t세 칸\t1\n")
    with pytest.raises(FinetuneError) as e:
        read_nsmc(path)
    message = str(e.value)
    assert re.search(r": 2 of \d+ rows are malformed \(limit max_bad_fraction=0\.001; ", message)
    suggested = re.search(r"raise it with --set max_bad_fraction=(\S+)\)", message).group(1)
    assert read_nsmc(path, float(suggested)).stats["bad_rows"] == 2  # the value given does let them through


@pytest.mark.parametrize("setting, shown", [("train.save_every=-5", "got -5"), ("train.peak_tflops=-1", "got -1.0"),
                                            ("train.peak_tflops=nan", "got nan")])
def test_a_negative_pretraining_setting_names_the_value_given(tmp_path, capsys, setting, shown):
    assert main(["pretrain", "--examples", "nothing-yet", "--out", str(tmp_path), "--set", setting]) == 2
    line = _one_line(capsys.readouterr().err, "pretrain")
    assert setting.split("=")[0] in line and shown in line


@pytest.mark.parametrize("question", ["", "  \n"])
def test_an_empty_korquad_question_is_refused_with_its_path(question):
    doc = json.loads(FIXTURE.read_text(encoding="utf-8"))
    doc = copy.deepcopy(doc)
    qa = doc["data"][1]["paragraphs"][0]["qas"][0]
    qa["question"] = question
    with pytest.raises(FinetuneError, match=rf"question {re.escape(repr(qa['id']))} \(data\[1\]\.paragraphs\[0\]\): "
                                            "the question is empty"):
        questions_of(doc, "dev.json")


@pytest.mark.parametrize("argv, named", [
    # torch's AdamW refused these after the data was read: 'internal error: IndexError' / 'ValueError'
    (["finetune", "nsmc", "--set", "optim.adam_betas=[0.9]"], "optim.adam_betas: must be two numbers in [0, 1)"),
    (["finetune", "nsmc", "--set", "optim.adam_betas=[1.5,0.9]"], "got (1.5, 0.9)"),
    (["finetune", "classify", "--set", "optim.adam_eps=0"], "optim.adam_eps: must be a finite number > 0, got 0.0"),
    (["finetune", "regress", "--set", "optim.lr=inf"], "optim.lr: expected a finite number, got inf"),
    (["finetune", "ner", "--set", "tags_column=tokens"], "tags_column: must be another column than tokens_column"),
    (["finetune", "ner", "--set", "tokens_column="], "tokens_column: must be a column name"),
    (["vocab", "--set", "report_top_words=-1"], "report_top_words: must be >= 0, got -1"),  # sliced all but the last
    (["vocab", "--set", "sp_threads=0"], "sp_threads: must be >= 1, got 0"),
])
def test_a_setting_that_cannot_work_is_refused_before_anything_is_read(tmp_path, capsys, argv, named):
    inputs = (["--corpus", "nothing-yet"] if argv[0] == "vocab" else
              ["--model", str(tmp_path / "none"), "--train", str(tmp_path / "a"), "--test", str(tmp_path / "b")])
    assert main([*argv[:-2], *inputs, "--out", str(tmp_path / "root"), *argv[-2:]]) == 2
    command = " ".join(argv[:2]) if argv[0] == "finetune" else argv[0]
    assert named in _one_line(capsys.readouterr().err, command)


def test_a_file_with_no_readable_row_is_not_told_to_raise_the_limit(tmp_path):
    path = tmp_path / "x.tsv"
    path.write_text("id\tdocument\tlabel\n1\t가\t5\n2\t나\t7\n", encoding="utf-8")
    with pytest.raises(FinetuneError, match=r"none is readable: check the file's format and columns\): line 2") as e:
        read_nsmc(path)
    assert "--set" not in str(e.value)


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """corpus -> vocab -> examples in a store (a small real tokenizer, no Beam), plus a second corpus
    artifact under the same name, so that the name alone is ambiguous."""
    store = Store(tmp_path_factory.mktemp("audit") / "root")
    corpus, vocab, examples = small_chain(store)
    def produce(out):
        (out / "stats.json").write_text("{}")
        return StageOutput(stats={})

    other = store.build(Request(kind="corpus", name="c", stage_version=1, config={"other": True}), produce)
    return store.root, corpus, vocab, examples, other


@pytest.mark.parametrize("case", ["vocab for corpus", "checkpoint wanted", "short prefix", "ambiguous name",
                                  "checkpoint wanted, two of another kind"])
def test_a_ref_that_finds_nothing_says_what_it_does_find(chain, capsys, case):
    """A ref naming two artifacts of other kinds (here the two corpora named c, for --model) lost the hint
    one of them gets ('is a corpus artifact ..., where a checkpoint one is needed'): the line was only
    'no artifact 'c' under ROOT/checkpoint'."""
    root, corpus, vocab, examples, other = chain
    both = ", ".join(sorted(str(a.path) for a in (corpus, other)))
    argv, command, expected = {
        "checkpoint wanted, two of another kind": (
            ["finetune", "nsmc", "--model", "c", "--train", "a", "--test", "b"], "finetune nsmc",
            f"no artifact 'c' under {root}/checkpoint: 'c' is 2 corpus artifacts ({both}), where a checkpoint one "
            "is needed"),
        "vocab for corpus": (["vocab", "--corpus", vocab.id[:8]], "vocab",
                             f"is a vocab artifact ({vocab.path}), where a corpus one is needed"),
        "checkpoint wanted": (["finetune", "nsmc", "--model", examples.id, "--train", "a", "--test", "b"],
                              "finetune nsmc", "is an examples artifact"),
        "short prefix": (["pretrain", "--examples", examples.id[:4]], "pretrain",
                         f"an id prefix needs 6 or more characters; {examples.id[:4]!r} has 4"),
        "ambiguous name": (["vocab", "--corpus", "c"], "vocab", "'c' is ambiguous: "),
    }[case]
    assert main([*argv, "--out", str(root)]) == 2
    line = _one_line(capsys.readouterr().err, command)
    assert expected in line
    if case == "ambiguous name":
        assert str(corpus.path) in line and str(other.path) in line and "give more of the id" in line


def test_an_out_below_a_regular_file_names_the_file(tmp_path, capsys):
    (tmp_path / "notes").write_text("x")
    assert main(["corpus", "--input", str(FIXTURE), "--out", str(tmp_path / "notes" / "root")]) == 2
    line = _one_line(capsys.readouterr().err, "corpus")  # was "notes/root/.locks: is not a directory"
    assert f"--out {tmp_path / 'notes' / 'root'}: {tmp_path / 'notes'} is a file, not a directory" in line


@pytest.mark.parametrize("holdout, expected", [("absent.txt", "not found"), ("cp949.txt", "is not UTF-8")])
def test_a_holdout_list_that_cannot_be_read_is_refused_before_the_job(chain, tmp_path, capsys, holdout, expected):
    root, corpus, vocab, _, _ = chain
    (tmp_path / "cp949.txt").write_bytes("문서-1\n".encode("cp949"))  # was an internal error in a Beam worker
    assert main(["examples", "--corpus", str(corpus.path), "--vocab", str(vocab.path), "--out", str(root),
                 "--set", f"holdout_ids={tmp_path / holdout}"]) == 2
    assert f"holdout_ids: {tmp_path / holdout} {expected}" in _one_line(capsys.readouterr().err, "examples")


def test_a_damaged_safetensors_in_a_model_folder_is_one_line(tiny_model, tmp_path, capsys):
    model = shutil.copytree(tiny_model, tmp_path / "model")
    weights = bytearray((model / "model.safetensors").read_bytes())
    weights[100] ^= 0xFF  # inside the JSON header: was 'internal error: SafetensorError'
    (model / "model.safetensors").write_bytes(bytes(weights))
    argv = ["finetune", "nsmc", "--model", str(model), "--train", str(nsmc_file(tmp_path / "train.txt", 40, 0)),
            "--test", str(nsmc_file(tmp_path / "test.txt", 10, 1)), "--out", str(tmp_path / "root"),
            "--preset", "sample", "--set", "epochs=1"]
    assert main(argv) == 2
    line = _one_line(capsys.readouterr().err, "finetune nsmc")
    assert f"{model}: cannot load its weights (SafetensorError: " in line and "cut-short" in line


def test_ctrl_c_while_fine_tuning_is_one_line_and_publishes_nothing(tiny_model, tmp_path):
    """Pretraining's Ctrl-C is covered in test_faults_cli.py; this is a finetune command's, mid-epoch."""
    root = tmp_path / "root"
    proc = kolectra("finetune", "nsmc", "--model", str(tiny_model), "--train", str(nsmc_file(tmp_path / "tr.txt", 400, 0)),
                    "--test", str(nsmc_file(tmp_path / "te.txt", 40, 1)), "--out", str(root), "--preset", "sample",
                    "--set", "epochs=200", "--set", "max_length=32", wait=False)
    seen = []
    for line in proc.stderr:  # the first epoch's line: the run is training
        seen.append(line)
        if line.startswith("[kolectra] epoch 1:"):
            break
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, "".join(seen)[-2000:] + err[-2000:]
    line = _one_line(err, "finetune nsmc")
    assert line.startswith("kolectra finetune nsmc: interrupted; eval: nothing published; its partial build in ")
    assert not list((root / "eval").glob("*")) and not list((root / ".tmp").glob("*"))


def test_an_empty_korquad_answer_is_refused_with_its_path():
    doc = copy.deepcopy(json.loads(FIXTURE.read_text(encoding="utf-8")))
    qa = doc["data"][0]["paragraphs"][0]["qas"][0]
    qa["answers"] = [*qa["answers"], {"text": " ", "answer_start": 0}]  # was taken as a span, its start "correct"
    with pytest.raises(FinetuneError, match=rf"question {re.escape(repr(qa['id']))} .*an answer's text is empty"):
        questions_of(doc, "train.json")


@pytest.mark.parametrize("damage, expected", [
    ("cut tokenizer.json", "cannot load its tokenizer (JSONDecodeError: "),  # was 'internal error: JSONDecodeError'
    ("no vocabulary", "its tokenizer has no vocabulary beyond its 5 special tokens"),  # trained on [UNK] only
])
def test_a_model_folder_whose_tokenizer_is_damaged_or_missing_is_one_line(tiny_model, tmp_path, capsys, damage,
                                                                          expected):
    model = shutil.copytree(tiny_model, tmp_path / "model")
    if damage == "cut tokenizer.json":
        (model / "tokenizer.json").write_bytes((model / "tokenizer.json").read_bytes()[:100])
    else:
        config = json.loads((model / "tokenizer_config.json").read_text())
        config["tokenizer_class"] = "BertTokenizer"  # as kolectra writes it (vocab/export.py)
        (model / "tokenizer_config.json").write_text(json.dumps(config))
        for name in ("tokenizer.json", "vocab.txt"):
            (model / name).unlink(missing_ok=True)
    argv = ["finetune", "nsmc", "--model", str(model), "--train", str(nsmc_file(tmp_path / "train.txt", 40, 0)),
            "--test", str(nsmc_file(tmp_path / "test.txt", 10, 1)), "--out", str(tmp_path / "root"),
            "--preset", "sample", "--set", "epochs=1"]
    assert main(argv) == 2
    assert f"{model}: {expected}" in _one_line(capsys.readouterr().err, "finetune nsmc")
    assert not list((tmp_path / "root" / "eval").glob("*"))


def test_a_cp949_korquad_file_names_its_line_and_the_iconv_command(tmp_path):
    path = tmp_path / "dev.json"
    path.write_bytes(FIXTURE.read_text(encoding="utf-8").encode("cp949"))  # was "not readable JSON ('utf-8' codec...)"
    with pytest.raises(FinetuneError, match=r"dev\.json:\d+: not UTF-8 .*iconv -f cp949 -t utf-8 "):
        read_squad(path)


def test_a_damaged_examples_shard_is_refused_in_one_line_naming_it(chain, tmp_path, capsys):
    root = shutil.copytree(chain[0], tmp_path / "root")
    shard = sorted((root / "examples").glob("*/**/*.arrow"))[0]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    assert main(["pretrain", "--examples", chain[3].id, "--out", str(root), "--preset", "tiny"]) == 2
    err = capsys.readouterr().err
    line = _one_line(err, "pretrain")  # was two lines: the refusal, then the file indented below it
    assert err.strip().endswith(line) and f"({shard}: sha256 differs from manifest)" in line
    assert "rebuild it (its command with --force)" in line
