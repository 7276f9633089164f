"""After a corpus job the launcher reads ``stats/files.jsonl`` once: the checks and the summary's
damaged-file lines share one streamed pass (the table holds a row per input file)."""

import dataclasses
import gzip

from kolectra.core import storage
from kolectra.corpus import build, outputs
from kolectra.corpus.config import default_config

LINES = ["좋은 영화였어요 정말로 추천합니다", "배우들 연기가 너무 좋았다 또 보고 싶다"]


def test_the_file_table_is_read_once_and_a_damaged_file_is_still_named(tmp_path, monkeypatch, capsys):
    root = tmp_path / "in"
    root.mkdir()
    for i in range(3):
        (root / f"f{i}.txt").write_text("\n".join(f"{LINES[j % 2]} {i}-{j}" for j in range(4)) + "\n", encoding="utf-8")
    packed = gzip.compress("".join(f"{LINES[j % 2]} z-{j}\n" for j in range(50)).encode("utf-8"))
    (root / "z.txt.gz").write_bytes(packed[: len(packed) // 2])  # cut mid-stream: a damaged file
    opened, open_file = [], storage.open_file

    def counting(path, mode="rb", *args, **kwargs):  # the real open, counted when it reads the file table
        if str(path).endswith(outputs.FILES_FILE) and "r" in mode:
            opened.append(path)
        return open_file(path, mode, *args, **kwargs)

    monkeypatch.setattr(storage, "open_file", counting)
    cfg = dataclasses.replace(default_config(), num_shards=1, max_damaged_files=1, max_reject_ratio=0.5)
    stats = build.build(cfg, [str(root / "*")], tmp_path / "out", []).stats
    assert stats["rejected_reasons"].get("damaged_file") == 1
    assert len(opened) == 1, opened
    lines = [x for x in capsys.readouterr().err.splitlines() if "damaged input" in x]
    assert len(lines) == 1 and "z.txt.gz (accepted by max_damaged_files): gzip" in lines[0], lines
