"""The benchmarks' outside contract: ``python benchmarks/<stage>.py [--quick]`` for stage in corpus,
vocab, examples, pretrain and finetune prints, as its last line, one JSON object with ``benchmark``,
``unit``, ``value``, ``baseline`` (``name`` and ``value``) and ``ratio`` (value / baseline), plus
``config`` and ``machine``. Every stage benchmark prints it through :func:`benchmarks.common.emit`;
the vocab stage's, the quickest, is run whole."""

from __future__ import annotations

import ast
import json
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
def test_each_stage_benchmark_takes_quick_and_ends_its_main_with_emit(stage):
    """Nothing printed to stdout after the object: ``main``'s last statement is ``emit(...)`` (or returns it)."""
    script = REPO / "benchmarks" / f"{stage}.py"
    shown = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120,
                           cwd=REPO)
    assert shown.returncode == 0 and "--quick" in shown.stdout, shown.stderr[-2000:]
    tree = ast.parse(script.read_text(encoding="utf-8"))
    main = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "main")
    last = main.body[-1]
    call = last.value if isinstance(last, (ast.Expr, ast.Return)) else None
    emitted = isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "emit"
    # a main that hands over to a mode of its own (vocab's --learner) returns before: that mode ends in emit too
    assert emitted, f"benchmarks/{stage}.py: main() does not end with emit(...)"


def test_the_vocab_benchmark_quick_run_prints_the_object_last():
    run = subprocess.run([sys.executable, str(REPO / "benchmarks" / "vocab.py"), "--quick"], capture_output=True,
                         text=True, timeout=600, cwd=REPO)
    assert run.returncode == 0, run.stderr[-3000:]
    result = _holds_the_contract(run.stdout.strip().splitlines()[-1])
    assert result["benchmark"] == "vocab_build_throughput" and result["value"] > 0 and result["config"]["quick"] is True
