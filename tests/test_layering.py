"""The layers the code keeps, checked: ``core/`` imports nothing else of kolectra; the stages
(``corpus/``, ``vocab/``, ``model/``, ``finetune/``) never import ``pipeline/``; no module imports
another in a cycle (imports inside functions included); and the light commands (``kolectra --help``,
``artifacts list``, ``--print-config``) start without torch or Beam."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.export_support import checkpoint  # noqa: F401  (the fixture: a real tiny checkpoint)
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures: moto's S3 server)

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


def test_a_reused_checkpoint_or_eval_imports_no_transformers(tmp_path):
    """A stage whose artifact is published already answers with its path: ``kolectra pretrain`` and
    ``kolectra finetune`` run again imported transformers (and torch._dynamo, about 3-5 CPU s) before
    their lookup, where a reused eval now takes about 0.4 CPU s. Here: the device layer a checkpoint
    lookup needs, and a finetune as far as its model's lookup."""
    data = tmp_path / "train.txt"
    data.write_text("id\tdocument\tlabel\n1\tgood\t1\n", encoding="utf-8")
    argvs = [["finetune", "nsmc", "--model", "absent", "--train", str(data), "--test", str(data),
              "--out", str(tmp_path)]]
    code = "import kolectra.model.runtime\n" + LIGHT.format(argvs=repr(argvs))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "no artifact 'absent'" in r.stderr  # the command ran up to the model's lookup
    loaded = json.loads(r.stdout.strip().splitlines()[-1])
    assert loaded["transformers"] is False


# ---- no import cycles -------------------------------------------------------------------------------
def module_names() -> dict[str, Path]:
    """Every kolectra module -> its file (``core/storage.py`` is ``kolectra.core.storage``; a package is its ``__init__``)."""
    out = {}
    for top in ("core", *STAGES, "pipeline"):
        for path in sorted((REPO / top).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            out[".".join(("kolectra", *(parts[:-1] if parts[-1] == "__init__" else parts)))] = path
    return out


def imported(module: str, is_package: bool, source: str, known: set[str]) -> set[str]:
    """The kolectra modules ``module`` imports anywhere in its file (inside functions too).

    ``from X import a`` reads X's namespace, so it is an edge to X, and to ``X.a`` too where that is a
    module; relative names are resolved against ``module``'s package. The parents a dotted import runs
    first (``a/__init__`` before ``a.b``) are not edges: a package whose face re-exports a submodule
    would otherwise be in a cycle with every submodule that imports a sibling."""
    package = module if is_package else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]) if node.level else ""
            source_module = ".".join(p for p in (base, node.module) if p)
            found.add(source_module)
            found.update(f"{source_module}.{a.name}" for a in node.names)
    return {m for m in found if m in known and m != module}


def import_graph() -> dict[str, set[str]]:
    modules = module_names()
    return {m: imported(m, p.name == "__init__.py", p.read_text(encoding="utf-8"), set(modules))
            for m, p in modules.items()}


def test_imports_are_resolved_relative_and_through_packages():
    known = {"kolectra.core", "kolectra.core.storage", "kolectra.pipeline.store", "kolectra.pipeline.store.remote",
             "kolectra.pipeline.store.catalog"}
    source = ("from . import remote\nfrom .. import store\nfrom ...core import storage\n"
              "def f():\n    import kolectra.pipeline.store.catalog\n")
    assert imported("kolectra.pipeline.store.factory", False, source, known) == known
    assert imported("kolectra.pipeline.store", True, "from .remote import RemoteStore\n", known) == \
        {"kolectra.pipeline.store.remote"}


def test_no_kolectra_module_imports_another_in_a_cycle():
    """A cycle hidden in a function-level import is still a cycle: the modules can neither be read nor
    tested apart, and the import order decides which of them sees the other half-initialised."""
    import networkx as nx

    graph = nx.DiGraph([(m, d) for m, deps in import_graph().items() for d in deps])
    cycles = sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)
    assert cycles == [], "modules that import each other in a cycle: " + "; ".join("{" + ", ".join(c) + "}" for c in cycles)


