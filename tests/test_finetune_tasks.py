"""classify, regress and ner end to end on a tiny random ELECTRA, from fixture files written here.

Every file is written by the tests in ``tmp_path`` (short Korean sentences made up for kolectra):
topic classification as TSV, an NLI-style pair task as CSV, JSONL (the label nested, read by a
dotted name) and a saved ``datasets`` folder (class labels), a KorSTS-style TSV with a stray quote,
CoNLL files.  Also ``--seeds`` over a file task, the CLI flags and ``kolectra report`` over several
eval artifacts (one table across tasks).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks.tiny_model import build_tiny_model_dir
from kolectra.finetune import classify, config, ner, regress
from kolectra.finetune.config import OptimConfig
from kolectra.pipeline import stages
from kolectra.pipeline.cli import main
from kolectra.pipeline.scores import render_table
from kolectra.pipeline.store.artifacts import Store

TOPICS = {"스포츠": ["축구 경기에서 골을 넣었다", "야구 선수가 홈런을 쳤다", "농구 결승전이 열렸다", "배구 대표팀이 이겼다"],
          "경제": ["주가가 크게 올랐다", "환율이 떨어졌다", "금리가 인상되었다", "수출이 늘어났다"],
          "날씨": ["내일은 비가 온다", "오후에 눈이 내린다", "바람이 강하게 분다", "기온이 영하로 떨어진다"]}
PREMISES = ["그는 아침에 공원을 달렸다", "가게는 오늘 문을 닫았다", "아이들이 마당에서 놀고 있다"]
AGREE = ["그 말이 맞다", "사실이다", "틀림없다"]
DENY = ["그 말은 거짓이다", "사실이 아니다", "전혀 아니다"]
SIMILAR = ["두 문장은 같은 뜻이다", "거의 똑같은 의미의 문장", "완전히 같은 이야기"]
UNRELATED = ["전혀 관계없는 내용이다", "서로 다른 주제의 문장", "의미가 완전히 다르다"]
PER, LOC, ORG = ["김민수", "이영희", "박철수"], ["서울", "부산", "대구"], [("삼성", "전자"), ("현대", "자동차")]
WORDS = ["씨는", "에서", "일한다", "직원", "이", "왔다", "비교", "문장", '"따옴표', "하나"]


def all_texts() -> list[str]:
    return ([t for pool in TOPICS.values() for t in pool] + PREMISES + AGREE + DENY + SIMILAR + UNRELATED
            + PER + LOC + [w for o in ORG for w in o] + WORDS)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    # hidden 64, 12 epochs: the topic task learned for 4 seeds of 4 (at hidden 32, for 3 of 4)
    return build_tiny_model_dir(tmp_path_factory.mktemp("tiny-tasks"), all_texts(), seed=0, hidden=64, layers=2,
                                heads=2, vocab_size=400, max_position=128)


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def topics_tsv(path: Path, n: int, offset: int) -> Path:
    names = list(TOPICS)
    rows = [(names[(i + offset) % 3], (i * 5 + offset) % 4) for i in range(n)]
    # a row number makes each text its own: a carved dev split keeps repeated texts on one side
    return write(path, ["id\ttext\tlabel"] + [f"{i}\t{TOPICS[lab][k]} {offset * 1000 + i}\t{lab}"
                                               for i, (lab, k) in enumerate(rows)])


def nli_rows(n: int, offset: int) -> list[tuple[str, str, str]]:
    out = []
    for i in range(n):
        agree = (i + offset) % 2 == 0
        out.append((PREMISES[(i + offset) % 3], (AGREE if agree else DENY)[(i * 2 + offset) % 3],
                    "entailment" if agree else "contradiction"))
    return out


def sts_tsv(path: Path, n: int, offset: int) -> Path:
    """KorSTS columns; row 3 has a stray quote that a CSV reader would run to the next one."""
    lines = ["genre\tfilename\tyear\tid\tscore\tsentence1\tsentence2"]
    for i in range(n):
        similar = (i + offset) % 2 == 0
        s1 = (SIMILAR if similar else UNRELATED)[(i + offset) % 3]
        score = (4.0 if similar else 0.5) + 0.25 * ((i + offset) % 3)  # each sentence its own score
        lines.append(f"main-captions\tMSRvid\t2012test\t{i:04d}\t{score:.3f}\t{s1}\t"
                     + ('"따옴표 하나' if i == 3 else f"비교 문장 {offset * 1000 + i}"))  # each pair its own
    return write(path, lines)


def ner_sentences(n: int, offset: int) -> list[list[tuple[str, str]]]:
    out = []
    for i in range(n):
        p, loc, org = PER[(i + offset) % 3], LOC[(i * 2 + offset) % 3], ORG[(i // 2 + offset) % 2]
        out.append([(p, "B-PER"), ("씨는", "O"), (loc, "B-LOC"), ("에서", "O"), ("일한다", "O")] if i % 2 else
                   [(org[0], "B-ORG"), (org[1], "I-ORG"), ("직원", "O"), (p, "B-PER"), ("이", "O"), ("왔다", "O")])
    return out


def conll(path: Path, sentences) -> Path:
    path.write_text("\n\n".join("\n".join(f"{t}\t{g}" for t, g in s) for s in sentences) + "\n", encoding="utf-8")
    return path


# ELECTRA's practice (warm-up, layer-wise LR decay), with a rate a 2-layer model learns the toy tasks at
LEARN = OptimConfig(lr=5e-3, warmup_fraction=0.1, layerwise_lr_decay=0.9)


def fast(preset, **kw):
    return dataclasses.replace(preset(), **{"max_length": 32, "epochs": 3,
                                            "optim": OptimConfig(lr=1e-2, warmup_fraction=0.1), **kw})


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_classify_learns_string_labels_and_is_deterministic(tiny, tmp_path):
    train, test = topics_tsv(tmp_path / "train.tsv", 120, 0), topics_tsv(tmp_path / "test.tsv", 30, 1)
    cfg = fast(config.sample_classify, epochs=12, optim=LEARN)
    outs = [classify.run(cfg, tiny, train, test, tmp_path / f"out{k}") for k in range(2)]
    m0, m1 = ((tmp_path / f"out{k}" / "metrics.json").read_bytes() for k in range(2))
    assert m0 == m1  # same inputs and seed, same bytes on the CPU
    m = json.loads(m0)
    assert m["labels"] == ["경제", "날씨", "스포츠"] and m["selection"] == "accuracy"
    assert m["accuracy"] >= 0.9 and m["macro_f1"] >= 0.9, m  # separable topics; a broken label path is ~0.33
    assert m["dev_accuracy"] == max(e["dev_accuracy"] for e in m["epochs"])
    assert m["train_examples"] + m["dev_examples"] == 120 and m["test_examples"] == 30
    assert m["dev_set"] == "0.2 of train.tsv, carved with seed 42" and m["test_file"]["bad_rows"] == 0
    train_labels = m["train_file"]["labels"]  # counted over the rows trained on
    assert set(train_labels) == set(m["labels"]) and sum(train_labels.values()) == m["train_examples"]
    assert outs[0].stats["accuracy"] == m["accuracy"] and m["health"]["status"] == "ok"
    preds = read_jsonl(tmp_path / "out0" / "predictions.jsonl")
    source = test.read_text(encoding="utf-8").splitlines()
    assert [p["line"] for p in preds] == list(range(2, 32))  # every test row, in file order
    assert all(source[p["line"] - 1].split("\t")[1:] == [p["text"], p["label"]] for p in preds)
    assert sum(p["predicted"] == p["label"] for p in preds) == round(m["accuracy"] * 30)
    assert (tmp_path / "out0" / "learning_curve.png").stat().st_size > 0


def nli_files(tmp_path: Path, rows, stem: str) -> dict[str, Path]:
    """The same pairs as CSV (a quoted field with a comma), JSONL (the label nested) and a saved dataset."""
    import csv

    import datasets

    rows = [(a + (", 정말" if i == 0 else ""), b, y) for i, (a, b, y) in enumerate(rows)]
    with open(tmp_path / f"{stem}.csv", "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows([("premise", "hypothesis", "label")] + rows)
    write(tmp_path / f"{stem}.jsonl", [json.dumps({"premise": a, "hypothesis": b, "gold": {"label": y}},
                                                  ensure_ascii=False) for a, b, y in rows])
    names = ["contradiction", "entailment", "neutral"]
    ds = datasets.Dataset.from_dict(
        {"premise": [a for a, _, _ in rows], "hypothesis": [b for _, b, _ in rows],
         "label": [names.index(y) for _, _, y in rows]},
        features=datasets.Features({"premise": datasets.Value("string"), "hypothesis": datasets.Value("string"),
                                    "label": datasets.ClassLabel(names=names)}))
    ds.save_to_disk(str(tmp_path / stem))
    return {"csv": tmp_path / f"{stem}.csv", "jsonl": tmp_path / f"{stem}.jsonl", "datasets": tmp_path / stem}


def test_pairs_read_alike_from_csv_jsonl_and_a_saved_dataset_with_a_dev_file(tiny, tmp_path):
    train, dev, test = (nli_files(tmp_path, nli_rows(n, k), stem) for n, k, stem in
                        ((60, 0, "train"), (12, 1, "dev"), (16, 2, "test")))
    results = {}
    for fmt in ("csv", "jsonl", "datasets"):
        label = "gold.label" if fmt == "jsonl" else "label"  # a dotted name reaches the nested field
        cfg = fast(config.sample_classify, epochs=2, text_column="premise", text_pair_column="hypothesis",
                   label_column=label)
        out = tmp_path / f"out-{fmt}"
        classify.run(cfg, tiny, train[fmt], test[fmt], out, dev_file=dev[fmt])
        m = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
        preds = read_jsonl(out / "predictions.jsonl")
        results[fmt] = (m["epochs"], m["accuracy"], m["macro_f1"], m["labels"],
                        [(p["text"], p["text_pair"], p["label"], p["predicted"]) for p in preds])
        assert m["dev_set"] == dev[fmt].name and m["dev_examples"] == 12 and m["train_examples"] == 60
        assert m["config"]["text_pair_column"] == "hypothesis" and m["labels"] == ["contradiction", "entailment"]
    assert results["csv"] == results["jsonl"] == results["datasets"]  # the same rows, the same run
    assert results["csv"][4][0][0] == "아이들이 마당에서 놀고 있다, 정말"  # the quoted comma stayed in the field


def test_regress_reads_korsts_tsv_with_a_stray_quote_and_learns(tiny, tmp_path):
    train, test = sts_tsv(tmp_path / "sts-train.tsv", 100, 0), sts_tsv(tmp_path / "sts-test.tsv", 30, 1)
    cfg = fast(config.sample_regress, text_column="sentence1", text_pair_column="sentence2", label_column="score",
               epochs=12, optim=LEARN)
    result = regress.run(cfg, tiny, train, test, tmp_path / "out")
    m = json.loads((tmp_path / "out" / "metrics.json").read_text(encoding="utf-8"))
    assert m["train_file"]["rows"] == 100 and m["test_file"]["rows"] == 30 and m["test_file"]["bad_rows"] == 0
    assert m["test_file"]["score_min"] == 0.5 and m["test_file"]["score_max"] == 4.5
    assert m["spearman"] >= 0.8 and m["pearson"] >= 0.8, m  # two well-separated score bands
    assert result.stats["spearman"] == m["spearman"] and m["selection"] == "spearman"
    preds = read_jsonl(tmp_path / "out" / "predictions.jsonl")
    assert len(preds) == 30 and preds[3]["text_pair"] == '"따옴표 하나'  # line 5 holds the quote, kept as text
    assert [p["line"] for p in preds] == list(range(2, 32)) and isinstance(preds[0]["predicted"], float)


def test_ner_learns_entities_and_writes_one_prediction_per_sentence(tiny, tmp_path):
    train = conll(tmp_path / "train.conll", ner_sentences(80, 0))
    dev = conll(tmp_path / "dev.conll", ner_sentences(10, 2))
    test = conll(tmp_path / "test.conll", ner_sentences(20, 1))
    cfg = fast(config.sample_ner, epochs=12, optim=LEARN)
    ner.run(cfg, tiny, train, test, tmp_path / "out", dev_file=dev)
    m = json.loads((tmp_path / "out" / "metrics.json").read_text(encoding="utf-8"))
    assert m["tags"] == ["O", "B-LOC", "B-ORG", "I-ORG", "B-PER"] and m["dev_set"] == "dev.conll"
    assert m["f1"] >= 0.9, m  # each entity word always has its type; an off-by-one alignment scores far lower
    assert m["gold_entities"] == 40 and m["words_without_prediction"] == 0
    assert set(m["per_type"]) == {"LOC", "ORG", "PER"} and m["health"]["status"] == "ok"
    preds = read_jsonl(tmp_path / "out" / "predictions.jsonl")
    sentences = ner_sentences(20, 1)
    assert len(preds) == 20 and [p["tokens"] for p in preds] == [[t for t, _ in s] for s in sentences]
    assert [p["tags"] for p in preds] == [[g for _, g in s] for s in sentences]
    assert all(len(p["predicted"]) == len(p["tokens"]) for p in preds)
    assert preds[1]["line"] == 8  # the line each sentence starts on


def test_ner_tokens_past_max_length_are_predicted_outside_and_counted(tiny, tmp_path):
    long = [[(PER[i % 3], "B-PER")] + [("왔다", "O")] * 12 + [(LOC[i % 3], "B-LOC")] for i in range(12)]
    train, test = conll(tmp_path / "train.conll", long), conll(tmp_path / "test.conll", long[:4])
    ner.run(fast(config.sample_ner, epochs=1, max_length=8), tiny, train, test, tmp_path / "out")
    m = json.loads((tmp_path / "out" / "metrics.json").read_text(encoding="utf-8"))
    assert m["words_without_prediction"] == 4 * 8  # 14 words, 6 fit between [CLS] and [SEP]
    assert all(p["predicted"][6:] == ["O"] * 8 for p in read_jsonl(tmp_path / "out" / "predictions.jsonl"))


@pytest.mark.xla
def test_ner_on_xla(tiny, tmp_path):
    """Per-token labels on XLA (PJRT on the CPU, in a process of its own as tests/test_finetune_xla.py does):
    padded to max_length with -100, one program per shape, only the loss reads leave the device."""
    spec = {"model": str(tiny), "train": str(conll(tmp_path / "train.conll", ner_sentences(48, 0))),
            "test": str(conll(tmp_path / "test.conll", ner_sentences(16, 1))), "out": str(tmp_path / "out")}
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "XLA_USE_BF16")}
    env.update(PJRT_DEVICE="CPU", CPU_NUM_DEVICES="1", XLA_FLAGS="--xla_backend_optimization_level=0",
               TRANSFORMERS_VERBOSITY="error")
    proc = subprocess.run([sys.executable, "-m", "tests.test_finetune_tasks", json.dumps(spec)], env=env, text=True,
                          cwd=Path(__file__).resolve().parents[1], capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    m = json.loads((tmp_path / "out" / "metrics.json").read_text(encoding="utf-8"))
    compiles = [e["xla_compiles"] for e in m["epochs"]]
    assert compiles[2] == compiles[1], compiles  # the later epochs reuse the programs
    assert set(report["fallback_ops"]) <= {"aten::_local_scalar_dense"}, report["fallback_ops"]
    assert report["device"].startswith("xla (CPU") and 0.0 <= m["f1"] <= 1.0 and m["test_examples"] == 16
    assert len(read_jsonl(tmp_path / "out" / "predictions.jsonl")) == 16


def _xla_ner(spec: dict) -> dict:
    """The subprocess side of :func:`test_ner_on_xla`: each epoch's record carries the compile count."""
    import torch_xla.debug.metrics as met

    from kolectra.finetune import skeleton
    from kolectra.model.xla import counters

    class Counted(ner.Ner):
        def epoch_record(self, scores):
            return {**super().epoch_record(scores), "xla_compiles": counters()["xla_compiles"]}

    cfg = fast(config.sample_ner, device="xla", epochs=3, batch_size=16, max_train_examples=32)
    result = skeleton.run(Counted(), cfg, Path(spec["model"]), Path(spec["train"]), Path(spec["test"]),
                          Path(spec["out"]))
    return {"device": result.compute["device_description"], "fallback_ops": sorted(met.executed_fallback_ops())}


