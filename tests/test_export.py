"""``kolectra export REF --to DIR [--push REPO_ID --dry-run]`` (issue 28): a checkpoint artifact's
discriminator as a Hub-ready folder — weights, tokenizer, a card whose metadata holds Hub ids only —
that ``transformers`` loads alone, and the one commit a push would make, checked offline. Where and how
the folder is written (refusals, failures midway, a bucket's ``--to``): tests/test_export_destination.py."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from kolectra.core.config import to_dict
from kolectra.model import presets, train
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.request import Request
from tests.export_support import checkpoint  # noqa: F401  (the fixture)
from tests.model_support import build_examples, build_tokenizer, small_chain
from tests.test_faults_pretrain import SETS


def _meta(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n")[1])


def test_export_writes_a_folder_transformers_loads_with_hub_metadata(checkpoint, tmp_path, capsys):
    from transformers import AutoModel, AutoTokenizer

    store, art = checkpoint
    dest = tmp_path / "out"
    assert main(["export", art.id, "--to", str(dest), "--out", str(store.root), "--dataset", "e9t/nsmc"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(dest)
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md"} <= {
        p.name for p in dest.iterdir()}
    model, tok = AutoModel.from_pretrained(str(dest)), AutoTokenizer.from_pretrained(str(dest))
    assert model.config.model_type == "electra" and tok.mask_token == "[MASK]"
    # text is data for a Hub user too (issue 43): "[MASK]" in text is not the mask, [CLS]/[SEP] still added
    ids = tok("[MASK] [SEP]")["input_ids"]
    assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id and ids.count(tok.sep_token_id) == 1
    assert tok.mask_token_id not in ids
    card = (dest / "README.md").read_text(encoding="utf-8")
    meta = _meta(card)
    # Hub ids only: the named dataset, never the local corpus artifact (which stays in the lineage)
    assert meta["datasets"] == ["e9t/nsmc"] and meta["language"] == "ko" and "base_model" not in meta
    assert "corpus/web-0123456789abcdef" in card.split("---\n", 2)[2]
    assert f"checkpoint artifact `checkpoint/{art.path.name}`" in card
    from huggingface_hub import ModelCard

    assert ModelCard.load(dest / "README.md").data.datasets == ["e9t/nsmc"]


def test_the_exported_generator_fills_masks_and_the_discriminator_keeps_text_as_data(checkpoint, tmp_path):
    """The generator's card says ``pipeline_tag: fill-mask``; with the vocabulary's split_special_tokens its
    tokenizer found no mask in any text ("No mask_token ([MASK]) found on the input")."""
    from transformers import AutoTokenizer, pipeline

    store, art = checkpoint
    gen, disc = tmp_path / "gen", tmp_path / "disc"
    assert main(["export", art.id, "--to", str(gen), "--out", str(store.root), "--role", "generator"]) == 0
    assert main(["export", art.id, "--to", str(disc), "--out", str(store.root)]) == 0
    assert _meta((gen / "README.md").read_text(encoding="utf-8"))["pipeline_tag"] == "fill-mask"
    filled = pipeline("fill-mask", model=str(gen))("나는 정말 [MASK] 봤다.", top_k=3)
    assert len(filled) == 3 and all(r["token"] not in (0, 4) for r in filled)
    tok = AutoTokenizer.from_pretrained(str(disc))
    assert tok.mask_token_id not in tok("나는 [MASK] 봤다.")["input_ids"]  # text is data for the encoder
    assert (gen / "README.md").read_text(encoding="utf-8").count("`[MASK]` written in text is the mask") == 1


def test_the_checkpoints_own_generator_folder_fills_masks(checkpoint):
    """The checkpoint's ``hf/generator`` card names fill-mask too (pretrain 16): it fills as it is, and
    ``hf/discriminator``, which fine-tuning loads, keeps text as data."""
    from transformers import pipeline

    _, art = checkpoint
    gen = art.path / "hf" / "generator"
    assert "`[MASK]` written in text is the mask" in (gen / "README.md").read_text(encoding="utf-8")
    assert len(pipeline("fill-mask", model=str(gen))("나는 정말 [MASK] 봤다.", top_k=2)) == 2
    # the discriminator's tokenizer files are the vocabulary's as they were (this test's has no text-is-data key)
    disc_config = json.loads((art.path / "hf" / "discriminator" / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert disc_config.get("split_special_tokens") is not False


def test_push_dry_run_prints_the_commit_it_would_make(checkpoint, tmp_path, capsys):
    from kolectra.pipeline.hub import operations

    store, art = checkpoint
    dest = tmp_path / "out"
    assert main(["export", art.id, "--to", str(dest), "--out", str(store.root), "--push", "me/kolectra-tiny",
                 "--dry-run"]) == 0
    out = capsys.readouterr().out
    ops = operations(dest)
    assert {op.path_in_repo for op in ops} == {p.name for p in dest.iterdir()}
    assert f"would upload {len(ops)} files" in out and "https://huggingface.co/me/kolectra-tiny" in out
    assert all(f"  {op.path_in_repo}  " in out for op in ops)


@pytest.mark.parametrize("extra, expected", [
    (["--dataset", "corpus/web..x"], "--dataset: 'corpus/web..x' is not a Hugging Face Hub id"),
    (["--push", "not a repo"], "--push: 'not a repo' is not a Hugging Face Hub id"),
    (["--dry-run"], "--dry-run and --private go with --push REPO_ID"),
])
def test_bad_export_requests_are_one_line_exit_2(checkpoint, tmp_path, capsys, extra, expected):
    store, art = checkpoint
    assert main(["export", art.id, "--to", str(tmp_path / "o"), "--out", str(store.root), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0]


def test_an_invalid_push_id_is_refused_before_the_folder_is_written(checkpoint, tmp_path, capsys):
    store, art = checkpoint
    assert main(["export", art.id, "--to", str(tmp_path / "o"), "--out", str(store.root), "--push", "a//b"]) == 2
    assert "--push: 'a//b' is not a Hugging Face Hub id" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def _kolectra(args: list[str], tmp_path, **env) -> subprocess.CompletedProcess:
    """The ``kolectra`` command in its own process: huggingface_hub reads HF_ENDPOINT and HF_HOME when
    it is imported, so a Hub that is not there is set before that, as a user's shell would."""
    child = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING_FACE"))}
    child.update(HF_HOME=str(tmp_path / "hf-home"), **env)  # no token file of this machine's user
    return subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", *args], capture_output=True, text=True,
                          env=child, timeout=600)


