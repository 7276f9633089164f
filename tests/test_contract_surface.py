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
import functools
import gzip
import hashlib
import io
import json
import re
import subprocess
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
    """300 reviews as JSON lines with other field names, one line that is no JSON (a reject) and one review
    again under another id (a duplicate)."""
    with gzip.open(SAMPLE / "reviews.jsonl.gz", "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line, _ in zip(f, range(300))]
    lines = [json.dumps({"doc_id": f"d{i}", "body": t}, ensure_ascii=False) for i, t in enumerate(texts)]
    lines.insert(5, "{not json")
    longest = max(texts, key=len)  # the same text under another id: a duplicate, dropped and counted
    lines.append(json.dumps({"doc_id": "again", "body": longest}, ensure_ascii=False))
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


# what each stage's command asked for, as the manifest's resolved ``config`` must say it
ASKED = {"corpus": {"format": "jsonl", "text_field": "body", "id_field": "doc_id"},
         "vocab": {"vocab_size": 2000, "report_baseline": False},
         "examples": {"max_seq_length": 64},
         "checkpoint": {"preset": "tiny", "objective.objective": "electra", "train.device": "cpu", "train.steps": 4,
                        "train.save_every": 2, "train.batch_size": 4, "train.log_every": 2},
         "nsmc": {"task": "nsmc", "max_train_examples": 16, "max_eval_examples": 16, "epochs": 1},
         "korquad": {"task": "korquad", "max_train_examples": 4, "epochs": 1}}


def _at(config: dict, dotted: str):
    for part in dotted.split("."):
        config = config.get(part, {}) if isinstance(config, dict) else {}
    return config


def _breaks(key: str, where: str, m: dict, ids: dict) -> list[str]:
    """The manifest fields of ``where`` (the artifact of ``key``'s command) that do not hold the contract,
    each by what it should be: not only there and typed, but meaning what the contract says."""
    import datetime as dt
    import socket

    from kolectra.pipeline.store import manifest as written

    kind, broken = KIND_OF[key], []

    def need(field: str, ok) -> None:
        try:
            held = bool(ok())
        except (KeyError, TypeError, ValueError, AttributeError):
            held = False
        if not held:
            broken.append(field)

    for field, typ in MANIFEST_FIELDS.items():
        need(field, lambda: isinstance(m[field], typ))
    parent, _, folder = where.rpartition("/")
    need("schema", lambda: m["schema"] == written.SCHEMA)
    need("kind", lambda: m["kind"] == kind and parent.endswith(f"/{kind}"))
    need("name", lambda: m["name"] and folder == f"{m['name']}-{m['id']}")
    need("id", lambda: re.fullmatch(r"[0-9a-f]{16}", m["id"]) and folder.endswith(f"-{m['id']}"))
    need("parents", lambda: m["parents"] == [ids[p] for p in PARENTS[key]])
    need("config", lambda: all(_at(m["config"], k) == v for k, v in ASKED[key].items()))
    # files: each path, bytes and sha256, as they are; every file of the folder listed, the manifest aside
    need("files", lambda: {f["path"] for f in m["files"]} == set(_listing(where)) - {"manifest.json"})
    for f in m["files"] if isinstance(m.get("files"), list) else []:
        need("files", lambda f=f: _sized_hash(where, f["path"]) == (f["bytes"], f["sha256"]))
    # digest: over the files, so one file's other content is another digest
    need("digest", lambda: re.fullmatch(r"[0-9a-f]{64}", m["digest"]) and m["digest"] == written.digest(m["files"])
         and written.digest([{**m["files"][0], "sha256": "0" * 64}, *m["files"][1:]]) != m["digest"])
    need("stats", lambda: m["stats"])
    need("provenance", lambda: PROVENANCE <= set(m["provenance"]))
    p = m.get("provenance", {})
    need("provenance.kolectra", lambda: p["kolectra"] == written.kolectra_version())
    need("provenance.libraries", lambda: p["libraries"] and all(isinstance(n, str) and isinstance(v, str)
                                                                 for n, v in p["libraries"].items()))
    # the commit when known: this checkout's (a wheel's install has none, and then says null); HEAD or one
    # before it, as commits may land while the chain runs
    need("provenance.git_commit", lambda: p["git_commit"] is None if written._git_commit() is None else (
        re.fullmatch(r"[0-9a-f]{40}", p["git_commit"]) and subprocess.run(
            ["git", "-C", str(Path(written.__file__).parent), "merge-base", "--is-ancestor", p["git_commit"], "HEAD"],
            capture_output=True, timeout=30).returncode == 0))
    # whether kolectra's code in that checkout differed from the commit: null exactly where there is no commit
    need("provenance.git_dirty", lambda: p["git_dirty"] is None if p["git_commit"] is None
         else isinstance(p["git_dirty"], bool))
    need("provenance.host", lambda: p["host"] == socket.gethostname())
    now = dt.datetime.now(dt.timezone.utc)
    need("provenance.started", lambda: now - dt.timedelta(days=1) < dt.datetime.fromisoformat(p["started"]) <= now)
    need("provenance.finished", lambda: dt.datetime.fromisoformat(p["started"])
         <= dt.datetime.fromisoformat(p["finished"]) <= now)
    if kind in ("checkpoint", "eval"):
        need("compute", lambda: COMPUTE <= set(m["compute"]))
        c = m.get("compute", {})
        need("compute.parameters", lambda: isinstance(c["parameters"], int) and c["parameters"] > 0)
        need("compute.flops", lambda: c["flops"] > 0)
        need("compute.wall_seconds", lambda: 0 < c["wall_seconds"] < 86400)
        need("compute.device", lambda: c["device"].split()[0] == "cpu")  # the chain runs on the CPU
    return sorted(set(broken))


@functools.lru_cache(maxsize=None)
def _listing(where: str) -> tuple[str, ...]:
    return tuple(storage.listing(where))


@functools.lru_cache(maxsize=None)
def _sized_hash(where: str, path: str) -> tuple[int, str]:
    """A file's bytes and sha256, read once: the check runs on each manifest many times below."""
    data = storage.read_bytes(f"{where}/{path}")
    return len(data), hashlib.sha256(data).hexdigest()


def _manifests(root: str, runs: dict) -> list[tuple[str, str, dict, dict]]:
    out, ids = [], {}
    for key in KIND_OF:
        where = _last(runs, key)
        m = _manifest(where)
        out.append((key, where, m, dict(ids)))
        ids[key] = m.get("id")
    return out


def test_each_stage_prints_its_artifact_last_as_root_kind_name_id_with_a_whole_manifest(chain):
    root, runs, _ = chain
    for key, where, m, ids in _manifests(root, runs):
        assert where.rpartition("/")[0] == f"{root}/{KIND_OF[key]}", where
        assert _breaks(key, where, m, ids) == [], (where, json.dumps(m, indent=1)[:3000])


def _drop(field):
    def edit(m):
        head, _, leaf = field.partition(".")
        (m[head].pop(leaf) if leaf else m.pop(head))
    return edit


def _put(field, value):
    def edit(m):
        head, _, leaf = field.partition(".")
        if leaf:
            m[head][leaf] = value
        else:
            m[head] = value
    return edit


# each way a writer could break a field the contract names: the check above must say which
BREAKS = [("schema", _put("schema", 1)), ("kind", _put("kind", "checkpoints")), ("name", _put("name", "other")),
          ("id", _put("id", "0" * 16)), ("parents", lambda m: m["parents"].append("0" * 16)), ("config", _put("config", {})),
          ("config", lambda m: m["config"].update(preset="base", task="x", vocab_size=1, max_seq_length=1,
                                                  format="text")),
          ("files", lambda m: m["files"].pop()), ("files", lambda m: m["files"][0].update(bytes=-1)),
          ("files", lambda m: m["files"][0].update(sha256="0" * 64)),
          ("digest", _put("digest", "")), ("digest", _put("digest", hashlib.sha256(b"").hexdigest())),
          ("stats", _put("stats", {})), ("stats", _drop("stats")),
          ("provenance", _put("provenance", {})), ("provenance.kolectra", _put("provenance.kolectra", "0+unknown")),
          ("provenance.libraries", _put("provenance.libraries", {})),
          ("provenance.git_commit", _put("provenance.git_commit", "0" * 40)),
          ("provenance.host", _put("provenance.host", "")), ("provenance.started", _put("provenance.started", "")),
          ("provenance.started", _put("provenance.started", "2001-01-01T00:00:00+00:00")),
          ("provenance.finished", _put("provenance.finished", "2001-01-01T00:00:00+00:00")),
          ("compute.parameters", _put("compute.parameters", 0)), ("compute.flops", _drop("compute.flops")),
          ("compute.wall_seconds", _put("compute.wall_seconds", 0)),
          ("compute.device", _put("compute.device", "cuda (NVIDIA H200)"))]


@pytest.mark.parametrize("field, edit", BREAKS, ids=[f"{f}-{n}" for n, (f, _) in enumerate(BREAKS)])
def test_the_manifest_check_names_each_field_a_writer_broke(chain, field, edit):
    """A check that cannot fail guards nothing: each field broken the way a writer could break it (gone,
    empty, another type, a value that means something else) is named by :func:`_breaks`."""
    import copy

    root, runs, _ = chain
    for key, where, m, ids in _manifests(root, runs):
        if field.startswith("compute") and "compute" not in m:
            continue
        broken = copy.deepcopy(m)
        edit(broken)
        assert field in _breaks(key, where, broken, ids), (key, field)


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
    assert s["records_in"] == s["records_out"] + s["rejected"] + sum(s["dropped"].values()) == 302
    assert s["dropped"]["duplicate"] == 1  # duplicates included
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
    # in percent, and of these predictions: a fraction (0.3 for 30 %) passed the range above
    from kolectra.finetune.korquad_metric import evaluate

    gold = {qa["id"]: [a["text"] for a in qa["answers"]] for article in dev["data"] for p in article["paragraphs"]
            for qa in p["qas"]}
    scored = evaluate(gold, predictions)
    assert scored["f1"] > 1.0, scored  # some characters shared, or percent and fraction look alike
    for field in ("exact_match", "f1"):
        assert metrics[field] == pytest.approx(scored[field], abs=1e-3), field


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


def test_the_id_is_a_hash_of_each_thing_the_contract_says_was_asked_for(tmp_path, monkeypatch):
    """kind, stage version, resolved config, parent ids and the versions of the libraries that decide the
    output: each other is another id; the same request is the same id."""
    from kolectra.core.stage import StageOutput
    from kolectra.pipeline.store import request

    store = open_store(tmp_path)

    def produce(out: Path) -> StageOutput:
        (out / "stats.json").write_text("{}")
        return StageOutput(stats={"n": 1})

    corpora = [store.build(request.Request(kind="corpus", name="c", stage_version=1, config={"a": a}), produce)
               for a in (1, 2)]
    base = dict(kind="vocab", name="v", stage_version=3, config={"vocab_size": 8}, parents=(corpora[0],),
                libraries=("tokenizers",))
    plain = request.Request(**base).id()
    assert request.Request(**base).id() == plain and re.fullmatch(r"[0-9a-f]{16}", plain)
    for other in ({"kind": "examples"}, {"stage_version": 4}, {"config": {"vocab_size": 9}},
                  {"parents": (corpora[1],)}, {"libraries": ("tokenizers", "kiwipiepy")}):
        assert request.Request(**{**base, **other}).id() != plain, other
    assert request.Request(**{**base, "name": "w"}).id() == plain  # the name is no part of what was asked
    monkeypatch.setattr(request, "library_versions", lambda names: {n: "999.0" for n in names})
    assert request.Request(**base).id() != plain  # the same library at another version
