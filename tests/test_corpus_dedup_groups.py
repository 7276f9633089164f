"""The exact-dedup group count follows the input's uncompressed size and a setting (issue 41):
what one worker holds in KeepFirstCopies, a group, stays about ``dedup_group_bytes`` up to
terabytes of input, gzip counted as it inflates; the count never changes the artifact."""

import dataclasses
from pathlib import Path

import pytest

from kolectra.core.config import ConfigError, override
from kolectra.corpus import build, outputs
from kolectra.corpus.config import default_config
from kolectra.pipeline.configs import resolve
from kolectra.pipeline.store.request import Request

SAMPLE = Path(__file__).resolve().parents[1] / "pipeline" / "sample" / "reviews.jsonl.gz"
GB, TB = 1 << 30, 1 << 40


def _groups(path: str, stored: float, group_bytes: int = 4 << 20) -> int:
    return build.dedup_buckets(outputs.expected_input_bytes([(path, stored)]), group_bytes)


def test_the_group_count_follows_the_uncompressed_input():
    assert _groups("a.jsonl", 1 << 20) == 16  # small inputs: 16, as before
    assert _groups("a.jsonl", 1 * GB) == 256
    assert _groups("a.jsonl", 32 * GB) == 8192
    assert _groups("a.jsonl", 34 * GB) == 16384  # was 8,192 at any size past 32 GB
    # gzip is counted as it inflates (3.1x): 11 GB stored is 34 GB of text
    assert _groups("a.jsonl.gz", 11 * GB) == _groups("a.jsonl", 34.1 * GB) == 16384
    assert _groups("a.txt.zst", 1 * TB) > _groups("a.txt", 1 * TB) == 262144
    for path, stored in (("a.jsonl", 34 * GB), ("a.jsonl.gz", 100 * GB), ("a.txt", 1 * TB), ("a.txt", 4 * TB)):
        uncompressed = outputs.expected_input_bytes([(path, stored)])
        assert uncompressed / _groups(path, stored) <= 4 << 20, (path, stored)  # a group stays about 4 MB
    assert _groups("a.txt", 64 * TB) == build.MAX_DEDUP_BUCKETS == 1 << 20  # the cap
    assert _groups("a.txt", 1 * TB, group_bytes=64 << 20) == 16384  # the setting decides the size


@pytest.mark.parametrize("key", ["dedup_group_bytes", "split_bytes"])  # split_bytes: corpus/pieces.py
def test_the_group_size_is_a_setting_that_leaves_the_artifact_id(key):
    cfg = override(default_config(), [f"{key}=67108864"])
    assert getattr(cfg, key) == 64 << 20
    with pytest.raises(ConfigError, match=f"unknown config key '{key[:-1]}'"):
        override(default_config(), [f"{key[:-1]}=1"])
    with pytest.raises(ConfigError, match=f"{key} must be at least 1 KiB"):
        override(default_config(), [f"{key}=100"])
    ids = []
    for sets in ([], [f"{key}=67108864"]):
        _, config = resolve("corpus", preset="default", sets=sets)
        ids.append(Request(kind="corpus", name="c", stage_version=build.STAGE_VERSION, config=config,
                           operational=build.OPERATIONAL).id())
        assert (key in config) == bool(sets)  # recorded when set; corpora made before keep their ids
    assert ids[0] == ids[1]


def test_the_group_count_does_not_change_the_artifact(tmp_path):
    """The embedded sample (465 kB of reviews) in 16 groups and in 1,024 (1 KiB groups): same bytes."""
    trees = []
    for group_bytes in (4 << 20, 1 << 10):
        out = tmp_path / str(group_bytes)
        out.mkdir()
        build.build(dataclasses.replace(default_config(), dedup_group_bytes=group_bytes), [str(SAMPLE)], out, [])
        trees.append({p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()})
    assert _groups(str(SAMPLE), SAMPLE.stat().st_size) == 16
    assert _groups(str(SAMPLE), SAMPLE.stat().st_size, 1 << 10) == 1024
    assert trees[0] == trees[1] and any(p.parts[0] == "data" for p in trees[0])