@pytest.mark.parametrize("push", [["--push=me/k"], ["--pu", "me/k"]])
def test_a_push_with_the_network_down_is_an_environment_problem_however_push_is_spelled(checkpoint, tmp_path, push):
    """Issue 46: a Hub that cannot be reached was an internal error (a traceback log); it is the
    environment's problem, one line, exit 2. Port 9 on this machine refuses: real huggingface_hub calls.
    ``--push=me/k`` (argparse's other spelling) and ``--pu me/k`` were put offline by kolectra itself, then
    refused as 'HF_HUB_OFFLINE is set in the environment': the upload is read from the parsed options (so
    both spellings reach the network, and ``--push me/k`` is parsed as ``--push=me/k`` is: one process
    each, not a third for it)."""
    store, art = checkpoint
    done = _kolectra(["export", art.id, "--to", str(tmp_path / "o"), "--out", str(store.root), *push],
                     tmp_path, HF_ENDPOINT="http://127.0.0.1:9", HF_TOKEN="hf_" + "x" * 34)
    err = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(err) == 1 and "cannot reach the Hub at http://127.0.0.1:9" in err[0] and "internal" not in err[0], err
    assert "HF_HUB_OFFLINE" not in done.stderr


@pytest.fixture(scope="module")
def unlearned(tmp_path_factory):
    """A checkpoint that learned nothing (lr 1e-9), initialised from a local folder (an earlier such run's
    ``hf/``), and ``export --push me/k --dry-run`` of it without a token in a process of its own
    (huggingface_hub reads HF_HOME, the token file's place, when imported): (store, artifact, init_from
    folder, tmp folder, the finished process). Two tests read that one dry run. 4 steps each: the health
    check judges at step 2 (log_every 1)."""
    tmp = tmp_path_factory.mktemp("unlearned")
    store = Store(tmp / "root")
    examples = small_chain(store)[2]
    flags = [f"--set={s}" for s in SETS if not s.startswith(("train.lr", "train.save_every", "train.steps",
                                                              "train.warmup"))]
    flags += ["--set", "train.steps=4", "--set", "train.warmup_steps=1", "--set", "train.lr=1e-9"]

    def pretrain(*extra: str):  # no -q: it sets the level for the process, and only a test's own call is undone
        said = io.StringIO()
        with contextlib.redirect_stdout(said):
            assert main(["pretrain", "--examples", str(examples.path), "--preset", "tiny", *flags, *extra,
                         "--out", str(store.root)]) == 0
        return store.resolve(said.getvalue().strip().splitlines()[-1])

    hf = str((store.local(pretrain()) / "hf").resolve())
    ckpt = pretrain("--set", f"train.init_from={hf}")
    done = _kolectra(["export", ckpt.id, "--to", str(tmp / "o"), "--out", str(store.root), "--push", "me/k",
                      "--dry-run"], tmp)
    return store, ckpt, hf, tmp, done


