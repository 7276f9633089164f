"""The corpus artifact loads with ``datasets.load_dataset(<artifact dir>)``: a corpus built by the
real stage (Beam, Kiwi) gives ``train`` and ``validation`` with every document and field, as the
shards hold them; the dataset card that makes it so is deterministic and names only splits with data."""

import dataclasses
import json

import datasets
import pytest

from kolectra.corpus import build, shards
from kolectra.corpus.config import default_config
from tests.test_corpus_pipeline import _write_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    _write_corpus(root / "in")
    cfg = dataclasses.replace(default_config(), max_chars=80, valid_fraction=0.3, num_shards=2,
                              max_reject_ratio=0.5, strip_html=True)
    out = root / "out"
    out.mkdir()
    build.build(cfg, [str(root / "in" / "*")], out, ["--direct_num_workers=1"])
    return out


def test_load_dataset_gives_train_and_validation_with_every_field(corpus, tmp_path):
    ds = datasets.load_dataset(str(corpus), cache_dir=str(tmp_path / "hf-cache"))
    assert set(ds) == {"train", "validation"}
    for hf_split, split in (("train", "train"), ("validation", "valid")):
        expected = list(shards.iter_documents(corpus, split))
        assert expected and ds[hf_split].num_rows == len(expected)
        assert ds[hf_split].column_names == ["id", "source", "text", "sentences", "morphs"]
        assert sorted(ds[hf_split], key=lambda d: d["id"]) == sorted(expected, key=lambda d: d["id"])
    doc = ds["train"][0]
    s, e, tag = doc["morphs"][0]
    assert isinstance(s, int) and isinstance(tag, str) and doc["text"][s:e]  # a surface span and its tag
    stats = json.loads((corpus / "stats.json").read_text(encoding="utf-8"))
    card = (corpus / shards.CARD_FILE).read_text(encoding="utf-8")
    assert f"| train | {stats['splits']['train']['documents']:,} |" in card


def test_card_is_deterministic_and_leaves_out_empty_splits(corpus, tmp_path):
    card = (corpus / shards.CARD_FILE).read_bytes()
    entry = shards.write_dataset_card(corpus)
    assert (corpus / entry["path"]).read_bytes() == card
    # a corpus whose validation split kept nothing: datasets refuses a split without data
    empty = tmp_path / "c"
    (empty / "data").mkdir(parents=True)
    for path in shards.shard_paths(corpus, "train"):
        (empty / "data" / path.name).write_bytes(path.read_bytes())
    stats = json.loads((corpus / "stats.json").read_text(encoding="utf-8"))
    stats["splits"]["valid"]["documents"] = 0
    (empty / "stats.json").write_text(json.dumps(stats), encoding="utf-8")
    shards.write_dataset_card(empty)
    ds = datasets.load_dataset(str(empty), cache_dir=str(tmp_path / "hf-cache"))
    assert set(ds) == {"train"} and ds["train"].num_rows == stats["splits"]["train"]["documents"]
