"""The benchmarks' outside contract: ``python benchmarks/<stage>.py [--quick]`` for stage in corpus,
vocab, examples, pretrain and finetune prints, as its last line, one JSON object with ``benchmark``,
``unit``, ``value``, ``baseline`` (``name`` and ``value``) and ``ratio`` (value / baseline), plus
``config`` and ``machine``. Every stage benchmark prints it through :func:`benchmarks.common.emit`;
the vocab stage's, the quickest, is run whole."""

from __future__ import annotations

import argparse
import ast
import gzip
import itertools
import json
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import common

REPO = Path(__file__).resolve().parents[1]
STAGES = ("corpus", "vocab", "examples", "pretrain", "finetune")
KEYS = {"benchmark", "unit", "value", "baseline", "ratio", "config", "machine"}


def _holds_the_contract(line: str) -> dict:
    result = json.loads(line)
    assert isinstance(result, dict) and KEYS <= set(result), sorted(KEYS - set(result))
    assert isinstance(result["benchmark"], str) and isinstance(result["unit"], str)
    assert set(result["baseline"]) >= {"name", "value"} and isinstance(result["baseline"]["name"], str)
    assert result["ratio"] == pytest.approx(result["value"] / result["baseline"]["value"])
    assert isinstance(result["config"], dict) and isinstance(result["machine"], dict)
    return result


def test_emit_prints_the_contract_s_object_as_one_last_line(capsys):
    common.emit("probe", "things/s", 3.0, "plain loop", 2.0, {"quick": True}, extra={"a": 1})
    lines = capsys.readouterr().out.splitlines()
    result = _holds_the_contract(lines[-1])
    assert len(lines) == 1 and result["ratio"] == 1.5 and result["baseline"] == {"name": "plain loop", "value": 2.0}


@pytest.mark.parametrize("stage", STAGES)
def test_each_stage_benchmark_takes_quick_and_ends_its_main_with_emit(stage, monkeypatch, capsys):
    """Nothing printed to stdout after the object: ``main``'s last statement is ``emit(...)`` (or returns it)."""
    script = REPO / "benchmarks" / f"{stage}.py"
    # run as ``python benchmarks/<stage>.py --help`` runs it (its folder first on sys.path, as __main__), in
    # this process: a process of its own cost pretrain.py's torch import again (7 CPU s); the quick run below
    # is the one in a process of its own
    monkeypatch.syspath_prepend(str(script.parent))
    monkeypatch.setattr(sys, "argv", [str(script), "--help"])
    with pytest.raises(SystemExit) as shown:
        runpy.run_path(str(script), run_name="__main__")
    assert shown.value.code in (0, None) and "--quick" in capsys.readouterr().out
    tree = ast.parse(script.read_text(encoding="utf-8"))
    main = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "main")
    last = main.body[-1]
    call = last.value if isinstance(last, (ast.Expr, ast.Return)) else None
    emitted = isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "emit"
    # a main that hands over to a mode of its own (vocab's --learner) returns before: that mode ends in emit too
    assert emitted, f"benchmarks/{stage}.py: main() does not end with emit(...)"


def test_the_vocab_benchmark_quick_run_prints_the_object_last(tmp_path):
    """The whole quick run, on the embedded sample's first 500 reviews (``--reviews``; its default 4,000 took
    Kiwi's analysis and the four timed builds eight times the text: the size is not what is checked)."""
    # what --quick reads without --reviews: the embedded sample, there
    default = argparse.Namespace(quick=True, reviews=None, data=None)
    assert common.reviews_source(default, "vocab.py") == str(common.SAMPLE_REVIEWS) and common.SAMPLE_REVIEWS.is_file()
    sample = tmp_path / "reviews.jsonl"
    with gzip.open(common.SAMPLE_REVIEWS, "rt", encoding="utf-8") as f:
        sample.write_text("".join(itertools.islice(f, 500)), encoding="utf-8")
    run = subprocess.run([sys.executable, str(REPO / "benchmarks" / "vocab.py"), "--quick", "--reviews", str(sample)],
                         capture_output=True, text=True, timeout=600, cwd=REPO)
    assert run.returncode == 0, run.stderr[-3000:]
    result = _holds_the_contract(run.stdout.strip().splitlines()[-1])
    assert result["benchmark"] == "vocab_build_throughput" and result["value"] > 0 and result["config"]["quick"] is True
