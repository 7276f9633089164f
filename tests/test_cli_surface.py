"""The command line as a newcomer meets it: --version, help with defaults and examples, -q/-v,
--print-config without building, artifacts list telling same-name artifacts apart, the run summary,
and benchmarks that say which data argument they need."""

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from kolectra.core import verbosity
from kolectra.core.stage import StageOutput, progress
from kolectra.pipeline.cli import build_parser, main
from kolectra.pipeline.run import summary
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.request import Request

REPO = Path(__file__).resolve().parents[1]


def _leaves(parser: argparse.ArgumentParser, path=()):
    """(command path, parser) of every command that runs something."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from _leaves(sub, path + (name,))


def test_version_prints_kolectra_and_library_versions(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    out = capsys.readouterr().out
    torch = metadata.version("torch").split("+")[0]  # the installed one: the base install takes a range
    assert e.value.code == 0 and out.startswith("kolectra 0.") and f"torch {torch}" in out and "\n" == out[-1]


def test_every_option_says_what_it_does_and_its_default_and_every_command_shows_an_example():
    for path, p in _leaves(build_parser()):
        grouped = {a for g in p._mutually_exclusive_groups if g.required for a in g._group_actions}
        for a in p._actions:
            if isinstance(a, argparse._HelpAction) or a.help == argparse.SUPPRESS:
                continue
            where = f"kolectra {' '.join(path)} {'/'.join(a.option_strings) or a.dest}"
            assert a.help and len(a.help) > 10, f"{where}: no help text"
            takes_value = a.option_strings and a.nargs != 0 and not isinstance(a, argparse._CountAction)
            if takes_value and not a.required and a not in grouped:
                assert "default" in a.help, f"{where}: the help does not say its default"
        assert p.epilog and "example" in p.epilog and "kolectra" in p.epilog, f"kolectra {' '.join(path)}: no example"


def test_every_example_in_the_help_is_one_line_that_parses():
    """A reader copies an example line as it is shown: the default formatter wrapped `artifacts verify`'s,
    leaving `kolectra artifacts verify` (no REF) alone on a line."""
    from kolectra.pipeline.cli.options import relax

    for path, p in _leaves(build_parser()):
        shown = p.format_help()
        lines = [ln.strip().removeprefix("example:").strip() for ln in shown[shown.index("example"):].splitlines()]
        examples = [ln.split("  (")[0] for ln in lines if ln.startswith("kolectra ")]
        assert examples, f"kolectra {' '.join(path)}: no example line"
        for line in examples:
            argv = shlex.split(line)[1:]
            assert argv[:len(path)] == list(path), f"{line!r}: not an example of kolectra {' '.join(path)}"
            parser = build_parser()
            if "--print-config" in argv:
                relax(parser)
            try:
                parser.parse_args(argv)
            except SystemExit:
                pytest.fail(f"kolectra {' '.join(path)} --help shows {line!r}, which does not parse")


def test_the_beam_commands_help_names_kolectras_own_beam_options():
    """corpus, vocab and examples read options of kolectra's own from the Beam arguments
    (corpus/runners.py CorpusOptions); --local_memory_gb, read by all three, was named in no --help."""
    from kolectra.corpus.runners import CorpusOptions

    parser = argparse.ArgumentParser(add_help=False)
    CorpusOptions._add_argparse_args(parser)
    own = [s for a in parser._actions for s in a.option_strings if s.startswith("--")]
    assert set(own) == {"--corpus_staging", "--local_memory_gb", "--analysis_threads"}, own
    readers = {"corpus": own, "vocab": ["--local_memory_gb", "--corpus_staging"], "examples": ["--local_memory_gb"]}
    for command, options in readers.items():
        shown = build_parser()._subparsers._group_actions[0].choices[command].format_help()
        for option in options:
            assert option in shown, f"kolectra {command} --help does not name {option}"


def test_print_config_resolves_without_inputs_and_builds_nothing(tmp_path, capsys):
    root = ["--out", str(tmp_path / "root")]
    assert main(["pretrain", "--print-config", "--preset", "small", "--steps", "7", "--set", "train.lr=1e-3"] + root) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["preset"] == "small" and doc["train"]["steps"] == 7 and doc["train"]["lr"] == 1e-3
    assert main(["finetune", "nsmc", "--print-config", "keys", "--seed", "5"] + root) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "# task: nsmc (from the command)" in lines
    assert any(line.startswith("seed ") and "= 5  (int)" in line for line in lines)
    assert any(line.startswith("optim.lr ") for line in lines)
    assert main(["corpus", "--print-config", "--text-field", "body"] + root) == 0
    assert json.loads(capsys.readouterr().out)["text_field"] == "body"
    assert main(["vocab", "--print-config", "--set", "vocab_sise=8000"] + root) == 2
    assert "unknown config key 'vocab_sise'" in capsys.readouterr().err
    assert not (tmp_path / "root").exists()


def test_quiet_and_verbose_set_one_level_for_kolectra_and_the_libraries(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(verbosity.ENV, raising=False)
    monkeypatch.setenv("TRANSFORMERS_VERBOSITY", "error")
    root = ["--out", str(tmp_path)]
    assert main(["artifacts", "list", "-q"] + root) == 0 and verbosity.level() == verbosity.QUIET
    capsys.readouterr()
    progress("vocab: counting words")
    progress("WARNING: this run has not learned")
    assert capsys.readouterr().err.strip() == "[kolectra] WARNING: this run has not learned"
    assert main(["artifacts", "list", "-vv"] + root) == 0 and verbosity.level() == verbosity.DEBUG
    assert os.environ["TRANSFORMERS_VERBOSITY"] == "info"
    # before the command's name too
    assert main(["-q", "artifacts", "list"] + root) == 0 and verbosity.level() == verbosity.QUIET
    assert main(["--verbose", "artifacts", "list"] + root) == 0 and verbosity.level() == verbosity.VERBOSE
    with pytest.raises(SystemExit):  # argparse's own usage error: a command is required
        main(["-q"])


def _build(store, kind, name, config, parents=(), files=None):
    def produce(out: Path) -> StageOutput:
        for rel, text in (files or {"stats.json": "{}"}).items():
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).write_text(text)
        return StageOutput(stats={})
    return store.build(Request(kind=kind, name=name, stage_version=1, config=config, parents=tuple(parents)), produce)


def test_artifacts_list_shows_what_tells_same_name_artifacts_apart(tmp_path, capsys):
    store = Store(tmp_path)
    ex = _build(store, "examples", "seq128", {"max_seq_length": 128, "packing": "isolated"})
    a = _build(store, "checkpoint", "sample", {"preset": "tiny", "train": {"steps": 600, "lr": 2e-3}}, [ex])
    b = _build(store, "checkpoint", "sample", {"preset": "tiny", "train": {"steps": 600, "lr": 5e-4}}, [ex],
               files={"big.bin": "x" * 5000})
    assert main(["artifacts", "list", "--out", str(tmp_path)]) == 0
    rows = {line.split()[1]: line for line in capsys.readouterr().out.splitlines()[1:]}
    for art, lr in ((a, "train.lr=0.002"), (b, "train.lr=0.0005")):
        row = rows[art.path.name]
        assert f"examples:seq128-{ex.id[:6]}" in row and "train.steps=600" in row and lr in row
    assert "5.0 kB" in rows[b.path.name]
    assert "packing=\"isolated\"" in rows[ex.path.name]


def test_the_refs_a_help_offers_as_examples_resolve_in_the_root_kolectra_run_leaves(tmp_path):
    """After the demo `sample` names a corpus, a vocab, examples and a checkpoint: report's help offered
    `(e.g. sample)`, which `kolectra report` (any kind) refuses as ambiguous; export's, of one kind, is fine."""
    store = Store(tmp_path)
    corpus = _build(store, "corpus", "sample", {})
    vocab = _build(store, "vocab", "sample", {}, [corpus])
    examples = _build(store, "examples", "sample", {}, [corpus, vocab])
    ckpt = _build(store, "checkpoint", "sample", {}, [examples])
    for task in ("nsmc", "korquad"):
        _build(store, "eval", f"sample-{task}", {"task": task}, [ckpt])
    for path, kind in ((("report",), None), (("export",), "checkpoint"), (("artifacts", "show"), None)):
        p = dict(_leaves(build_parser()))[path]
        ref = next(a for a in p._actions if a.dest == "ref")
        offered = [re.match(r"[\w.+-]*", w).group() for w in ref.help.split("e.g. ")[1:2]]
        shown = p.format_help()
        for line in shown[shown.index("example"):].splitlines():
            line = line.strip().removeprefix("example:").strip().split("  (")[0]
            if line.startswith("kolectra "):
                refs = build_parser().parse_args(shlex.split(line)[1:]).ref
                offered += refs if isinstance(refs, list) else [refs]
        assert offered, f"kolectra {' '.join(path)}: no example ref"
        for name in offered:
            assert store.resolve(name, kind).kind in (kind or "eval checkpoint"), (path, name)


