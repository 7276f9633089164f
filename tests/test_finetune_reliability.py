"""Fine-tuning refuses what cannot work, in one line naming the key or the file, and says when a run learned nothing.

Each case was reproduced on main before the fix: a model directory with renamed weights trained
from random initialisation with exit 0; KorQuAD training data with no answer at its offset trained
on zero answer windows; a non-object item ended in AttributeError; training on the scored file,
``epochs=0``, ``max_length=2`` and ``max_train_examples=-5`` were accepted.
"""

import dataclasses
import json
import shutil

import numpy as np
import pytest

from kolectra.core.config import ConfigError, override
from kolectra.finetune import classify, korquad, nsmc
from kolectra.finetune.config import KorquadConfig, NsmcConfig, sample_classify, sample_korquad, sample_nsmc
from kolectra.finetune.files import FinetuneError
from kolectra.finetune.readers.korquad import read_squad
from kolectra.finetune.skeleton import majority_check
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import Store
from tests.test_finetune_e2e import FIXTURE, nsmc_file, tiny_model  # noqa: F401 - tiny_model is a fixture


def small_nsmc(**kw):
    return dataclasses.replace(sample_nsmc(), **{"max_length": 32, "batch_size": 16, "epochs": 1,
                                                 "max_train_examples": 0, "max_eval_examples": 0, **kw})


@pytest.mark.parametrize("sets, key", [(["epochs=0"], "epochs"), (["max_length=2"], "max_length"),
                                       (["max_train_examples=-5"], "max_train_examples"),
                                       (["max_eval_examples=-1"], "max_eval_examples"),
                                       (["batch_size=0"], "batch_size"), (["device=tpu"], "device"),
                                       (["optim.warmup_fraction=1.5"], "optim.warmup_fraction"),
                                       (["dev_fraction=1"], "dev_fraction")])
def test_impossible_settings_name_their_key(sets, key):
    with pytest.raises(ConfigError, match=rf"^{key}: must be"):
        override(NsmcConfig(), sets)  # checks the result (cfg.validate())
    with pytest.raises(ConfigError, match="^max_query_length: must be between 1 and max_length - 4"):
        override(KorquadConfig(), ["max_length=64", "max_query_length=64"]).validate()


