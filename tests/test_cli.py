"""The CLI surface: help everywhere, artifacts list/show/verify, errors as messages with exit codes."""

import json
from pathlib import Path

import pytest

from kolectra.core.stage import StageOutput
from kolectra.pipeline.cli import build_parser, main
from kolectra.pipeline.store.artifacts import Store, fingerprint_inputs
from kolectra.pipeline.store.request import Request


def _artifact(store, kind, name, parents=(), inputs=()):
    def produce(out: Path) -> StageOutput:
        (out / "stats.json").write_text(json.dumps({"kind": kind}))
        return StageOutput(stats={"records": 3})
    return store.build(Request(kind=kind, name=name, stage_version=1, config={"k": kind},
                               parents=tuple(parents), inputs=tuple(inputs)), produce)


@pytest.mark.parametrize("argv", [
    ["--help"], ["corpus", "--help"], ["vocab", "--help"], ["examples", "--help"], ["pretrain", "--help"],
    ["finetune", "--help"], ["finetune", "nsmc", "--help"], ["finetune", "korquad", "--help"], ["run", "--help"],
    ["artifacts", "--help"], ["artifacts", "list", "--help"], ["artifacts", "show", "--help"],
    ["artifacts", "verify", "--help"], ["artifacts", "gc", "--help"],
])
def test_help_everywhere(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0
    assert "usage: kolectra" in capsys.readouterr().out


def test_common_options_are_spelled_the_same_on_every_stage():
    parser = build_parser()
    stage_argv = {
        "corpus": ["corpus", "--input", "x"], "vocab": ["vocab", "--corpus", "x"],
        "examples": ["examples", "--corpus", "x", "--vocab", "y"], "pretrain": ["pretrain", "--examples", "x"],
        "nsmc": ["finetune", "nsmc", "--model", "m", "--train", "a", "--test", "b"],
        "korquad": ["finetune", "korquad", "--model", "m", "--train", "a", "--dev", "b"],
    }
    for argv in stage_argv.values():
        args = parser.parse_args(argv + ["--out", "/r", "--set", "a=1", "--name", "n", "--seed", "3", "--force"])
        assert (str(args.out), args.sets, args.name, args.seed, args.force) == ("/r", ["a=1"], "n", 3, True)


def test_artifacts_list_show_verify(tmp_path, capsys):
    raw = tmp_path / "raw.txt"
    raw.write_text("text\n")
    store = Store(tmp_path / "root")
    corpus = _artifact(store, "corpus", "c", inputs=fingerprint_inputs([raw]))
    vocab = _artifact(store, "vocab", "v", parents=[corpus])
    root = ["--out", str(store.root)]

    assert main(["artifacts", "list"] + root) == 0
    out = capsys.readouterr().out
    assert corpus.path.name in out and vocab.path.name in out

    assert main(["artifacts", "show", vocab.id] + root) == 0
    out = capsys.readouterr().out
    assert f"vocab/{vocab.path.name}" in out and f"corpus/{corpus.path.name}" in out and "raw.txt" in out

    assert main(["artifacts", "verify", str(vocab.path)] + root) == 0
    assert capsys.readouterr().out.strip().startswith("ok ")

    (corpus.path / "stats.json").write_text("tampered")
    assert main(["artifacts", "verify", corpus.id] + root) == 1
    assert "stats.json" in capsys.readouterr().out


def test_verify_lineage_rehashes_every_ancestor_once(tmp_path, capsys):
    import shutil

    store = Store(tmp_path / "root")
    corpus = _artifact(store, "corpus", "c")
    vocab = _artifact(store, "vocab", "v", parents=[corpus])
    examples = _artifact(store, "examples", "e", parents=[vocab, corpus])  # the corpus twice in the lineage
    root = ["--out", str(store.root)]

    assert main(["artifacts", "verify", "--lineage", examples.id] + root) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[1] for line in out] == [str(examples.path), str(vocab.path), str(corpus.path)]

    # a parent's file rewritten under an unchanged manifest: its children's own check cannot see it
    (corpus.path / "stats.json").write_text("tampered")
    assert main(["artifacts", "verify", examples.id] + root) == 0
    capsys.readouterr()
    assert main(["artifacts", "verify", "--lineage", examples.id] + root) == 1
    out = capsys.readouterr().out
    assert out.count("MISMATCH") == 1 and f"{corpus.path / 'stats.json'}" in out

    shutil.rmtree(corpus.path)  # a parent that is gone is named, not a mismatch
    assert main(["artifacts", "verify", "--lineage", vocab.id] + root) == 0
    captured = capsys.readouterr()
    assert f"missing parent {corpus.id} of {vocab.path}" in captured.out
    assert "2 artifact(s) verified" not in captured.err and "1 artifact(s) verified, 1 parent(s) not found" in captured.err


def test_errors_are_messages_not_tracebacks(tmp_path, capsys):
    root = ["--out", str(tmp_path)]
    assert main(["artifacts", "show", "nope"] + root) == 2
    assert "no artifact 'nope'" in capsys.readouterr().err
    assert main(["vocab", "--corpus", "deadbeef00"] + root) == 2
    assert "error" in capsys.readouterr().err


def test_corpus_input_that_matches_nothing_is_a_clear_error(tmp_path, capsys):
    assert main(["corpus", "--input", str(tmp_path / "none-*.jsonl"), "--out", str(tmp_path / "r")]) == 2
    assert "matches no file" in capsys.readouterr().err
    assert not (tmp_path / "r" / "corpus").exists()


def test_verify_of_a_ref_that_names_nothing_is_a_lookup_error_not_a_mismatch(tmp_path, capsys):
    store = Store(tmp_path / "root")
    art = _artifact(store, "corpus", "c")
    # an id prefix of 5 characters names nothing (6 at least, docs/cli.md): one line, exit 2, never "MISMATCH"
    assert main(["artifacts", "verify", art.id[:5], "--out", str(store.root)]) == 2
    captured = capsys.readouterr()
    assert "MISMATCH" not in captured.out and f"no artifact '{art.id[:5]}'" in captured.err
    assert main(["artifacts", "verify", art.id[:6], "--out", str(store.root)]) == 0
    assert capsys.readouterr().out.startswith(f"ok {art.path}")
