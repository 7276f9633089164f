"""The whole chain, through the same code as ``kolectra run``, on a tiny config.

Corpus (Beam + Kiwi) -> vocab -> examples -> pretrain -> NSMC and KorQuAD fine-tuning, every
stage a real artifact. Then: a rerun reuses every artifact, ``artifacts verify`` passes, a
tampered parent is refused naming the file, and a local Hugging Face directory works as a model.
"""

import json
import shutil
import time
from pathlib import Path

import pytest

from kolectra.pipeline import stages
from kolectra.pipeline.cli import main
from kolectra.pipeline.run import SAMPLE, run_sample
from kolectra.pipeline.store.artifacts import ArtifactError
from tests.sample_chain_support import TINY, copy_of_the_chain


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """(store, the KorQuAD eval run_sample returned, the build's seconds): this module's copy of the chain
    (tests/sample_chain_support.py: built once a test process, tests/test_store_s3.py reads it too)."""
    store, built = copy_of_the_chain(tmp_path_factory, tmp_path_factory.mktemp("artifacts") / "root")
    RUN_OUTPUT.update(out=built.out, err=built.err)
    return store, store.resolve(built.korquad_id), built.seconds


RUN_OUTPUT: dict[str, str] = {}


def test_chain_produces_linked_verified_artifacts(chain):
    store, korquad, _ = chain
    arts = {a.kind: a for a in store.list()}
    assert set(arts) == {"corpus", "vocab", "examples", "checkpoint", "eval"}
    for art in store.list():
        assert store.verify(art) == [], art.path
    # lineage: eval -> checkpoint -> examples -> (corpus, vocab -> corpus) -> raw sample file
    ckpt = store.resolve(korquad.parents[0])
    assert ckpt.kind == "checkpoint"
    ex = store.resolve(ckpt.parents[0])
    assert {store.resolve(p).kind for p in ex.parents} == {"corpus", "vocab"}
    lines = "\n".join(store.lineage_lines(korquad))
    assert str(SAMPLE / "reviews.jsonl.gz") in lines

    corpus_stats = json.loads((arts["corpus"].path / "stats.json").read_text())
    assert corpus_stats["records_in"] == (corpus_stats["records_out"] + corpus_stats["rejected"]
                                          + sum(corpus_stats["dropped"].values()))
    assert (arts["vocab"].path / "tokenizer.json").is_file()
    assert json.loads((arts["examples"].path / "stats.json").read_text())["examples"] > 0
    for sub in ("discriminator", "generator"):
        assert (ckpt.path / "hf" / sub / "config.json").is_file()
    steps = [json.loads(l) for l in (ckpt.path / "metrics.jsonl").read_text().splitlines()]
    assert steps and all("step" in s and "loss" in s for s in steps)
    metrics = json.loads((korquad.path / "metrics.json").read_text())
    assert 0.0 <= metrics["exact_match"] <= 100.0 and 0.0 <= metrics["f1"] <= 100.0
    assert json.loads((korquad.path / "predictions.json").read_text())
    nsmc = [a for a in store.list("eval") if a.name == "sample-nsmc"][0]
    assert 0.0 <= json.loads((nsmc.path / "metrics.json").read_text())["accuracy"] <= 1.0