def test_seeds_summary_and_one_table_across_tasks(tiny, tmp_path):
    store = Store(tmp_path / "store")
    train, test = topics_tsv(tmp_path / "train.tsv", 60, 0), topics_tsv(tmp_path / "test.tsv", 15, 1)
    sets = ["epochs=1", "max_length=32"]
    summary = stages.finetune_seeds(store, "classify", str(tiny), train, test, [1, 2], preset="sample", sets=sets,
                                    name="topics")
    m = json.loads((summary.path / "metrics.json").read_text(encoding="utf-8"))
    seeds = json.loads((summary.path / "seeds.json").read_text(encoding="utf-8"))
    per_seed = seeds["accuracy"]["per_seed"]
    assert m["seeds"] == [1, 2] and m["statistic"] == "median over seeds" and set(per_seed) == {"1", "2"}
    assert m["accuracy"] == pytest.approx((per_seed["1"] + per_seed["2"]) / 2)
    assert m["accuracy_spread"] == pytest.approx(abs(per_seed["1"] - per_seed["2"]))
    columns = ["text_column=sentence1", "text_pair_column=sentence2", "label_column=score"]
    sts = stages.finetune(store, "regress", str(tiny), sts_tsv(tmp_path / "a.tsv", 40, 0),
                          sts_tsv(tmp_path / "b.tsv", 10, 1), preset="sample", sets=sets + columns, name="korsts")
    path, table = render_table(store, [summary.path.name, str(sts.path)])
    lines = table.splitlines()
    assert lines[0] == "| model | topics (acc) | korsts (Spearman) |"
    cells = lines[2].split(" | ")
    assert cells[0] == f"| {tiny.name}" and cells[1].startswith(f"{100 * m['accuracy']:.2f} (median of 2 seeds")
    sts_metrics = json.loads((sts.path / "metrics.json").read_text(encoding="utf-8"))
    # beside the score: the rows it was measured on, and the health flag when the run learned nothing
    # and the share of test rows also in training, from the eval's overlap warning (the two files here
    # are drawn from one small template, so they overlap)
    flag = "; learned nothing" if sts_metrics["health"]["status"] == "not_learning" else ""
    shares = sorted({m_.group(1) for w in sts.manifest["stats"].get("warnings", [])
                     for m_ in [re.search(r"scored rows \(([\d.]+%)\) of .* also appear in the training file", w)] if m_})
    flag += "".join(f"; {share} of test rows in training" for share in shares)
    assert cells[2].rstrip(" |") == f"{100 * sts_metrics['spearman']:.2f} (10 test rows{flag})"
    assert "test rows" in cells[1]  # a --seeds summary takes them from its runs
    assert path.read_text(encoding="utf-8").count(str(sts.path)) == 1  # each cell's source is listed
    # --published's split column: the summary's from its runs too (it read 'topics: ?')
    split = render_table(store, [summary.path.name, str(sts.path)], dest=tmp_path / "published",
                         published=True)[1].splitlines()[2].split(" | ")[-1].rstrip(" |")
    assert split == "topics: 15 test rows of test.tsv; korsts: 10 test rows of b.tsv", split