def test_only_the_factory_opens_a_root_on_a_store(tmp_path):
    """Below the factory a store cannot name the remote one: a root built directly follows local roots
    only, and says which call follows a URL; those the factory opens hand on the factory's opener."""
    from kolectra.pipeline.store.artifacts import ArtifactError, Store
    from kolectra.pipeline.store.factory import catalog_for, open_store

    with pytest.raises(ArtifactError, match="a root on a store, followed only from a root opened by .*open_store"):
        Store(tmp_path).resolve("s3://bucket/root/corpus/c-0123456789abcdef")
    assert open_store(tmp_path).catalogs is catalog_for and catalog_for(tmp_path).catalogs is catalog_for


def test_a_reused_checkpoint_on_a_bucket_imports_no_torch(bucket, tmp_path, monkeypatch, capsys):  # noqa: F811
    """``kolectra pretrain`` run again over a published checkpoint (on s3://, moto) imported torch before its
    lookup, for the rank (model/runtime.py imported the device modules) and two names of model/checkpoint.py:
    3.0+0.4 CPU s and 813 MB peak RSS on a 2-core machine, 1.1+0.2 s and 94 MB without (h5)."""
    from kolectra.pipeline import stage_versions
    from kolectra.pipeline.cli import main
    from kolectra.pipeline.store.factory import open_store
    from tests.test_stage_versions import FLAGS, _chain

    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))
    root = f"{bucket}/k"
    examples = _chain(open_store(root), stage_versions.current("examples"))[2]
    argv = ["pretrain", "--examples", examples.id, *FLAGS, "--out", root]
    assert main(argv) == 0
    built = capsys.readouterr().out.strip().splitlines()[-1]
    assert built.startswith(f"{root}/checkpoint/")
    r = subprocess.run([sys.executable, "-c", LIGHT.format(argvs=repr([[*argv, "-v"]]))], capture_output=True,
                       text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0 and f"reusing {built}" in r.stderr, r.stderr
    assert r.stdout.strip().splitlines()[-2] == built
    loaded = json.loads(r.stdout.strip().splitlines()[-1])
    assert loaded == {"torch": False, "apache_beam": False, "transformers": False}, r.stderr


def test_examples_import_no_beam_before_their_lookup(bucket, tmp_path):  # noqa: F811
    """``kolectra examples`` imported its Beam stage module (apache_beam.options) first, so a reused examples
    artifact paid for it: 2.86+0.35 CPU s and 258 MB on s3://bucket/k (h5), 1.02+0.16 s and 93 MB without. Here:
    the command as far as its corpus's lookup."""
    argvs = [["examples", "--corpus", "absent", "--vocab", "absent", "--out", f"{bucket}/k"]]
    r = subprocess.run([sys.executable, "-c", LIGHT.format(argvs=repr(argvs))], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert r.returncode == 0 and "no artifact 'absent'" in r.stderr, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["apache_beam"] is False


def test_a_reused_corpus_imports_no_beam(tmp_path):
    """``kolectra corpus`` run again over a published corpus (the "reused" answer) imported Beam twice before it:
    the stage's module (corpus/build.py, for OPERATIONAL) and the listing (corpus/inputs.py: Beam's glob
    translation): 2.04-2.45+0.24 CPU s and 211 MB peak RSS on 2 local files (h15), 0.54-0.58+0.05 s and 51 MB
    without. A glob of awkward names: the listing's own translation (corpus/local_glob.py) names the same files."""
    folder = tmp_path / "리뷰 [a]"
    folder.mkdir()
    for i, name in enumerate(("part 0.jsonl", "부분-1.jsonl", "x.txt")):
        (folder / name).write_text(json.dumps({"text": f"두 번 보고 싶은 영화입니다 정말 추천합니다 {i}"}, ensure_ascii=False) + "\n",
                                   encoding="utf-8")
    argv = ["corpus", "--input", str(folder).replace("[", "[[]") + "/*.json?", "--out", str(tmp_path / "root"), "-q"]
    first = subprocess.run([sys.executable, "-m", "kolectra", *argv], capture_output=True, text=True, cwd=tmp_path,
                           timeout=300)
    assert first.returncode == 0, first.stderr
    built = first.stdout.strip().splitlines()[-1]
    manifest = json.loads((Path(built) / "manifest.json").read_text(encoding="utf-8"))
    assert sorted(Path(r["path"]).name for r in manifest["inputs"]) == ["part 0.jsonl", "부분-1.jsonl"]
    code = LIGHT.format(argvs=repr([[*argv[:-1], "-v"]])) + \
        "print(json.dumps({n: n in sys.modules for n in ('kiwipiepy', 'pyarrow')}))\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0 and f"reusing {built}" in r.stderr, r.stderr
    assert r.stdout.strip().splitlines()[-3] == built
    assert json.loads(r.stdout.strip().splitlines()[-2]) == {"torch": False, "apache_beam": False,
                                                            "transformers": False}, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"kiwipiepy": False, "pyarrow": False}
    # Beam options given: checking them needs Beam's parser (about 2 CPU s and 160 MB), the lookup nothing of
    # Beam; arguments that passed once pass again without it (pipeline/cli/checks._passed_before; h25: 2.0-2.4
    # -> 0.66-0.75 CPU s, 218 -> 56 MB). A misspelt one is refused in one line every time, never remembered.
    env = {**os.environ, "KOLECTRA_CACHE": str(tmp_path / "cache")}
    beam = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", LIGHT.format(argvs=repr([[*argv, "--direct_num_workers", "2"]]))],
                           capture_output=True, text=True, cwd=tmp_path, timeout=120, env=env)
        assert r.returncode == 0 and r.stdout.strip().splitlines()[-2] == built, r.stderr
        beam.append(json.loads(r.stdout.strip().splitlines()[-1])["apache_beam"])
    assert beam == [True, False]
    misspelt = [*argv, "--direct_num_workres", "2"]
    r = subprocess.run([sys.executable, "-c", LIGHT.format(argvs=repr([misspelt, misspelt]))], capture_output=True,
                       text=True, cwd=tmp_path, timeout=120, env=env)
    assert r.returncode == 0 and r.stderr.strip().splitlines() == [
        "kolectra corpus: error: unknown option --direct_num_workres (did you mean --direct_num_workers?): neither "
        "kolectra's (kolectra corpus --help) nor one of Beam's pipeline options"] * 2, r.stderr
    assert len(list((tmp_path / "cache" / "beam-options").iterdir())) == 1