def test_run_names_its_evals_apart_and_its_summary_lists_every_warning(chain, capsys):
    store, korquad, _ = chain
    assert korquad.name == "sample-korquad"
    # the two demo evals in one table (both named "sample" before: refused as the same column)
    assert main(["report", "sample-nsmc", "sample-korquad", "--out", str(store.root)]) == 0
    table = capsys.readouterr().out
    assert "sample-nsmc (acc)" in table and "sample-korquad (EM / F1)" in table
    # each score says what it was measured on: the first 32 of the test file's 500 rows (max_eval_examples)
    nsmc_cell = [ln for ln in table.splitlines() if ln.startswith("| checkpoint/")][0].split(" | ")[1]
    assert "(32 of 500 test rows" in nsmc_cell and "12 dev questions" in table
    # the cell says "learned nothing" exactly when the eval's health says so, whichever way the 12 steps went
    # (checked only when it did not learn, a cell saying it of a model that learned passed)
    nsmc = store.resolve("sample-nsmc")
    learned_nothing = json.loads((nsmc.path / "metrics.json").read_text())["health"]["status"] == "not_learning"
    assert ("learned nothing" in nsmc_cell) == learned_nothing, (learned_nothing, nsmc_cell)
    ckpt = store.resolve(korquad.parents[0])
    # the demo's 12 steps cannot teach the tiny model: its warning says so in the demo's terms, naming no
    # setting the user would have to change; the summary repeats it (the progress line scrolls away)
    assert ckpt.manifest["stats"]["health"]["status"] == "not_learning"
    # a warning may be lifted by a "learning now" line and given again (the verdict is re-read at every
    # logged step); every warning speaks in the demo's terms, and the run ends warned, not recovered
    health_lines = [ln for ln in RUN_OUTPUT["err"].splitlines() if "pretrain: WARNING" in ln or "pretrain: learning now" in ln]
    warning = [ln for ln in health_lines if "pretrain: WARNING" in ln]
    assert warning and "pretrain: WARNING" in health_lines[-1]
    for line in warning:
        assert "Expected here: the demo trains the tiny preset for 12 steps" in line
        assert "dropout" not in line and "Likely causes" not in line
    summary = RUN_OUTPUT["out"]
    assert "== warnings: " in summary
    section = summary.split("== warnings: ")[1].split("\n\n")[0]
    assert f"checkpoint {ckpt.name}: the discriminator" in section or f"checkpoint {ckpt.name}: the generator" in section
    assert "expected for the demo's tiny pretraining budget" in section
    # KorQuAD on that model learns nothing either, and says so (its F1 on 12 questions once passed as
    # ok with every answer wrong): its line in the summary says why
    assert korquad.manifest["stats"]["health"]["status"] == "not_learning"
    assert f"eval {korquad.name}: " in section and "(follows from the untrained demo model)" in section
    # the vocab stage's passes take under a second here: one closing line each, not ten (45 lines before)
    assert sum("vocab" in ln for ln in RUN_OUTPUT["err"].splitlines()) <= 15
    # the model card still names the likely causes: it describes the model, not the demo
    assert "Likely causes" in (ckpt.path / "hf" / "discriminator" / "README.md").read_text()


def test_same_request_reuses_every_artifact(chain, capsys):
    store, korquad, first = chain
    before = {a.path: a.manifest["provenance"]["finished"] for a in store.list()}
    t0 = time.perf_counter()
    again = run_sample(store, sets=TINY)
    times = capsys.readouterr().out.split("== wall time")[1].split("\n\n")[0].splitlines()[1:]
    assert len(times) == 6 and all("reused" in line for line in times)  # the summary says whose time is no build
    assert again.path == korquad.path
    after = {a.path: a.manifest["provenance"]["finished"] for a in store.list()}
    assert after == before  # nothing rebuilt
    assert time.perf_counter() - t0 < first


def test_cli_stage_commands_print_the_artifact_last(chain, capsys):
    store, korquad, _ = chain
    corpus = store.list("corpus")[0]
    assert main(["vocab", "--corpus", corpus.id, "--out", str(store.root)] + _sets(TINY["vocab"])) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(store.list("vocab")[0].path)
    assert main(["artifacts", "verify", korquad.id, "--out", str(store.root)]) == 0
    # an unknown config key is an error, not a silently ignored setting
    assert main(["vocab", "--corpus", corpus.id, "--out", str(store.root), "--set", "vocab_sise=10"]) == 2
    assert "vocab_sise" in capsys.readouterr().err


def test_local_hf_directory_works_as_a_model(chain, capsys, tmp_path):
    store, _, _ = chain
    ckpt = store.list("checkpoint")[0]
    hf_dir = shutil.copytree(ckpt.path / "hf" / "discriminator", tmp_path / "downloaded" / "discriminator")
    argv = ["finetune", "nsmc", "--model", str(hf_dir), "--train", str(SAMPLE / "nsmc_train.txt"),
            "--test", str(SAMPLE / "nsmc_test.txt"), "--preset", "sample", "--name", "fromdir",
            "--out", str(store.root)] + _sets(TINY["nsmc"])
    assert main(argv) == 0
    out = Path(capsys.readouterr().out.strip().splitlines()[-1])
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["parents"] == [] and manifest["inputs"][0]["path"] == str(hf_dir.resolve())
    # the checkpoint artifact's own hf/discriminator folder is that artifact: its lineage kept, the
    # request of --model NAME (it was a raw folder: no parent, another id)
    model_dir, parents, inputs = stages.resolve_model(store, str(ckpt.path / "hf" / "discriminator"))
    assert [a.id for a in parents] == [ckpt.id] and inputs == ()
    assert model_dir == stages.resolve_model(store, ckpt.id)[0]