def test_dry_run_warns_of_no_token_and_of_a_public_push_of_a_model_that_learned_nothing(unlearned, capsys,
                                                                                          monkeypatch):
    """Issue 46: ``--dry-run`` says what would stop or shame the real push; a local ``init_from``
    folder named in the pretraining card stays out of the exported one."""
    store, ckpt, hf, tmp, done = unlearned
    out = ["--out", str(store.root)]
    assert ckpt.manifest["stats"]["health"]["status"] == "not_learning"
    assert hf in (store.local(ckpt) / "hf" / "discriminator" / "README.md").read_text(encoding="utf-8")

    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if line.startswith("kolectra export: warning: ")]
    assert len(warned) == 2 and "no Hugging Face token" in warned[0] and "learned nothing" in warned[1], warned
    card = (tmp / "o" / "README.md").read_text(encoding="utf-8")
    assert str(Path(hf).parent) not in card and str(tmp) not in card
    assert "[local folder]/hf" in card and "https://" not in card
    # a private push with a token: nothing to warn of (in this process: HF_TOKEN is read at each call,
    # and it comes before any token file, so no fresh process is needed for it; it saves a start of kolectra)
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 34)
    assert main(["export", ckpt.id, "--to", str(tmp / "p"), *out, "--push", "me/k", "--dry-run",
                 "--private"]) == 0
    said = capsys.readouterr()
    assert "warning" not in said.err and "would upload" in said.out, said.err


def test_a_model_with_fewer_positions_than_the_vocabulary_says_exports_a_tokenizer_that_fits(tmp_path):
    """model.max_position 32 under a vocabulary saying 512 (k4): the folder's tokenizer cut inputs at 512 with
    truncation=True and the model failed in its embeddings ('size of tensor a (202) must match ... (64)')."""
    from transformers import AutoTokenizer, ElectraForPreTraining

    tok = build_tokenizer(tmp_path / "tok")
    conf_path = tok / "tokenizer_config.json"
    conf_path.write_text(json.dumps({**json.loads(conf_path.read_text()), "model_max_length": 512}))
    examples = build_examples(tmp_path / "examples", tok, n=16, seq_len=32)
    base = presets.tiny()
    cfg = dataclasses.replace(base, model=dataclasses.replace(base.model, max_position=32),
                              train=dataclasses.replace(base.train, steps=1, batch_size=8, warmup_steps=0,
                                                        cpu_threads=1))
    store = Store(tmp_path / "store")
    art = store.build(Request(kind="checkpoint", name="p32", stage_version=train.STAGE_VERSION, config=to_dict(cfg)),
                      lambda out: train.pretrain(cfg, examples, tok, out))
    for role in ("discriminator", "generator"):
        assert json.loads((art.path / "hf" / role / "tokenizer_config.json").read_text())["model_max_length"] == 32
    folder = art.path / "hf" / "discriminator"
    enc = AutoTokenizer.from_pretrained(folder)("나는 정말 영화를 봤다. " * 40, truncation=True, return_tensors="pt")
    assert enc["input_ids"].shape[1] == 32
    assert ElectraForPreTraining.from_pretrained(folder)(**enc).logits.shape == (1, 32)
    dest = tmp_path / "hub"
    assert main(["export", art.id, "--to", str(dest), "--out", str(store.root)]) == 0
    assert json.loads((dest / "tokenizer_config.json").read_text())["model_max_length"] == 32



def test_positions_past_the_pretrained_length_are_said_untrained_in_the_cards_and_the_export(checkpoint, tmp_path,
                                                                                              capsys):
    """Pretrained on 32-token rows with 512 positions (as ``kolectra run``'s demo: 128 of 512): positions 32-511
    were never trained, and an input past 32 tokens read them with no word of it anywhere (w5). Both cards say
    so, and ``kolectra export`` too (its card once; a card written before checkpoint 23 gains it)."""
    from kolectra.pipeline import hub

    store, art = checkpoint
    said = "positions 32-511 were never trained by it (they are random, from the initialisation)"
    for role in ("discriminator", "generator"):
        assert said in (art.path / "hf" / role / "README.md").read_text(encoding="utf-8")
    dest = tmp_path / "out"
    assert main(["export", art.id, "--to", str(dest), "--out", str(store.root)]) == 0
    err = capsys.readouterr().err
    assert "kolectra export: note: the model takes up to 512 tokens" in err and said in err
    assert (dest / "README.md").read_text(encoding="utf-8").count(said) == 1
    older = tmp_path / "older.md"
    older.write_text((art.path / "hf" / "discriminator" / "README.md").read_text(encoding="utf-8").replace(
        hub.positions_note(art, {"max_position_embeddings": 512}), ""), encoding="utf-8")
    assert said not in older.read_text(encoding="utf-8")
    text = hub.card(older, "ElectraForPreTraining", "electra", art, None, None,
                    hub.positions_note(art, {"max_position_embeddings": 512}))
    assert text.count(said) == 1
    assert hub.positions_note(art, {"max_position_embeddings": 32}) == ""  # every position trained


