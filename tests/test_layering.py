"""The layers the code keeps, checked: ``core/`` imports nothing else of kolectra; the stages
(``corpus/``, ``vocab/``, ``model/``, ``finetune/``) never import ``pipeline/``; and the light
commands (``kolectra --help``, ``artifacts list``, ``--print-config``) start without torch or Beam."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
STAGES = ("corpus", "vocab", "model", "finetune")


def kolectra_imports(folder: str) -> dict[str, set[str]]:
    """file -> the kolectra modules it imports (at any depth of the file)."""
    out: dict[str, set[str]] = {}
    for path in sorted((REPO / folder).rglob("*.py")):
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
        out[str(path.relative_to(REPO))] = {m for m in found if m.startswith("kolectra")}
    return out


def test_core_imports_nothing_else_of_kolectra():
    upward = {f: sorted(m for m in mods if not m.startswith("kolectra.core")) for f, mods in
              kolectra_imports("core").items()}
    assert {f: m for f, m in upward.items() if m} == {}


@pytest.mark.parametrize("folder", STAGES)
def test_a_stage_never_imports_the_pipeline(folder):
    upward = {f: sorted(m for m in mods if m.startswith("kolectra.pipeline")) for f, mods in
              kolectra_imports(folder).items()}
    assert {f: m for f, m in upward.items() if m} == {}


LIGHT = """
import json, sys
from kolectra.pipeline.cli import main
for argv in ({argvs}):
    try:
        main(argv)
    except SystemExit:
        pass
print(json.dumps({{name: name in sys.modules for name in ("torch", "apache_beam", "transformers")}}))
"""


@pytest.mark.parametrize("argvs", [[["--help"]], [["artifacts", "list", "--out", "ROOT"]],
                                   [["pretrain", "--print-config", "keys"]], [["corpus", "--help"]]])
def test_light_commands_import_neither_torch_nor_beam(tmp_path, argvs):
    argvs = [[str(tmp_path) if a == "ROOT" else a for a in argv] for argv in argvs]
    r = subprocess.run([sys.executable, "-c", LIGHT.format(argvs=repr(argvs))], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    loaded = json.loads(r.stdout.strip().splitlines()[-1])
    assert loaded == {"torch": False, "apache_beam": False, "transformers": False}, argvs


def test_the_vocab_command_imports_neither_torch_nor_beam(tmp_path):
    """The stages' table imports each stage when it runs: ``kolectra vocab`` (tokenizers only) once
    paid for torch, transformers, scikit-learn and Beam, about 6 s and 1 GB before its first step."""
    argvs = [["vocab", "--corpus", "absent", "--out", str(tmp_path)]]  # as far as the store's lookup
    code = LIGHT.format(argvs=repr(argvs)) + "from kolectra.pipeline import stages\nprint(json.dumps({n: n in sys.modules for n in ('torch', 'apache_beam', 'transformers', 'sklearn')}))\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "no artifact 'absent'" in r.stderr  # the command ran up to the stage
    loaded = json.loads(r.stdout.strip().splitlines()[-1])
    assert loaded == {"torch": False, "apache_beam": False, "transformers": False, "sklearn": False}