def test_tampered_parent_is_refused_naming_the_file(chain):
    store, _, _ = chain
    corpus = store.list("corpus")[0]
    shard = sorted((corpus.path / "data").glob("train-*"))[0]
    original = shard.read_bytes()
    try:
        shard.write_bytes(original + b"x")
        with pytest.raises(ArtifactError, match=shard.name):
            stages.vocab(store, corpus.id, sets=TINY["vocab"], force=True)
    finally:
        shard.write_bytes(original)


def _sets(assignments):
    return [x for a in assignments for x in ("--set", a)]


def test_report_renders_the_whole_lineage_with_plots(chain, tmp_path, capsys):
    store, korquad, _ = chain
    ckpt = store.list("checkpoint")[0]
    nsmc = [a for a in store.list("eval") if a.manifest["config"].get("task") == "nsmc" and a.parents == [ckpt.id]][0]
    assert main(["report", nsmc.id, "--out", str(store.root), "--dest", str(tmp_path / "rep")]) == 0
    md_path = Path(capsys.readouterr().out.strip().splitlines()[-1])
    md = md_path.read_text()
    for heading in ("## Lineage", "## corpus:", "## vocab:", "## examples:", "## checkpoint:", "## eval:"):
        assert heading in md
    assert "records in" in md and "tokens_per_eojeol" in md
    pngs = sorted(md_path.parent.glob("*.png"))
    assert any("funnel" in p.name for p in pngs) and any(ckpt.path.name in p.name for p in pngs)
    for p in pngs:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"]({p.name})" in md


def test_seeds_give_one_artifact_each_and_a_median_summary(chain, capsys):
    store, _, _ = chain
    ckpt = store.list("checkpoint")[0]
    argv = ["finetune", "nsmc", "--model", ckpt.id, "--train", str(SAMPLE / "nsmc_train.txt"),
            "--test", str(SAMPLE / "nsmc_test.txt"), "--preset", "sample", "--seeds", "1,2",
            "--out", str(store.root)] + _sets(TINY["nsmc"])
    assert main(argv) == 0
    summary = store.resolve(capsys.readouterr().out.strip().splitlines()[-1])
    per_seed = [store.resolve(p) for p in summary.parents]
    assert [a.manifest["config"]["seed"] for a in per_seed] == [1, 2]
    accs = sorted(json.loads((a.path / "metrics.json").read_text())["accuracy"] for a in per_seed)
    metrics = json.loads((summary.path / "metrics.json").read_text())
    assert metrics["accuracy"] == pytest.approx(sum(accs) / 2)  # median of two
    assert metrics["accuracy_spread"] == pytest.approx(accs[1] - accs[0])
    assert (summary.path / "seeds.json").is_file()