def test_a_model_of_one_segment_embedding_exports_a_tokenizer_that_gives_no_segment_ids(tmp_path):
    """model.type_vocab_size=1 (pretrained on single_segment_prob=1 examples): the folders' tokenizer gave a
    pair's second text token type 1, and the model failed inside its embeddings ('IndexError: index out of
    range in self') (t9). hf/ and ``kolectra export`` (of a checkpoint before 22 too) leave the ids out."""
    import torch
    from transformers import AutoTokenizer, ElectraForMaskedLM, ElectraForPreTraining

    from kolectra.core.stage import StageOutput
    from kolectra.model.electra import ElectraPair
    from kolectra.model.export import export_pair

    tok = build_tokenizer(tmp_path / "tok")
    base = presets.tiny()
    cfg = dataclasses.replace(base, model=dataclasses.replace(base.model, type_vocab_size=1, max_position=64))

    def pretrained(out):
        export_pair(ElectraPair(cfg.model, len(json.loads((tok / "tokenizer.json").read_text())["model"]["vocab"]), 0),
                    tok, out / "hf", {"preset": "tiny", "objective": "electra"})
        return StageOutput(stats={})

    store = Store(tmp_path / "store")
    art = store.build(Request(kind="checkpoint", name="one", stage_version=train.STAGE_VERSION, config=to_dict(cfg)),
                      pretrained)
    for role, cls in (("discriminator", ElectraForPreTraining), ("generator", ElectraForMaskedLM)):
        folder = art.path / "hf" / role
        enc = AutoTokenizer.from_pretrained(folder)("나는 영화를", "정말 봤다", return_tensors="pt")
        assert "token_type_ids" not in enc
        with torch.no_grad():
            assert cls.from_pretrained(folder)(**enc).logits.shape[:2] == enc["input_ids"].shape
    # what kolectra export does with a checkpoint written before 22, whose tokenizer_config.json names them
    from kolectra.pipeline.hub import _write

    older, dest = tmp_path / "older", tmp_path / "hub"
    shutil.copytree(art.path / "hf" / "discriminator", older)
    conf = older / "tokenizer_config.json"
    conf.write_text(json.dumps({**json.loads(conf.read_text()),
                                "model_input_names": ["input_ids", "token_type_ids", "attention_mask"]}))
    dest.mkdir()
    _write(older, dest, json.loads((older / "config.json").read_text()), "ElectraForPreTraining", False, "card")
    assert json.loads((dest / "tokenizer_config.json").read_text())["model_input_names"] == ["input_ids",
                                                                                           "attention_mask"]


