"""``write_dropped`` (corpus/drops.py): every dropped document goes to ``dropped/<reason>-*.jsonl.gz``,
driven through the CLI on the real corpus job (Beam's FnApiRunner in-process, real Kiwi) over a
small file the test writes, with the production preset (quality filters and near-dup on):

- per reason, the written lines equal ``stats.json`` -> ``dropped``, exact and near duplicates
  included; every line names its source, line, id and the text as its rule saw it, sorted;
- the files are the manifest's and ``verify`` passes; a run through a staging directory (a
  remote runner's way) fetches the same bytes;
- ``samples_per_reason`` sets how many drops a reason ``samples/dropped.jsonl`` shows;
- off (the default), nothing is written and the presets' ids are the ones before either setting.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from kolectra.core import verbosity
from kolectra.core.config import ConfigError, override, to_dict
from kolectra.corpus import build, drops, outputs
from kolectra.corpus.config import default_config, production_config
from kolectra.pipeline.cli import main
from kolectra.pipeline.configs import resolve
from kolectra.pipeline.store.manifest import verify_dir
from kolectra.pipeline.store.request import Request

WORDS = "영화 정말 재밌었어요 배우 연기 최고 지루했다 스토리 감동 음악 좋았고 별로 다시 보고 싶다".split()
LONG = "처음부터 끝까지 긴장감이 넘치는 전개와 배우들의 섬세한 연기가 돋보였던 작품으로 오래 기억에 남을 것 같습니다"


def _rows() -> list[dict]:
    rows = [{"id": f"r{i}", "text": " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(6)) + f" {i}번"}
            for i in range(1, 31)]
    rows += [
        {"id": "short", "text": "굿"},  # too_short
        {"id": "copy1", "text": rows[2]["text"]},  # duplicate of r3
        {"id": "copy2", "text": rows[2]["text"]},  # duplicate of r3
        {"id": "copy3", "text": rows[4]["text"] + "  "},  # duplicate of r5 once cleaned
        {"id": "long", "text": LONG},
        {"id": "near", "text": LONG + "!"},  # near duplicate of "long"
        {"id": "english", "text": "This movie was really great, I loved every minute of it 좋아"},  # low_script_share
        {"id": "stars", "text": "★★★★★♥♥♥♥☆☆☆ 최고 영화"},  # symbols (최고 alone: too_short since corpus 21, 2 letters)
    ]
    rows += [{"id": f"short{i}", "text": w} for i, w in enumerate(["좋아", "별로", "최고!", "음"])]  # too_short
    rows.append({"id": "010-1234-5678", "text": "네"})  # too_short, its id personal data (line 43)
    return rows


@pytest.fixture(autouse=True)
def _verbosity(monkeypatch):
    monkeypatch.setenv(verbosity.ENV, str(verbosity.NORMAL))


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("dropped")
    jsonl = root / "reviews.jsonl"
    jsonl.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in _rows()), encoding="utf-8")
    return root, jsonl


def _corpus(capsys, argv: list[str]) -> Path:
    assert main(["corpus", *argv]) == 0
    return Path(capsys.readouterr().out.strip().splitlines()[-1])


def _lines(art: Path) -> dict[str, list[dict]]:
    """Each drop file's rows, by the file's path in the artifact."""
    return {str(f.relative_to(art)): [json.loads(x) for x in gzip.decompress(f.read_bytes()).decode("utf-8").splitlines()]
            for f in sorted((art / drops.DROPPED_DIR).glob("*.jsonl.gz"))}


def test_every_drop_is_written_and_counts_reconcile(made, capsys, tmp_path):
    root, jsonl = made
    art = _corpus(capsys, ["--input", str(jsonl), "--preset", "production", "--out", str(root / "store"),
                           "--set", "write_dropped=true", "--set", "num_shards=2", "--set", "samples_per_reason=2"])
    stats = json.loads((art / "stats.json").read_text(encoding="utf-8"))
    files = _lines(art)
    per_reason: dict[str, int] = {}
    for rel, rows in files.items():
        assert rows, rel  # no empty file
        assert all(r["reason"] in rel for r in rows)
        assert [(r["source"], r["line"]) for r in rows] == sorted((r["source"], r["line"]) for r in rows)
        for r in rows:
            per_reason[r["reason"]] = per_reason.get(r["reason"], 0) + 1
    assert per_reason == {k: n for k, n in stats["dropped"].items() if n}
    for reason in ("duplicate", "near_duplicate", "too_short", "low_script_share", "symbols"):
        assert per_reason.get(reason), (reason, stats["dropped"])
    rows = {r["id"]: r for rs in files.values() for r in rs}
    assert rows["short"] == {"reason": "too_short", "source": "reviews.jsonl", "line": 31, "id": "short", "text": "굿"}
    assert rows["copy3"]["reason"] == "duplicate" and rows["copy3"]["text"] == _rows()[4]["text"]  # as cleaned
    assert rows["near"]["reason"] == "near_duplicate" and rows["near"]["kept"] == ["reviews.jsonl", 35]
    assert {"copy1", "copy2"} <= set(rows)
    assert rows["reviews.jsonl:43"]["text"] == "네" and not any("1234" in i for i in rows)  # masked as a kept id is
    # samples_per_reason: 2 of the 6 too_short drops in samples/dropped.jsonl, each one of the written drops
    samples = [json.loads(x) for x in (art / "samples" / "dropped.jsonl").read_text(encoding="utf-8").splitlines()]
    assert per_reason["too_short"] == 6 and sum(r["reason"] == "too_short" for r in samples) == 2
    # an id that is personal data shows in the samples as a kept document's would (corpus 18 showed it unmasked)
    samples_all = [json.loads(x) for x in (_corpus(capsys, ["--input", str(jsonl), "--preset", "production", "--out",
                   str(root / "store"), "--set", "num_shards=2", "--set", "samples_per_reason=1000"])
                   / "samples" / "dropped.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {"reviews.jsonl:43"} <= {r["id"] for r in samples_all} and not any("1234" in r["id"] for r in samples_all)
    at = {(r["source"], r["line"]): r for r in rows.values()}
    assert all(at[r["source"], r["line"]]["reason"] == r["reason"] and at[r["source"], r["line"]]["text"] == r["text"]
               for r in samples)
    # the manifest lists the files, verify passes; the config records the setting
    manifest = json.loads((art / "manifest.json").read_text(encoding="utf-8"))
    assert set(files) <= {f["path"] for f in manifest["files"]}
    assert manifest["config"]["write_dropped"] is True
    assert verify_dir(art) == []
    # a run through a staging directory (as a remote runner writes) fetches the same drop files
    staging, out = tmp_path / "staging", tmp_path / "out"
    staging.mkdir()
    out.mkdir()
    cfg = override(production_config(), ["write_dropped=true", "num_shards=2", "samples_per_reason=2"])
    build.build(cfg, [str(jsonl)], out, ["--corpus_staging", str(staging)])
    assert {rel: (out / rel).read_bytes() for rel in files} == {rel: (art / rel).read_bytes() for rel in files}
    assert sorted(str(f.relative_to(out)) for f in (out / drops.DROPPED_DIR).iterdir()) == sorted(files)
    assert (out / "samples" / "dropped.jsonl").read_bytes() == (art / "samples" / "dropped.jsonl").read_bytes()


def test_off_by_default_nothing_is_written_and_ids_stay(made, capsys):
    root, jsonl = made
    art = _corpus(capsys, ["--input", str(jsonl), "--out", str(root / "store"), "--set", "num_shards=1"])
    assert not (art / drops.DROPPED_DIR).exists()
    assert "write_dropped" not in json.loads((art / "manifest.json").read_text(encoding="utf-8"))["config"]
    for key, value in (("write_dropped", "true"), ("samples_per_reason", "20")):
        assert key not in to_dict(default_config()) and key not in to_dict(production_config())
        for preset in ("default", "production"):
            ids = []
            for sets in ([], [f"{key}={value}"]):
                _, config = resolve("corpus", preset=preset, sets=sets)
                assert (key in config) == bool(sets)
                ids.append(Request(kind="corpus", name="c", stage_version=build.STAGE_VERSION, config=config,
                                   operational=build.OPERATIONAL).id())
            assert ids[0] != ids[1]  # the files differ, so the id does
    for bad in ("0", "1001"):
        with pytest.raises(ConfigError, match="samples_per_reason must be in"):
            override(default_config(), [f"samples_per_reason={bad}"])


def test_a_steps_waiting_drops_stay_under_the_budget(monkeypatch):
    """What a step holds of its drops is bounded by drops.BUDGET, not by how many it drops."""
    monkeypatch.setattr(drops, "BUDGET", 1 << 14)
    chunks, sent = drops.DropChunks(parts=4), []
    for i in range(2000):
        sent += chunks.add("too_short", {"source": "a.txt", "line": i + 1, "id": f"a.txt:{i + 1}", "text": f"짧다 {i}"})
        assert chunks.chunks.size < 1 << 14
    assert len(sent) > 4  # sent on the way, not all at the end
    sent += chunks.drain()
    items = [item for _, packed in sent for item in outputs.unpack_chunk(packed)]
    assert sorted(pos[1] for pos, _ in items) == list(range(1, 2001))
    assert {rel for rel, _ in sent} <= {drops.part_name("too_short", p, 4) for p in range(4)}