def test_study_compares_arms_against_a_floor_with_intervals_and_reuses_points(chain, capsys):
    store, _, _ = chain
    ex = store.list("examples")[0]
    argv = ["study", "--examples", ex.id, "--arms", "electra,electra-gdes", "--preset", "tiny",
            "--pretrain-seeds", "2", "--finetune-seeds", "1", "--readouts", "probe,lowdata",
            "--dev-rows", "200", "--probe-rows", "200", "--lowdata-rows", "100",
            "--nsmc-train", str(SAMPLE / "nsmc_train.txt"), "--out", str(store.root),
            "--set", "train.batch_size=4"] + [x for a in ("max_length=32", "epochs=1", "batch_size=16")
                                              for x in ("--finetune-set", a)]
    small = ["--set", "model.hidden=32", "--set", "model.intermediate=64", "--set", "model.embedding_size=32",
             "--set", "model.generator_hidden=16", "--set", "model.generator_intermediate=32"]
    # 7.5e8 FLOPs = 10 steps of the small model here (1.5e9 = 20 trained twice as long: nothing below needs them)
    assert main(argv + small + ["--points", "1", "--flops", "7.5e8"]) == 0
    capsys.readouterr()
    study = store.list("study")[0]
    doc = json.loads((study.path / "study.json").read_text())
    # the floor: the untrained model, read out the same way, one score per (init seed, readout seed)
    assert set(doc["floor"]) == {"probe", "lowdata"} and all(len(v) == 2 for v in doc["floor"].values())
    points = doc["points"]
    assert sorted((p["objective"], p["flops"], p["pretrain_seed"]) for p in points) == sorted(
        (a, 7.5e8, s) for a in ("electra", "electra-gdes") for s in (1, 2))
    for p in points:
        assert set(p["readouts"]) == {"probe", "lowdata"} and all(len(v) == 1 for v in p["readouts"].values())
        assert all(0.0 <= x <= 1.0 for v in p["readouts"].values() for x in v)
        assert {"disc_auc", "replaced_share", "gen_acc", "status"} <= set(p["health"])
        # each readout's own verdict (a probe records none), so one that learned nothing is flagged
        assert set(p["readout_health"]["probe"]) <= {"ok", "not_learning"} and set(p["readout_health"]["lowdata"]) <= {"ok", "not_learning", "unchecked"}
    cmps = doc["comparisons"]
    pairs = {(c["a"], c["b"], c["flops"], c["readout"]) for c in cmps}
    assert ("electra", "electra-gdes", 7.5e8, "probe") in pairs and ("electra-gdes", "floor", 7.5e8, "lowdata") in pairs
    for c in cmps:
        lo, hi = c["ci95"]
        assert lo <= c["diff"] <= hi
        assert c["rows_resampled"]  # per-row predictions (probe and NSMC): evaluation rows resampled too
        if c["b"] != "floor":
            assert c["verdict"].startswith(("no winner", "electra"))
    held = doc["holdout"]
    assert held["dev_rows"] > 0 and "dev_rows_in_pretraining_corpus" in held
    # the sample repeats a few reviews: each text stays on one side, none scored is trained on (study 9)
    assert doc["split"]["repeated_rows"] > 0 and doc["split"]["dev_texts_in_training_rows"] == 0
    assert (study.path / "probe_vs_flops.png").read_bytes()[:4] == b"\x89PNG"
    assert (study.path / "disc_auc.png").read_bytes()[:4] == b"\x89PNG"  # the arms' logs, read a line at a time
    report_md = (study.path / "report.md").read_text()
    assert "floor" in report_md and "95 %" in report_md
    assert "no held-out text is among the readouts' training rows" in report_md
    assert main(["report", study.id, "--out", str(store.root)]) == 0
    md = Path(capsys.readouterr().out.strip().splitlines()[-1]).read_text()
    assert "Equal-FLOPs study" in md
    # twice the budget on a two-point grid: the shared points (and the floor) are reused, not retrained
    argv[argv.index("electra,electra-gdes")] = "electra"
    n_checkpoints = len(store.list("checkpoint"))
    assert main(argv + small + ["--points", "2", "--flops", "1.5e9"]) == 0
    bigger = [s for s in store.list("study") if s.id != study.id][0]
    old = {(p["objective"], p["flops"], p["pretrain_seed"]): p["checkpoint"] for p in points}
    new = {(p["objective"], p["flops"], p["pretrain_seed"]): p["checkpoint"]
           for p in json.loads((bigger.path / "study.json").read_text())["points"]}
    assert new[("electra", 7.5e8, 1)] == old[("electra", 7.5e8, 1)] and new[("electra", 7.5e8, 2)] == old[("electra", 7.5e8, 2)]
    assert len(store.list("checkpoint")) == n_checkpoints + 2  # only the 1.5e9 points of the two seeds


def test_model_cards_carry_the_lineage(chain):
    store, _, _ = chain
    ckpt = store.list("checkpoint")[0]
    ex = store.resolve(ckpt.parents[0])
    for sub in ("discriminator", "generator"):
        card = (ckpt.path / "hf" / sub / "README.md").read_text()
        assert "## Lineage" in card and ckpt.path.name in card and ex.path.name in card