def test_cli_flags_dev_file_and_report_of_several(tiny, tmp_path, capsys):
    root = ["--out", str(tmp_path / "store")]
    train = conll(tmp_path / "train.conll", ner_sentences(30, 0))
    dev = conll(tmp_path / "dev.conll", ner_sentences(6, 2))
    test = conll(tmp_path / "test.conll", ner_sentences(8, 1))
    assert main(["finetune", "ner", "--model", str(tiny), "--train", str(train), "--dev", str(dev), "--test", str(test),
                 "--preset", "sample", "--set", "epochs=1", "--name", "toy-ner"] + root) == 0
    ner_art = Path(capsys.readouterr().out.strip().splitlines()[-1])
    m = json.loads((ner_art / "metrics.json").read_text(encoding="utf-8"))
    assert m["dev_set"] == "dev.conll" and m["test_examples"] == 8
    inputs = json.loads((ner_art / "manifest.json").read_text(encoding="utf-8"))["inputs"]
    assert [Path(i["path"]).name for i in inputs] == [tiny.name, "train.conll", "test.conll", "dev.conll"]
    sts = [str(sts_tsv(tmp_path / f"{k}.tsv", n, k)) for k, n in ((0, 30), (1, 8))]
    argv = ["finetune", "regress", "--model", str(tiny), "--train", sts[0], "--test", sts[1], "--text-column",
            "sentence1", "--text-pair-column", "sentence2", "--label-column", "score", "--preset", "sample",
            "--set", "epochs=1", "--name", "toy-sts"] + root
    assert main(argv) == 0
    sts_art = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert json.loads((sts_art / "metrics.json").read_text(encoding="utf-8"))["config"]["label_column"] == "score"
    assert main(["report", str(ner_art), str(sts_art)] + root) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0] == "| model | toy-ner (F1) | toy-sts (Spearman) |" and out[2].startswith(f"| {tiny.name} | ")
    assert Path(out[-1]).name == "report.md" and Path(out[-1]).is_file()
    bad = argv[:argv.index("--label-column") + 1] + ["similarity"] + argv[argv.index("--label-column") + 2:]
    assert main(bad + ["--force"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no column 'similarity' (label_column); its columns are: genre, filename, year, id, " \
                               "score, sentence1, sentence2" in err[0]


# ---- report's table, artifacts list and --model on stand-in artifacts (no model trained) --------------
def stand_in(store: Store, name: str, *, kind: str = "eval", inputs=(), version: int = 1, score: float = 0.5):
    from kolectra.core.stage import StageOutput
    from kolectra.pipeline.store.artifacts import fingerprint_inputs
    from kolectra.pipeline.store.request import Request

    def produce(out: Path) -> StageOutput:
        (out / "metrics.json").write_text(json.dumps({"task": "classify", "accuracy": score}), encoding="utf-8")
        return StageOutput(stats={})
    return store.build(Request(kind=kind, name=name, stage_version=version, config={"k": name},
                               inputs=tuple(fingerprint_inputs(list(inputs)))), produce)


def test_report_table_refuses_another_kind_and_one_artifact_twice_and_keeps_same_named_models_apart(tmp_path):
    from kolectra.pipeline.store.artifacts import ArtifactError

    store, models = Store(tmp_path / "store"), []
    for run in ("a", "b"):  # two checkpoints' hf/discriminator, passed as folders: one folder name
        models.append(tmp_path / run / "hf" / "discriminator")
        models[-1].mkdir(parents=True)
        (models[-1] / "config.json").write_text(json.dumps({"run": run}), encoding="utf-8")
    topics = stand_in(store, "topics", inputs=[models[0]])
    stand_in(store, "nli", inputs=[models[1]], score=0.75), stand_in(store, "web", kind="corpus")
    with pytest.raises(ArtifactError, match=r"report: .*/corpus/web-\w+ is a corpus artifact; a table of several "
                                            r"takes eval artifacts only"):  # was "no artifact 'web' under .../eval"
        render_table(store, ["topics", "web"])
    with pytest.raises(ArtifactError, match=rf"report: {topics.path} is named twice \('topics' and "
                                            rf"'{topics.path.name}'\)"):
        render_table(store, ["topics", topics.path.name])
    lines = render_table(store, ["topics", "nli"])[1].splitlines()
    # a row each, told apart by content: both cells used to share one "discriminator" row
    assert len(lines) == 4 and lines[2] != lines[3] and all(r.startswith("| discriminator (") for r in lines[2:])
    assert lines[2].endswith(" | 50.00 | - |") and lines[3].endswith(" | - | 75.00 |")


def test_artifacts_list_tells_same_name_evals_apart_by_data_and_stage_version(tmp_path, capsys):
    store = Store(tmp_path / "store")
    train = write(tmp_path / "train.tsv", ["text\tlabel", "가\tx"])
    tests = [write(tmp_path / f"test-{k}.tsv", ["text\tlabel", f"{k}\tx"]) for k in "ab"]
    made = [stand_in(store, "kornli", inputs=[train, test], version=v) for v, test in ((1, tests[0]), (1, tests[1]),
                                                                                        (2, tests[1]))]
    assert main(["artifacts", "list", "--out", str(store.root)]) == 0
    rows = {line.split()[1]: line for line in capsys.readouterr().out.splitlines()[1:]}
    shown = [rows[a.path.name].split()[-2:] for a in made]  # the settings on which they differ
    # one config: the scored file and the stage version alone tell the three apart (they were not shown)
    assert shown[0][0].startswith('inputs[1]="test-a.tsv@') and shown[1][0] == shown[2][0] != shown[0][0]
    assert [s[1] for s in shown] == ["stage_version=1", "stage_version=1", "stage_version=2"]


def test_max_train_examples_with_a_dev_file_is_a_seeded_sample_not_the_files_first_rows(tmp_path):
    """With --dev the train rows stay in file order: the first N of a file sorted by label were one
    class. They are a seeded sample (in file order), as the carve's shuffle gives without --dev."""
    names = list(TOPICS)
    sorted_rows = [f"{i}\t{TOPICS[names[i // 8]][i % 4]}\t{names[i // 8]}" for i in range(24)]
    train = write(tmp_path / "train.tsv", ["id\ttext\tlabel", *sorted_rows])
    dev, test = topics_tsv(tmp_path / "dev.tsv", 6, 1), topics_tsv(tmp_path / "test.tsv", 6, 2)
    cfg = dataclasses.replace(config.sample_classify(), max_train_examples=8, seed=5)
    picked = [classify.Classify(dev).read(dataclasses.replace(cfg, seed=s), train, test).train for s in (5, 5, 6)]
    assert len(picked[0]) == 8 and len(set(picked[0]["label"])) > 1  # the file's first 8 are all one topic
    assert picked[0]["line"] == sorted(picked[0]["line"]) and picked[0]["line"] == picked[1]["line"]
    assert picked[2]["line"] != picked[0]["line"]  # another seed, another sample


def test_a_model_folder_that_is_neither_artifact_nor_hf_directory_says_so(tmp_path):
    from kolectra.pipeline.store.artifacts import ArtifactError

    with pytest.raises(ArtifactError, match=r"--model .*: neither a checkpoint artifact \(no manifest\.json\) nor "
                                            r"a Hugging Face model directory \(no config\.json\)"):
        stages.resolve_model(Store(tmp_path / "store"), str(tmp_path))  # was "not a complete artifact"


if __name__ == "__main__":  # the subprocess side of test_ner_on_xla: its report as the last stdout line
    print(json.dumps(_xla_ner(json.loads(sys.argv[1]))))


def test_classification_macro_f1_is_the_mean_of_per_class_f1():
    # macro, not micro (micro F1 is the accuracy for one label a row): a classifier that always
    # says the majority class scores 0 F1 on the others, which the macro mean shows
    scores = classify.classification_scores(np.array([0, 0, 0, 1]), np.array([0, 0, 0, 0]))
    assert scores["accuracy"] == 0.75
    assert scores["macro_f1"] == pytest.approx((2 * 0.75 / 1.75 + 0.0) / 2)