def test_a_model_of_one_segment_embedding_gives_a_pair_segment_0_where_its_ids_are_asked_for(tmp_path):
    """type_vocab_size 1 with a kolectra vocabulary (PreTrainedTokenizerFast: its tokenizer.json as it is):
    ``tokenizer(a, b, return_token_type_ids=True)`` (as a collator or a user's code asks) gave the second text
    type 1, and the model failed inside its embeddings ('IndexError: index out of range in self') (w5). The
    folders' tokenizer.json gives it 0 (hf/ and ``kolectra export``, also of a checkpoint before 23); which
    text a token is of (``sequence_ids``) stays; a model of two segments keeps the vocabulary's file."""
    import torch
    from transformers import AutoTokenizer, ElectraForMaskedLM, ElectraForPreTraining

    from kolectra.core.tokens import SPECIALS
    from kolectra.model.electra import ElectraPair
    from kolectra.model.export import export_pair
    from kolectra.pipeline.hub import _write
    from kolectra.vocab.export import write_dir

    chars = sorted(set("나는영화를정말봤다"))
    vocab = [*SPECIALS, *chars, *(f"##{c}" for c in chars), "나는", "영화를", "정말", "봤다"]
    tok = tmp_path / "tok"
    tok.mkdir()
    write_dir(vocab, tok)
    base = presets.tiny()
    for segments in (1, 2):
        cfg = dataclasses.replace(base, model=dataclasses.replace(base.model, type_vocab_size=segments,
                                                                  max_position=64))
        export_pair(ElectraPair(cfg.model, len(vocab), 0), tok, tmp_path / f"hf{segments}", {"preset": "tiny"})
    for role, cls in (("discriminator", ElectraForPreTraining), ("generator", ElectraForMaskedLM)):
        assert (tmp_path / "hf2" / role / "tokenizer.json").read_bytes() == (tok / "tokenizer.json").read_bytes()
        folder = tmp_path / "hf1" / role
        enc = AutoTokenizer.from_pretrained(folder)("나는 영화를", "정말 봤다", return_token_type_ids=True,
                                                    return_tensors="pt")
        assert enc["token_type_ids"].tolist() == [[0] * 7] and enc.sequence_ids(0) == [None, 0, 0, None, 1, 1, None]
        with torch.no_grad():
            assert cls.from_pretrained(folder)(**enc).logits.shape[:2] == (1, 7)
    # kolectra export of a checkpoint before 23: its tokenizer.json the vocabulary's
    older, dest = tmp_path / "older", tmp_path / "hub"
    shutil.copytree(tmp_path / "hf1" / "discriminator", older)
    shutil.copyfile(tok / "tokenizer.json", older / "tokenizer.json")
    dest.mkdir()
    _write(older, dest, json.loads((older / "config.json").read_text()), "ElectraForPreTraining", False, "card")
    assert (dest / "tokenizer.json").read_bytes() == (tmp_path / "hf1" / "discriminator" / "tokenizer.json").read_bytes()
    pair = AutoTokenizer.from_pretrained(dest)("나는", "봤다", return_token_type_ids=True)
    assert pair["token_type_ids"] == [0] * 5


def test_a_dry_run_s_warning_to_a_log_whose_reader_is_gone_does_not_end_the_command(checkpoint, tmp_path):
    """stderr a pipe nobody reads any more (``2> >(tee log)``, tee stopped; a hung-up terminal: EIO): the
    warning's BrokenPipeError ended ``export --push --dry-run`` before it listed the commit (status 1 or 2);
    the warning is lost, the command's output and status are not."""
    store, art = checkpoint
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command writes its first line there
    child = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING_FACE"))}
    child.update(HF_HOME=str(tmp_path / "hf-home"))  # no token: a warning to write
    try:
        done = subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", "export", art.id, "--to",
                               str(tmp_path / "o"), "--out", str(store.root), "--push", "me/k", "--dry-run"],
                              stdout=subprocess.PIPE, stderr=write, text=True, env=child, timeout=600)
    finally:
        os.close(write)
    assert done.returncode == 0
    assert done.stdout.strip().splitlines()[-1] == str(tmp_path / "o")


def test_the_login_command_the_export_names_for_a_token_is_one_huggingface_hub_installs(unlearned, capsys):
    """The dry run's warning, the real push's error and ``--push``'s help named ``huggingface-cli login``,
    which huggingface_hub 1.0 removed (kolectra takes >= 2.4: its command is ``hf``): a user without a
    token was told to run a command that is not there. Each names one the installed library runs."""
    from kolectra.pipeline import hub

    dry = unlearned[-1]  # the dry run of a push without a token, in a process of its own
    with pytest.raises(SystemExit) as helped:
        main(["export", "--help"])
    assert dry.returncode == 0 and helped.value.code == 0, dry.stderr
    said = {"dry run": re.findall(r"token found \(HF_TOKEN or `([^`]+)`\)", dry.stderr),
            "help": re.findall(r"needs a token: ([a-z -]+?) or HF_TOKEN", " ".join(capsys.readouterr().out.split())),
            "push": [hub.LOGIN]}  # the real push's line; its token check needs a Hub that answers
    assert said["dry run"] == said["help"] == said["push"], (said, dry.stderr)
    scripts = {e.name: e for e in metadata.distribution("huggingface_hub").entry_points
               if e.group == "console_scripts"}
    program, *words = hub.LOGIN.split()
    assert program in scripts, f"`{hub.LOGIN}`: huggingface_hub installs no {program!r} ({sorted(scripts)})"
    ran = subprocess.run([sys.executable, "-c", f"import sys; from {scripts[program].module} import "
                          f"{scripts[program].attr} as m; sys.argv = {[program, *words, '--help']!r}; m()"],
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, f"`{hub.LOGIN} --help`: {ran.stderr[-300:]}"