def test_the_run_summary_names_each_figure_in_percent_and_ends_with_the_model_and_next_steps(tmp_path):
    store = Store(tmp_path)
    ckpt = _build(store, "checkpoint", "sample", {"preset": "tiny"})
    nsmc = _build(store, "eval", "nsmc", {"task": "nsmc"}, [ckpt],
                  {"metrics.json": json.dumps({"task": "nsmc", "accuracy": 0.7812, "accuracy_pct": 78.12})})
    korquad = _build(store, "eval", "korquad", {"task": "korquad"}, [ckpt],
                     {"metrics.json": json.dumps({"task": "korquad", "exact_match": 12.5, "f1": 30.25})})
    text = summary(store, [nsmc, korquad], {"corpus": 3.0, "pretrain": 9.0}, ckpt, reused={"corpus"})
    times = {line.split()[0]: line for line in text.split("== wall time")[1].splitlines()[1:3]}
    assert "reused" in times["corpus"] and "reused" not in times["pretrain"]  # 3 s of finding, not of building
    assert "NSMC test accuracy" in text and "78.12 %" in text and "0.7812" not in text
    assert "KorQuAD dev exact match" in text and "12.50 %" in text and "30.25 %" in text
    assert str(ckpt.path / "hf" / "discriminator") in text
    last = [line for line in text.splitlines() if line.strip()][-1]
    assert "next" in text.split("== the model ==")[1] and "README" in last