def test_cli_prints_a_bad_setting_as_one_line(tmp_path, capsys):
    train = nsmc_file(tmp_path / "train.txt", 20, 0)
    test = nsmc_file(tmp_path / "test.txt", 10, 1)
    argv = ["finetune", "nsmc", "--model", str(tmp_path), "--train", str(train), "--test", str(test),
            "--out", str(tmp_path / "store"), "--set", "epochs=0"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kolectra finetune")
    assert err[0].endswith(": error: epochs: must be at least 1, got 0")
    assert not Store(tmp_path / "store").list()


def test_renamed_weights_are_refused_unless_random_init_is_asked_for(tiny_model, tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    renamed = tmp_path / "renamed"
    shutil.copytree(tiny_model, renamed)
    weights = load_file(renamed / "model.safetensors")
    save_file({k.replace("electra.", "encoder."): v for k, v in weights.items()}, renamed / "model.safetensors")
    train, test = nsmc_file(tmp_path / "train.txt", 40, 0), nsmc_file(tmp_path / "test.txt", 10, 1)
    with pytest.raises(FinetuneError, match=r"encoder weights are missing .*electra\.embeddings.*"
                                            r"random_init=true") as e:
        nsmc.run(small_nsmc(), renamed, train, test, tmp_path / "out")
    assert "\n" not in str(e.value) and str(renamed) in str(e.value)
    result = nsmc.run(small_nsmc(random_init=True), renamed, train, test, tmp_path / "out")
    assert 0.0 <= result.stats["accuracy"] <= 1.0
    # the same directory with its own weights: nothing is missing
    nsmc.run(small_nsmc(), tiny_model, train, test, tmp_path / "out2")


@pytest.mark.parametrize("problem_type", ["regression", "multi_label_classification"])
def test_a_problem_type_in_the_model_config_does_not_change_the_classification_loss(tiny_model, tmp_path,
                                                                                    problem_type):
    # a model fine-tuned on KorSTS before, say: its config.json names "regression", which transformers kept
    # (a squared error against the class ids, or a BCE that refused integer labels)
    other = tmp_path / "other"
    shutil.copytree(tiny_model, other)
    config = json.loads((other / "config.json").read_text(encoding="utf-8"))
    (other / "config.json").write_text(json.dumps({**config, "problem_type": problem_type}), encoding="utf-8")
    train, test = nsmc_file(tmp_path / "train.txt", 40, 0), nsmc_file(tmp_path / "test.txt", 10, 1)
    nsmc.run(small_nsmc(), tiny_model, train, test, tmp_path / "a")
    nsmc.run(small_nsmc(), other, train, test, tmp_path / "b")
    a, b = (json.loads((tmp_path / side / "metrics.json").read_text()) for side in "ab")
    assert a["epochs"] == b["epochs"] and a["accuracy"] == b["accuracy"]
    cfg = dataclasses.replace(sample_classify(), text_column="document", max_length=32, epochs=1)
    classify.run(cfg, tiny_model, train, test, tmp_path / "c")  # the NSMC files read as TSV
    classify.run(cfg, other, train, test, tmp_path / "d")
    c, d = (json.loads((tmp_path / side / "metrics.json").read_text()) for side in "cd")
    assert c["epochs"] == d["epochs"] and c["accuracy"] == d["accuracy"]


def test_a_task_head_in_the_model_folder_is_drawn_afresh_from_the_seed(tiny_model, tmp_path):
    import torch
    from transformers import AutoModelForSequenceClassification

    from kolectra.finetune.loading import load_model, load_tokenizer
    from kolectra.model import runtime

    # a model fine-tuned before on a three-way task (KorNLI, say), saved with its head
    tuned = tmp_path / "tuned"
    shutil.copytree(tiny_model, tuned)
    before = AutoModelForSequenceClassification.from_pretrained(str(tiny_model), num_labels=3)
    with torch.no_grad():
        before.classifier.out_proj.weight.add_(1.0)
    before.save_pretrained(str(tuned))
    dev, tok = runtime.resolve("cpu", False, 1), load_tokenizer(tuned)
    heads = [load_model("AutoModelForSequenceClassification", tuned, small_nsmc(seed=seed), dev, tok, num_labels=3)
             for seed in (1, 1, 2)]
    saved = before.classifier.out_proj.weight
    # was: the saved head read as it is, the same for every seed (a head of another size: refused as "damaged")
    assert not any(torch.equal(h.classifier.out_proj.weight, saved) for h in heads)
    assert torch.equal(heads[0].classifier.out_proj.weight, heads[1].classifier.out_proj.weight)
    assert not torch.equal(heads[0].classifier.out_proj.weight, heads[2].classifier.out_proj.weight)
    assert torch.equal(heads[0].electra.embeddings.word_embeddings.weight, before.electra.embeddings.word_embeddings.weight)
    train, test = nsmc_file(tmp_path / "train.txt", 40, 0), nsmc_file(tmp_path / "test.txt", 10, 1)
    assert 0.0 <= nsmc.run(small_nsmc(), tuned, train, test, tmp_path / "out").stats["accuracy"] <= 1.0  # two-way


def test_max_length_beyond_the_position_table_is_refused(tiny_model, tmp_path):
    train, test = nsmc_file(tmp_path / "train.txt", 20, 0), nsmc_file(tmp_path / "test.txt", 10, 1)
    with pytest.raises(ConfigError, match=r"^max_length: 200 is longer than the model's 128 positions"):
        nsmc.run(small_nsmc(max_length=200), tiny_model, train, test, tmp_path / "out")


def test_training_on_the_scored_file_needs_asking(tiny_model, tmp_path):
    copy = tmp_path / "copy.json"
    shutil.copy(FIXTURE, copy)
    cfg = dataclasses.replace(sample_korquad(), max_length=64, max_query_length=24, epochs=1, max_train_examples=4,
                              max_eval_examples=4)
    for other in (FIXTURE, copy):  # the same path, or the same bytes under another name
        with pytest.raises(ConfigError, match=r"^train_on_eval: the training file .* is the file scored"):
            korquad.run(cfg, tiny_model, FIXTURE, other, tmp_path / "out")
    nsmc_train = nsmc_file(tmp_path / "train.txt", 20, 0)
    with pytest.raises(ConfigError, match="train_on_eval"):
        nsmc.run(small_nsmc(), tiny_model, nsmc_train, nsmc_train, tmp_path / "out")


def _squad(tmp_path, data, name="bad.json"):
    p = tmp_path / name
    p.write_text(json.dumps({"version": "t", "data": data}, ensure_ascii=False), encoding="utf-8")
    return p


def test_korquad_items_that_are_not_objects_name_their_json_path(tmp_path):
    qa = {"id": "a", "question": "호수는?", "answers": [{"text": "천지", "answer_start": 5}]}
    cases = {
        r"data\[0\]: expected an object, got str": ["백두산"],
        r"data\[0\]\.paragraphs\[0\]: expected an object, got int": [{"paragraphs": [7]}],
        r"data\[0\]\.paragraphs: expected a list, got dict": [{"paragraphs": {"context": "x"}}],
        r"data\[0\]\.paragraphs\[0\]\.qas\[1\]: expected an object, got list": [
            {"paragraphs": [{"context": "백두산의 천지", "qas": [qa, ["q"]]}]}],
        r"question 'a' \(data\[0\]\.paragraphs\[0\]\): answers need 'text'": [
            {"paragraphs": [{"context": "백두산의 천지", "qas": [dict(qa, answers=["천지"])]}]}],
    }
    for message, data in cases.items():
        with pytest.raises(FinetuneError, match=rf"bad\.json: {message}"):
            read_squad(_squad(tmp_path, data))


def test_korquad_answers_and_keys_that_are_missing_or_not_what_they_say_are_refused(tmp_path):
    """A null text had been read as the answer "None", answer_start true as 1 and 5.7 as 5 (a
    match), 1e999 and 10**20 (past int64, counted as a mismatch and then stored) stopped the run with an
    OverflowError; an article without paragraphs or a
    paragraph without qas was read as holding no questions, silently."""
    def doc(answer=None, para=None, article=None):
        qa = {"id": "a", "question": "호수는?", "answers": [answer or {"text": "천지", "answer_start": 5}]}
        return [article if article is not None else
                {"title": "t", "paragraphs": [para if para is not None else {"context": "백두산의 천지", "qas": [qa]}]},
                {"title": "u", "paragraphs": [{"context": "한라산의 백록담", "qas": [
                    {"id": "b", "question": "호수는?", "answers": [{"text": "백록담", "answer_start": 5}]}]}]}]
    bad = {
        r"answers need 'text' \(a string\) and integer 'answer_start' \(text null\)": doc({"text": None, "answer_start": 5}),
        r"answers need .* \(text \[\"천지\"\]\)": doc({"text": ["천지"], "answer_start": 5}),
        r"answers need .* \(answer_start true\)": doc({"text": "천지", "answer_start": True}),
        r"answers need .* \(answer_start 5\.7\)": doc({"text": "천지", "answer_start": 5.7}),
        r"answers need .* \(answer_start Infinity\)": doc({"text": "천지", "answer_start": float("inf")}),
        r"answers need .* \(answer_start 100000000000000000000, past any context\)": doc(
            {"text": "천지", "answer_start": 10**20}),
        r"an answer's text is empty \(or only whitespace and invisible characters\)": doc(
            {"text": "\u200b\x07", "answer_start": 4}),  # in no token: its target started after it ended
        r"data\[0\]: no 'paragraphs' list": doc(article={"title": "t"}),
        r"data\[0\]\.paragraphs\[0\]: no 'qas' list": doc(para={"context": "백두산의 천지"}),
    }
    for message, data in bad.items():
        with pytest.raises(FinetuneError, match=rf"bad\.json: .*{message}"):
            read_squad(_squad(tmp_path, data))
    # a lone surrogate, valid JSON ("\\ud800") that no UTF-8 text can hold: an internal UnicodeEncodeError
    for message, data in {r"data\[0\]\.paragraphs\[0\]: its context has a lone surrogate .* at character 7":
                          doc(para={"context": "백두산의 천지\ud800", "qas": []}),
                          r"question 'a' \(data\[0\]\.paragraphs\[0\]\): its answers\[0\]\.text has a lone surrogate":
                          doc({"text": "\udc00천지", "answer_start": 5})}.items():
        (tmp_path / "bad.json").write_text(json.dumps({"data": data}), encoding="utf-8")  # escaped: ASCII
        with pytest.raises(FinetuneError, match=rf"bad\.json: {message}"):
            read_squad(tmp_path / "bad.json")
    # a whole number written as a float, an empty list of paragraphs or questions: read as before
    questions, stats = read_squad(_squad(tmp_path, doc({"text": "천지", "answer_start": 5.0})
                                         + [{"title": "v", "paragraphs": []}, {"title": "w", "paragraphs": [
                                             {"context": "x", "qas": []}]}]))
    assert [q.answers for q in questions] == [(("천지", 5),), (("백록담", 5),)] and stats["bad_answer_starts"] == 0


def test_korquad_training_data_without_a_matching_answer_is_refused(tiny_model, tmp_path):
    doc = json.loads(FIXTURE.read_text(encoding="utf-8"))
    for article in doc["data"]:
        for para in article["paragraphs"]:
            for qa in para["qas"]:
                for a in qa["answers"]:
                    a["answer_start"] = len(para["context"]) + 5  # past the end of the context
    train = _squad(tmp_path, doc["data"], "shifted.json")
    cfg = dataclasses.replace(sample_korquad(), max_length=64, max_query_length=24, epochs=1)
    with pytest.raises(FinetuneError, match=r"shifted\.json: no training question has its answer at its "
                                            r"answer_start \(the first answer of each of the \d+ questions read misses "
                                            r"it\): nothing to learn from"):
        korquad.run(cfg, tiny_model, train, FIXTURE, tmp_path / "out")


def test_korquad_training_questions_whose_answer_misses_its_start_are_left_out_and_counted(tmp_path, capsys):
    """Trained, each of their windows was labelled "no answer here" ([CLS]) for a question that has
    one; now they are left out of training (as BERT's SQuAD reader leaves them), counted and said."""
    doc = json.loads(FIXTURE.read_text(encoding="utf-8"))
    shifted = 0
    for article in doc["data"][::2]:
        for para in article["paragraphs"]:
            for qa in para["qas"]:
                qa["answers"][0]["answer_start"] += 1
                shifted += 1
    train = _squad(tmp_path, doc["data"], "shifted.json")
    data = korquad.Korquad().read(sample_korquad(), train, FIXTURE)
    total = sum(len(p["qas"]) for a in doc["data"] for p in a["paragraphs"])
    assert 0 < shifted < total and len(data.train) == total - shifted
    assert data.facts["train_questions_left_out"] == shifted and data.facts["train_file"]["bad_answer_starts"] >= shifted
    assert f"{shifted} training question(s) whose first answer is not at its answer_start" in capsys.readouterr().err


def test_korquad_answer_starts_that_miss_say_where_the_answers_are(tmp_path, capsys):
    """A file whose answer_start counts UTF-8 bytes (written by Go's strings.Index, say) was refused or thinned with
    a count alone: "no training question has its answer at its answer_start (50 mismatches)"."""
    doc = json.loads(FIXTURE.read_text(encoding="utf-8"))
    qas = [(p["context"], qa["answers"][0]) for a in doc["data"] for p in a["paragraphs"] for qa in p["qas"]]
    for context, answer in qas:
        answer["answer_start"] = len(context[:answer["answer_start"]].encode("utf-8"))
    assert all(a["answer_start"] > 0 for _, a in qas)  # no answer opens its context: every one misses
    with pytest.raises(FinetuneError, match=rf"bytes\.json: no training question has its answer at its answer_start "
                                            rf"\(the first answer of each of the {len(qas)} questions read misses it\): "
                                            rf"nothing to learn from; their first answers: "
                                            rf"{len(qas)} at answer_start counted in UTF-8 bytes \(answer_start counts "
                                            r"characters\)$"):
        korquad.Korquad().read(sample_korquad(), _squad(tmp_path, doc["data"], "bytes.json"), FIXTURE)
    doc = json.loads(FIXTURE.read_text(encoding="utf-8"))
    qas = [(p["context"], qa["answers"][0]) for a in doc["data"] for p in a["paragraphs"] for qa in p["qas"]]
    qas[0][1]["answer_start"] += 2  # off by a few
    qas[1][1]["answer_start"] = len(qas[1][0][:qas[1][1]["answer_start"]].encode("utf-8"))
    qas[2][1]["text"] = "어디에도 없는 답"
    korquad.Korquad().read(sample_korquad(), _squad(tmp_path, doc["data"], "mixed.json"), FIXTURE)
    assert ("3 training question(s) whose first answer is not at its answer_start are left out of training ("
            f"{tmp_path / 'mixed.json'}; train_questions_left_out); their first answers: 1 at answer_start counted in "
            "UTF-8 bytes (answer_start counts characters), 1 within 16 characters of answer_start (offsets off by a "
            "few), 1 nowhere in it") in capsys.readouterr().err


def test_a_korquad_refusal_of_misses_counts_the_questions_read_and_names_the_cap(tmp_path):
    """max_train_examples=5 over a file whose first questions' answer_start miss (two answers each) was refused
    "(40 mismatches)", every answer of the whole file, for 5 questions, and the cap that chose them went unsaid."""
    context = "서울은 대한민국의 수도이다. 부산은 항구 도시이다."

    def article(i, shift):
        return {"title": f"t{i}", "paragraphs": [{"context": context, "qas": [{"id": f"q{i}", "question": "수도는?", "answers": [
            {"text": "서울", "answer_start": shift}, {"text": "서울", "answer_start": shift}]}]}]}
    train = _squad(tmp_path, [article(i, 3) for i in range(20)] + [article(100 + i, 0) for i in range(2)], "off.json")
    cfg = dataclasses.replace(sample_korquad(), max_train_examples=5)
    with pytest.raises(FinetuneError, match=r"off\.json: no training question has its answer at its answer_start \(the "
                                            r"first answer of each of the 5 questions read misses it\): nothing to learn "
                                            r"from; their first answers: 5 within 16 characters of answer_start "
                                            r"\(offsets off by a few\); max_train_examples=5 read the file's first 5 of "
                                            r"its 22 questions: raise it \(0: all\)$"):
        korquad.Korquad().read(cfg, train, FIXTURE)


def test_a_korquad_2_file_is_named_as_one_not_as_a_broken_1_0_file(tmp_path):
    """KorQuAD 2.0 (each article one web page holding its questions, one 'answer' each) was refused as
    "data[0]: no 'paragraphs' list (a SQuAD-format article holds its paragraphs there)", as if a 1.0 file were broken."""
    page = "<html><body>서울은 대한민국의 수도이다.</body></html>"
    k2 = {"version": "KorQuAD_2.1_train_00", "data": [{"title": "서울", "url": "https://ko.wikipedia.org/wiki/서울",
                                                        "context": page, "raw_html": page, "qas": [{
                                                            "id": "1", "question": "수도는?", "answer": {
                                                                "text": "서울", "answer_start": 12,
                                                                "html_answer_start": 12}}]}] * 2}
    path = tmp_path / "korquad2.1_train_00.json"
    path.write_text(json.dumps(k2, ensure_ascii=False), encoding="utf-8")
    named = (r"korquad2\.1_train_00\.json: a KorQuAD 2\.0 file \(version 'KorQuAD_2\.1_train_00'\): .* the korquad task "
             r"reads KorQuAD 1\.0 .*; KorQuAD 2\.0 is not read$")
    with pytest.raises(FinetuneError, match=named):
        read_squad(path)
    with pytest.raises(FinetuneError, match=named):  # split into train and dev, it had been refused only when read
        korquad.write_split(path, 0.5, 0, tmp_path / "split")
    del k2["version"]  # by its shape alone: an article's own qas with one 'answer' each
    path.write_text(json.dumps(k2, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(FinetuneError, match=r"json: a KorQuAD 2\.0 file: its articles hold their questions themselves"):
        read_squad(path)
    with pytest.raises(FinetuneError, match=r"data\[0\]: no 'paragraphs' list"):  # a 1.0 file's broken article, as before
        read_squad(_squad(tmp_path, [{"title": "t", "qas": []}]))


def test_a_run_that_learned_nothing_says_so(tiny_model, tmp_path, capsys):
    # all but 3 training reviews positive: the model learns to say "positive" (a file of one label is refused:
    # test_finetune_data)
    src = nsmc_file(tmp_path / "src.txt", 60, 0).read_text(encoding="utf-8").splitlines()
    train = tmp_path / "train.txt"
    train.write_text("\n".join([src[0]] + [r.rsplit("\t", 1)[0] + f"\t{int(i > 3)}" for i, r in enumerate(src[1:], 1)])
                     + "\n", encoding="utf-8")
    test = nsmc_file(tmp_path / "test.txt", 20, 1)
    out = tmp_path / "out"
    nsmc.run(small_nsmc(epochs=2, optim=dataclasses.replace(sample_nsmc().optim, lr=1e-3)), tiny_model, train,
             test, out)
    health = json.loads((out / "metrics.json").read_text(encoding="utf-8"))["health"]
    assert health["status"] == "not_learning" and health["figures"]["dev_predicted_classes"] == 1
    assert health["problems"][0].startswith("the model predicts class 1 for all 12 dev rows: it learned nothing")
    assert "WARNING: the model predicts class 1" in capsys.readouterr().err


def test_majority_check_wording():
    labels = np.array([0, 0, 0, 1])
    problems, figures = majority_check(labels, np.array([0, 0, 0, 1]), "dev")
    assert problems == [] and figures == {"dev_accuracy": 1.0, "dev_majority_class": 0, "dev_majority_share": 0.75,
                                          "dev_predicted_classes": 2}
    assert "predicts class 0 for all 4 dev rows" in majority_check(labels, np.zeros(4, int), "dev")[0][0]
    worse = majority_check(labels, np.array([1, 0, 0, 0]), "dev")[0][0]
    assert worse.startswith("dev accuracy 50.00% is no better than always predicting the majority class 0 (75.00%")


def test_a_diverged_run_says_so_and_writes_strict_json(tiny_model, tmp_path):
    train = nsmc_file(tmp_path / "train.txt", 40, 0)
    test = nsmc_file(tmp_path / "test.txt", 10, 1)
    # a learning rate no model survives: the loss overflows within the epoch
    nsmc.run(small_nsmc(optim=dataclasses.replace(sample_nsmc().optim, lr=1e12)), tiny_model, train, test,
             tmp_path / "out")
    text = (tmp_path / "out" / "metrics.json").read_text(encoding="utf-8")
    metrics = json.loads(text, parse_constant=lambda c: pytest.fail(f"metrics.json holds {c}"))
    assert metrics["epochs"][0]["train_loss"] is None
    assert metrics["health"]["status"] == "not_learning"
    assert metrics["health"]["problems"][0].startswith("training diverged")


def test_dropout_keys_set_the_models_dropout_and_are_recorded_only_when_set(tiny_model, tmp_path):
    from kolectra.core.config import to_dict
    from kolectra.finetune.loading import load_model, load_tokenizer
    from kolectra.model import runtime

    dev, tok = runtime.resolve("cpu", False, 1), load_tokenizer(tiny_model)
    kept = json.loads((tiny_model / "config.json").read_text())

    def rates(cfg):
        model = load_model("AutoModelForSequenceClassification", tiny_model, cfg, dev, tok, num_labels=2)
        hidden = model.electra.encoder.layer[0].output.dropout.p
        attention = model.electra.encoder.layer[0].attention.self.dropout.p
        return hidden, model.classifier.dropout.p, attention

    # -1 (the default) keeps config.json's; a value sets the hidden layers and the head, or attention
    assert rates(small_nsmc()) == (kept["hidden_dropout_prob"], kept["hidden_dropout_prob"],
                                   kept["attention_probs_dropout_prob"])
    assert rates(small_nsmc(dropout=0.3)) == (0.3, 0.3, kept["attention_probs_dropout_prob"])
    assert rates(small_nsmc(attention_dropout=0.2, dropout=0.0)) == (0.0, 0.0, 0.2)
    # earlier requests keep their ids: the keys are in the request only when set
    assert "dropout" not in to_dict(small_nsmc()) and "attention_dropout" not in to_dict(small_nsmc())
    assert to_dict(small_nsmc(dropout=0.1))["dropout"] == 0.1
    for key in ("dropout", "attention_dropout"):
        with pytest.raises(ConfigError, match=rf"^{key}: must be -1 \(the model's config.json\) or in \[0, 1\)"):
            override(NsmcConfig(), [f"{key}=1.0"])
