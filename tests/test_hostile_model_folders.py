"""A model or tokenizer folder from an untrusted root (a shared bucket, a download) that names code of
its own (``auto_map`` in config.json or tokenizer_config.json): kolectra refuses it in one line and
never runs that code, nor asks on the terminal whether to (transformers' "Do you wish to run the
custom code? [y/N]", which a "y" answers by importing the folder's Python file)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kolectra.model.config import ModelConfig
from kolectra.model.electra import hf_configs
from kolectra.model.init import InitError, _check_shapes
from kolectra.model.pretrain_inputs import read_vocab
from kolectra.pipeline.cli import main
from tests.test_export import checkpoint  # noqa: F401 - a fixture
from tests.test_faults_finetune import _nsmc, _one_line
from tests.test_finetune_e2e import tiny_model  # noqa: F401 - a fixture

PROMPT = "Do you wish to run the custom code"


def _with_code(src: Path, dest: Path, config: bool, tokenizer: bool) -> Path:
    """A copy of ``src`` whose config.json and/or tokenizer_config.json name ``evil.py``, which would
    leave a file ``RAN`` beside it when imported."""
    shutil.copytree(src, dest)
    (dest / "evil.py").write_text(
        f"open({str(dest / 'RAN')!r}, 'w').close()\n"
        "from transformers import PretrainedConfig\n\n\n"
        "class Evil(PretrainedConfig):\n    model_type = 'evil'\n",
        encoding="utf-8",
    )
    if config:
        c = json.loads((dest / "config.json").read_text(encoding="utf-8"))
        c.update(model_type="evil", auto_map={"AutoConfig": "evil.Evil", "AutoModel": "evil.Evil"})
        (dest / "config.json").write_text(json.dumps(c), encoding="utf-8")
    if tokenizer:
        t = json.loads((dest / "tokenizer_config.json").read_text(encoding="utf-8"))
        t.pop("tokenizer_class", None)
        t["auto_map"] = {"AutoTokenizer": ["evil.Evil", None]}
        (dest / "tokenizer_config.json").write_text(json.dumps(t), encoding="utf-8")
    return dest


def test_finetune_refuses_a_model_folder_with_code_without_asking(tiny_model, tmp_path, capsys):
    model = _with_code(tiny_model, tmp_path / "model", config=True, tokenizer=False)
    assert main(_nsmc(tmp_path, model)) == 2
    out, err = capsys.readouterr()
    line = _one_line(err, "finetune nsmc")
    assert str(model) in line and "custom code" in line and "internal error" not in line
    assert PROMPT not in out + err
    assert not (model / "RAN").exists()


@pytest.mark.parametrize("config", [True, False])
def test_a_tokenizer_folder_with_code_is_refused_without_asking(tiny_model, tmp_path, capsys, config):
    folder = _with_code(tiny_model, tmp_path / "vocab", config=config, tokenizer=True)
    if not config:
        (folder / "config.json").unlink()  # a vocab artifact holds no config.json
    with pytest.raises(ValueError, match="custom code"):
        read_vocab(folder)
    out, err = capsys.readouterr()
    assert PROMPT not in out + err and not (folder / "RAN").exists()


def test_init_from_refuses_a_folder_with_code_without_asking(tiny_model, tmp_path, capsys):
    folder = _with_code(tiny_model, tmp_path / "discriminator", config=True, tokenizer=False)
    with pytest.raises(InitError, match="custom code"):
        _check_shapes(folder, hf_configs(ModelConfig(), 800, 0)[0])
    out, err = capsys.readouterr()
    assert PROMPT not in out + err and not (folder / "RAN").exists()


def _reseal(art: Path, rel: str) -> None:
    """``rel`` rewritten and the manifest made to match (bytes, sha256, digests): a root from elsewhere."""
    from kolectra.pipeline.store import manifest as m

    doc = json.loads((art / "manifest.json").read_text(encoding="utf-8"))
    entry = next(e for e in doc["files"] if e["path"] == rel)
    entry.update(bytes=(art / rel).stat().st_size, sha256=m.sha256_file(art / rel))
    doc.update(digest=m.digest(doc["files"]), files_digest=m.files_digest(doc["files"]))
    doc["fields_digest"] = m.fields_digest(doc)
    (art / "manifest.json").write_text(json.dumps(doc), encoding="utf-8")


MALFORMED = {
    "config a list": ("config.json", b"[1, 2]", "not a JSON object"),
    "architectures a string": ("config.json", None, "architectures"),
    "tokenizer config cut short": ("tokenizer_config.json", b'{"a": ', "not readable JSON"),
    "tokenizer config nested too deep": ("tokenizer_config.json", b"[" * 100_000 + b"]" * 100_000, "not readable JSON"),
    "card not UTF-8": ("README.md", b"\xff\xfe card", "not UTF-8"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_export_refuses_a_malformed_file_of_a_verified_checkpoint_before_writing(checkpoint, tmp_path, capsys, case):
    name, body, said = MALFORMED[case]
    _, built = checkpoint
    root = tmp_path / "root"
    shutil.copytree(built.path.parent.parent, root)
    art = root / "checkpoint" / built.path.name
    target = art / "hf" / "discriminator" / name
    if body is None:
        config = json.loads(target.read_text(encoding="utf-8"))
        target.write_text(json.dumps({**config, "architectures": "ElectraForPreTraining"}), encoding="utf-8")
    else:
        target.write_bytes(body)
    _reseal(art, f"hf/discriminator/{name}")
    dest = tmp_path / "export"
    assert main(["export", str(art), "--to", str(dest), "--out", str(root)]) == 2
    line = _one_line(capsys.readouterr().err, "export")
    assert str(target) in line and said in line and "internal error" not in line
    assert not dest.exists()  # refused before anything was written
