"""The outside contract (commands, artifact layout, manifest fields) as a script meets it: each stage
command run through the CLI on a fresh root, on a disk (the root from ``KOLECTRA_HOME``, no ``--out``)
and in a bucket (moto's S3, ``--out s3://...``), held to what the contract says in its own words:

- every stage command prints the directory of the artifact it produced as the last line of stdout,
  ``ROOT/<kind>/<name>-<id>/``; ``REF`` is that directory or its id; the same request finds the same
  artifact, another one another id;
- ``manifest.json`` holds ``schema``, ``kind``, ``name``, ``id``, ``parents`` (ids), ``config``,
  ``files`` (each ``path``, ``bytes``, ``sha256``), ``digest``, ``stats``, ``provenance`` (kolectra
  and library versions, git commit, host, start and end time) and, for compute stages, ``compute``
  (parameters, FLOPs, wall seconds, device);
- the stage files others read: corpus ``stats.json`` (``records_in == records_out + rejected +
  sum(dropped)``) and ``rejects/`` as JSONL (``source``, ``line`` or ``offset``, ``reason``); vocab's
  Hugging Face tokenizer files and ``report.json``; examples ``stats.json`` (``examples``, ``tokens``);
  a checkpoint's ``hf/discriminator/`` and ``hf/generator/``, each loadable with ``from_pretrained``,
  tokenizer included, and ``metrics.jsonl`` (``step``, ``loss``); an eval's ``metrics.json``
  (``accuracy``; ``exact_match`` and ``f1`` in percent) and KorQuAD's ``predictions.json`` as
  ``{question_id: answer_text}``;
- ``artifacts list`` / ``show REF`` (the lineage tree) / ``verify REF`` (non-zero exit on any mismatch).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import re
import uuid
from pathlib import Path

import pytest

from kolectra.core import storage
from kolectra.pipeline.cli import main
from kolectra.pipeline.run import SAMPLE
from kolectra.pipeline.store.factory import open_store
from tests.s3_support import s3_endpoint  # noqa: F401  (the session's moto server, for the bucket root)

KINDS = ("corpus", "vocab", "examples", "checkpoint", "eval")
MANIFEST_FIELDS = {"schema": str, "kind": str, "name": str, "id": str, "parents": list, "config": dict,
                   "files": list, "digest": str, "stats": dict, "provenance": dict}
PROVENANCE = {"kolectra", "libraries", "git_commit", "host", "started", "finished"}
COMPUTE = {"parameters", "flops", "wall_seconds", "device"}


def _cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:  # --help, argparse's refusals
            code = e.code
    return code or 0, out.getvalue(), err.getvalue()


def _input(folder: Path) -> Path:
    """300 reviews as JSON lines with other field names, and one line that is no JSON (a reject)."""
    with gzip.open(SAMPLE / "reviews.jsonl.gz", "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line, _ in zip(f, range(300))]
    lines = [json.dumps({"doc_id": f"d{i}", "body": t}, ensure_ascii=False) for i, t in enumerate(texts)]
    lines.insert(5, "{not json")
    path = folder / "docs.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module", params=["disk", "bucket"])
def chain(request, tmp_path_factory):
    """The chain through the CLI, one command a stage: (root, {stage: (exit, stdout, stderr)}, input)."""
    tmp = tmp_path_factory.mktemp(f"contract-{request.param}")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("KOLECTRA_CACHE", str(tmp / "cache"))
        if request.param == "disk":
            root = str(tmp / "home")
            env.setenv("KOLECTRA_HOME", root)  # the default root: no --out below
            out = []
        else:
            request.getfixturevalue("s3_endpoint")
            name = f"kolectra-{uuid.uuid4().hex[:12]}"
            fs, _ = storage.filesystem(f"s3://{name}")
            fs.mkdir(name)
            root = f"s3://{name}/k"
            env.delenv("KOLECTRA_HOME", raising=False)
            out = ["--out", root]
        source = _input(tmp)
        runs = {}

        def stage(key: str, argv: list[str]) -> str:
            runs[key] = _cli([*argv, *out])
            assert runs[key][0] == 0, runs[key][2][-3000:]
            return runs[key][1].strip().splitlines()[-1]

        corpus = stage("corpus", ["corpus", "--input", str(source), "--format", "jsonl", "--text-field", "body",
                                  "--id-field", "doc_id"])
        vocab = stage("vocab", ["vocab", "--corpus", corpus, "--vocab-size", "2000", "--set", "report_baseline=false"])
        examples = stage("examples", ["examples", "--corpus", corpus.rsplit("-", 1)[1], "--vocab", vocab,
                                      "--max-seq-length", "64"])
        ckpt = stage("checkpoint", ["pretrain", "--examples", examples, "--preset", "tiny", "--objective", "electra",
                                    "--device", "cpu", "--steps", "4", "--save-every", "2",
                                    "--set", "train.batch_size=4", "--set", "train.log_every=2"])
        stage("nsmc", ["finetune", "nsmc", "--model", ckpt, "--train", str(SAMPLE / "nsmc_train.txt"),
                       "--test", str(SAMPLE / "nsmc_test.txt"), "--set", "max_train_examples=16",
                       "--set", "max_eval_examples=16", "--epochs", "1", "--name", "nsmc"])
        stage("korquad", ["finetune", "korquad", "--model", ckpt.rsplit("-", 1)[1],
                          "--train", str(SAMPLE / "korquad_train.json"), "--dev", str(SAMPLE / "korquad_dev.json"),
                          "--max-train-examples", "4", "--epochs", "1", "--name", "korquad"])
        yield root, runs, out
        storage.reset()


def _last(runs, key) -> str:
    return runs[key][1].strip().splitlines()[-1]


def _manifest(where: str) -> dict:
    return json.loads(storage.read_bytes(f"{where}/manifest.json"))


def _json(where: str, rel: str):
    return json.loads(storage.read_bytes(f"{where}/{rel}"))


KIND_OF = {"corpus": "corpus", "vocab": "vocab", "examples": "examples", "checkpoint": "checkpoint",
           "nsmc": "eval", "korquad": "eval"}
PARENTS = {"corpus": [], "vocab": ["corpus"], "examples": ["corpus", "vocab"], "checkpoint": ["examples"],
           "nsmc": ["checkpoint"], "korquad": ["checkpoint"]}


def test_each_stage_prints_its_artifact_last_as_root_kind_name_id_with_a_whole_manifest(chain):
    root, runs, _ = chain
    ids = {}
    for key, kind in KIND_OF.items():
        where = _last(runs, key)
        parent, _, folder = where.rpartition("/")
        assert parent == f"{root}/{kind}", where
        m = _manifest(where)
        ids[key] = m["id"]
        for field, typ in MANIFEST_FIELDS.items():
            assert isinstance(m.get(field), typ), f"{where}: manifest.json's {field!r} is {m.get(field)!r}"
        assert m["kind"] == kind and folder == f"{m['name']}-{m['id']}" and re.fullmatch(r"[0-9a-f]{16}", m["id"])
        assert m["parents"] == [ids[p] for p in PARENTS[key]], (key, m["parents"])
        assert PROVENANCE <= set(m["provenance"]) and m["provenance"]["started"] <= m["provenance"]["finished"]
        assert isinstance(m["provenance"]["libraries"], dict) and m["provenance"]["libraries"]
        if kind in ("checkpoint", "eval"):
            assert COMPUTE <= set(m.get("compute", {})), (key, m.get("compute"))
            assert m["compute"]["parameters"] > 0 and m["compute"]["flops"] > 0 and m["compute"]["wall_seconds"] > 0
        # files: each path, bytes and sha256, as they are; every file of the folder listed, the manifest aside
        found = storage.listing(where)
        assert {f["path"] for f in m["files"]} == set(found) - {"manifest.json"}, key
        for f in m["files"]:
            data = storage.read_bytes(f"{where}/{f['path']}")
            assert (len(data), hashlib.sha256(data).hexdigest()) == (f["bytes"], f["sha256"]), f["path"]


def test_the_same_request_finds_the_same_artifact_and_another_gets_another_id(chain):
    root, runs, out = chain
    corpus = _last(runs, "corpus")
    code, again, err = _cli(["vocab", "--corpus", corpus, "--vocab-size", "2000", "--set", "report_baseline=false",
                             *out])
    assert code == 0 and again.strip().splitlines()[-1] == _last(runs, "vocab"), err[-2000:]
    code, other, err = _cli(["vocab", "--corpus", corpus, "--vocab-size", "2100", "--set", "report_baseline=false",
                             *out])
    assert code == 0, err[-2000:]
    made = other.strip().splitlines()[-1]
    assert made != _last(runs, "vocab") and made.startswith(f"{root}/vocab/")
    assert _manifest(made)["parents"] == _manifest(_last(runs, "vocab"))["parents"]


def test_the_stage_files_others_read(chain):
    _, runs, _ = chain
    corpus = _last(runs, "corpus")
    s = _json(corpus, "stats.json")
    assert s["records_in"] == s["records_out"] + s["rejected"] + sum(s["dropped"].values()) == 301
    assert s["rejected"] == 1 and all(isinstance(n, int) for n in s["dropped"].values())
    rejects = [json.loads(line) for rel in storage.listing(f"{corpus}/rejects")
               for line in storage.read_bytes(f"{corpus}/rejects/{rel}").decode().splitlines() if line]
    assert len(rejects) == 1 and rejects[0]["source"] == "docs.jsonl" and rejects[0]["reason"]
    assert rejects[0]["line"] == 6  # the 6th line of the file, 1-based

    vocab = storage.listing(_last(runs, "vocab"))
    assert {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt", "report.json"} <= set(vocab)

    ex = _json(_last(runs, "examples"), "stats.json")
    assert isinstance(ex["examples"], int) and ex["examples"] > 0 and isinstance(ex["tokens"], int) and ex["tokens"] > 0

    ckpt = _last(runs, "checkpoint")
    logged = [json.loads(line) for line in storage.read_bytes(f"{ckpt}/metrics.jsonl").decode().splitlines()]
    assert [r["step"] for r in logged] == [2, 4] and all(isinstance(r["loss"], float) for r in logged)

    nsmc = _json(_last(runs, "nsmc"), "metrics.json")
    assert 0.0 <= nsmc["accuracy"] <= 1.0
    kq = _last(runs, "korquad")
    metrics = _json(kq, "metrics.json")
    assert 0.0 <= metrics["exact_match"] <= 100.0 and 0.0 <= metrics["f1"] <= 100.0
    predictions = _json(kq, "predictions.json")
    dev = json.loads((SAMPLE / "korquad_dev.json").read_text(encoding="utf-8"))
    asked = {qa["id"] for article in dev["data"] for p in article["paragraphs"] for qa in p["qas"]}
    assert set(predictions) == asked and all(isinstance(a, str) for a in predictions.values())


def test_the_checkpoint_s_models_load_with_from_pretrained_tokenizer_included(chain):
    transformers = pytest.importorskip("transformers")
    root, runs, _ = chain
    store = open_store(root)
    art = store.resolve(_last(runs, "checkpoint"))
    here = store.local(art)
    for part, head in (("discriminator", "ElectraForPreTraining"), ("generator", "ElectraForMaskedLM")):
        model = getattr(transformers, head).from_pretrained(here / "hf" / part)
        tokenizer = transformers.AutoTokenizer.from_pretrained(here / "hf" / part)
        ids = tokenizer("영화가 정말 재밌어요", return_tensors="pt")["input_ids"]
        assert model(input_ids=ids).logits.shape[:2] == ids.shape


def test_artifacts_list_show_and_verify_and_verify_exits_non_zero_on_a_mismatch(chain):
    root, runs, out = chain
    code, listed, _ = _cli(["artifacts", "list", *out])
    assert code == 0 and all(_last(runs, k).rpartition("/")[2] in listed for k in KIND_OF)
    kq = _last(runs, "korquad")
    code, shown, _ = _cli(["artifacts", "show", kq.rpartition("-")[2], *out])
    tree = shown[shown.index("lineage"):]
    assert code == 0 and all(f"{KIND_OF[k]}/{_last(runs, k).rpartition('/')[2]}" in tree
                             for k in ("checkpoint", "examples", "corpus", "vocab", "korquad"))
    assert _cli(["artifacts", "verify", kq, *out])[0] == 0
    assert _cli(["artifacts", "verify", "--lineage", kq.rpartition("-")[2], *out])[0] == 0
    # a changed file of an examples artifact built for this test alone (the chain's stay whole)
    code, made, err = _cli(["examples", "--corpus", _last(runs, "corpus"), "--vocab", _last(runs, "vocab"),
                            "--max-seq-length", "32", *out])
    assert code == 0, err[-2000:]
    victim = made.strip().splitlines()[-1]
    storage.write_bytes(f"{victim}/stats.json", b"{}")
    code, said, _ = _cli(["artifacts", "verify", victim, *out])
    assert code != 0 and "stats.json" in said
    assert _cli(["artifacts", "verify", "--quick", victim.rpartition("-")[2], *out])[0] != 0


@pytest.mark.parametrize("argv", [[], ["corpus"], ["vocab"], ["examples"], ["pretrain"], ["finetune", "nsmc"],
                                  ["finetune", "korquad"], ["run"], ["artifacts", "list"], ["artifacts", "show"],
                                  ["artifacts", "verify"]])
def test_help_works_everywhere(argv):
    code, shown, _ = _cli([*argv, "--help"])
    assert code == 0 and shown.startswith("usage: kolectra")
    for option in {"corpus": ["--input", "--format", "--text-field", "--id-field"], "vocab": ["--corpus", "--vocab-size"],
                   "examples": ["--corpus", "--vocab", "--max-seq-length"],
                   "pretrain": ["--examples", "--preset", "--objective", "--device", "--steps", "--save-every",
                                "--resume"]}.get(argv[0] if argv else "", []):
        assert option in shown, (argv, option)
    if argv[:1] in (["corpus"], ["vocab"], ["examples"], ["pretrain"], ["finetune"]):
        for common in ("--out", "--set", "--name", "--seed", "--force"):
            assert common in shown, (argv, common)