HEAVY = {"torch", "transformers", "apache_beam", "kiwipiepy"}


@pytest.mark.parametrize("script, argv, says", [
    ("vocab.py", [], "--reviews GLOB"),
    ("finetune.py", [], "--nsmc-train FILE"),
    ("corpus.py", ["--data", "/nonexistent"], "matches no file"),
])
def test_a_benchmark_without_its_data_names_the_argument_to_pass(script, argv, says):
    env = {k: v for k, v in os.environ.items() if k != "KOLECTRA_BENCH_DATA"}
    proc = subprocess.run([sys.executable, "-X", "importtime", str(REPO / "benchmarks" / script), *argv],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode != 0 and says in proc.stderr and "Traceback" not in proc.stderr
    # it stops before the heavy libraries: seconds of imports for a one-line message otherwise
    imported = {line.rsplit("|", 1)[1].strip().split(".")[0] for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert not imported & HEAVY, sorted(imported & HEAVY)


def test_a_command_that_loads_heavy_libraries_says_so_first_and_quiet_keeps_it_silent(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(verbosity.ENV, raising=False)
    assert main(["pretrain", "--examples", "absent", "--out", str(tmp_path)]) != 0
    assert capsys.readouterr().err.splitlines()[0].startswith("kolectra pretrain: error"), "no terminal: no line"
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # a person at a terminal
    assert main(["pretrain", "--examples", "absent", "--out", str(tmp_path)]) != 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "[kolectra] pretrain: starting (loading torch, transformers)"
    assert "no artifact 'absent'" in err[-1]
    assert main(["pretrain", "--examples", "absent", "--out", str(tmp_path), "-q"]) != 0
    assert "starting" not in capsys.readouterr().err
    assert main(["artifacts", "list", "--out", str(tmp_path)]) == 0  # loads nothing heavy: no line
    assert "starting" not in capsys.readouterr().err


def test_a_name_the_demo_gives_four_kinds_is_refused_naming_kind_slash_name(tmp_path, capsys):
    """After `kolectra run`, `kolectra report sample` is refused as ambiguous (a corpus, a vocab, examples
    and a checkpoint): the line offered ids and directories only, though `checkpoint/sample` (cli.md's
    kind/name) picks one. A name shared within one kind gets no such hint."""
    store = Store(tmp_path)
    corpus = _build(store, "corpus", "sample", {})
    vocab = _build(store, "vocab", "sample", {}, [corpus])
    ckpt = _build(store, "checkpoint", "sample", {}, [_build(store, "examples", "sample", {}, [corpus, vocab])])
    assert main(["artifacts", "show", "sample", "--out", str(tmp_path)]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    hint = "; or name its kind: checkpoint/sample, corpus/sample, examples/sample, vocab/sample"
    assert line.endswith("give more of the id, or the artifact's directory" + hint), line
    for ref in hint.split(": ")[1].split(", "):
        assert store.resolve(ref).kind == ref.split("/")[0]
    assert main(["artifacts", "show", "checkpoint/sample", "--out", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["id"] == ckpt.id
    _build(store, "corpus", "sample", {"other": True})  # two corpora: kind/name alone is ambiguous too
    assert main(["artifacts", "show", "sample", "--out", str(tmp_path)]) == 2
    assert "name its kind" not in capsys.readouterr().err


def test_a_name_that_starts_another_artifact_s_id_is_refused_naming_both_ways(tmp_path, capsys):
    """A hex ``--name`` of 6+ characters that begins another artifact's id was taken as that id
    silently: `kolectra artifacts show 4a51d1` showed the checkpoint sample-4a51d1fe..., not the eval
    named 4a51d1. Now refused in one line saying which is which and a ref for each."""
    store = Store(tmp_path)
    ckpt = _build(store, "checkpoint", "sample", {})
    prefix = ckpt.id[:6]
    named = _build(store, "eval", prefix, {})
    assert named.id != ckpt.id and not named.id.startswith(prefix)
    assert main(["artifacts", "show", prefix, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"kolectra artifacts show: error: {prefix!r} is ambiguous: the name of eval/{named.path.name} and "
                   f"the start of the id of checkpoint/{ckpt.path.name}; say eval/{prefix} for the name, or "
                   f"{ckpt.id} for the id"], err
    for ref, art in ((f"eval/{prefix}", named), (ckpt.id, ckpt), (f"checkpoint/{prefix}", ckpt)):
        assert main(["artifacts", "show", ref, "--out", str(tmp_path), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["id"] == art.id, ref
    assert store.resolve(prefix, "eval").id == named.id  # a kind asked for: only the eval is one


def test_artifacts_list_shows_a_checkpoints_seed(tmp_path, capsys):
    """Two pretrainings of other names that differ by their seed alone read the same in the list before 2026-12-02
    (seed is in the request, not among a checkpoint's key settings; same-name siblings showed it as differing)."""
    store = Store(tmp_path)
    ex = _build(store, "examples", "seq128", {"max_seq_length": 128, "packing": "isolated"})
    a = _build(store, "checkpoint", "run-a", {"preset": "tiny", "train": {"steps": 600}, "seed": 42}, [ex])
    b = _build(store, "checkpoint", "run-b", {"preset": "tiny", "train": {"steps": 600}, "seed": 2}, [ex])
    assert main(["artifacts", "list", "--kind", "checkpoint", "--out", str(tmp_path)]) == 0
    rows = {line.split()[1]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows[a.path.name].endswith('preset="tiny" train.steps=600 seed=42'), rows
    assert rows[b.path.name].endswith('preset="tiny" train.steps=600 seed=2'), rows