EXPORTS = """
import json, sys
from kolectra.pipeline.cli import main
codes = [main(argv) for argv in {argvs}]
print(json.dumps({{"codes": codes, **{{n: n in sys.modules for n in ("torch", "transformers", "apache_beam",
                                                                   "tokenizers")}}}}))
"""


def test_an_export_imports_neither_torch_nor_transformers(checkpoint, bucket, tmp_path):  # noqa: F811
    """``kolectra export`` copies a checkpoint's ``hf/<role>`` folder and fits its JSON files and card: it imported
    torch and transformers for two modules' file helpers (model/checkpoint.py, model/export.py): 4.2-5.1 CPU s and
    793 MB peak RSS on a tiny checkpoint (2-core machine), 0.3-0.4 s and 41 MB without (h22). Nor tokenizers, which
    pipeline/hub.py imported (vocab/export.py) for one constant, MODEL_INPUT_NAMES, now core/tokens.py's (h25).
    Each path: the discriminator, the generator, a push's dry run, a --to in a bucket (moto)."""
    store, art = checkpoint
    base = [art.id, "--out", str(store.root)]
    argvs = [["export", *base, "--to", str(tmp_path / "disc")],
             ["export", *base, "--to", str(tmp_path / "gen"), "--role", "generator"],
             ["export", *base, "--to", str(tmp_path / "push"), "--push", "me/kolectra-tiny", "--dry-run"],
             ["export", *base, "--to", f"{bucket}/exported"]]
    r = subprocess.run([sys.executable, "-c", EXPORTS.format(argvs=repr(argvs))], capture_output=True, text=True,
                       cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {
        "codes": [0, 0, 0, 0], "torch": False, "transformers": False, "apache_beam": False, "tokenizers": False}, r.stderr
    assert all((tmp_path / d / "model.safetensors").is_file() for d in ("disc", "gen", "push"))
    assert "would upload 5 files" in r.stdout and f"{bucket}/exported" in r.stdout
