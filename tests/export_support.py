"""The checkpoint tests/test_export.py and tests/test_export_destination.py export: one for the session,
as it was one for test_export.py's module before the split (a module importing a fixture gets a fixture of
its own, so the artifact is kept here, and the second module reuses it instead of training again)."""

from __future__ import annotations

import dataclasses

import pytest

from kolectra.core.config import to_dict
from kolectra.model import presets, train
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.request import Request
from tests.model_support import build_examples, build_tokenizer

_BUILT: dict = {}  # the session's temporary folder -> (store, art)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A real checkpoint artifact: the tiny preset trained for a few steps by the trainer itself."""
    session = tmp_path_factory.getbasetemp()
    if session not in _BUILT:
        _BUILT[session] = _trained(tmp_path_factory)
    return _BUILT[session]


def _trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    tok = build_tokenizer(root / "tok")
    examples = build_examples(root / "examples", tok, n=32, seq_len=32)
    base = presets.tiny()
    cfg = dataclasses.replace(base, train=dataclasses.replace(base.train, steps=4, batch_size=8, warmup_steps=1,
                                                              log_every=2, cpu_threads=1))
    store = Store(root / "store")
    lineage = ["checkpoint/tiny-x", "└── corpus/web-0123456789abcdef"]
    art = store.build(Request(kind="checkpoint", name="tiny", stage_version=train.STAGE_VERSION,
                              config=to_dict(cfg)),
                      lambda out: train.pretrain(cfg, examples, tok, out, lineage=lineage))
    return store, art
