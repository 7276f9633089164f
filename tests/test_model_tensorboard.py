"""TensorBoard event files: CRC32C, the hand-made protobuf, damage detection, and a real pretrain run's
scalars against its metrics.jsonl, before and after a resume."""

from __future__ import annotations

import json
import re
import struct

import pytest

from kolectra.model import metrics, objectives, train
from kolectra.model.tensorboard import (FILE_VERSION, CorruptEventFile, EventWriter, crc32c, encode_event, frame, masked_crc,
                               read_events)
from tests.test_model_checkpoint import _cfg, inputs  # noqa: F401  (inputs: a module fixture)


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def test_crc32c_check_values():
    assert crc32c(b"123456789") == 0xE3069283  # the CRC catalogue's check value
    assert crc32c(bytes(32)) == 0x8A9136AA and crc32c(b"\xff" * 32) == 0x62A8AB43  # RFC 3720 B.4
    assert crc32c(b"") == 0


def test_records_are_framed_with_masked_crcs():
    record = frame(b"123456789")
    assert record[:8] == struct.pack("<Q", 9) and record[12:21] == b"123456789" and len(record) == 25
    # crc32c = 0xE3069283, rotated right by 15 bits, plus 0xa282ead8 (mod 2**32)
    assert record[21:] == struct.pack("<I", 0xC78AB0E5)
    assert record[8:12] == struct.pack("<I", masked_crc(record[:8]))


def test_event_bytes_follow_event_proto():
    # Worked out by hand from event.proto: 09 = field 1 (double), 10 = field 2 (varint),
    # 2a = field 5 (bytes), 0a = field 1 (bytes), 15 = field 2 (32-bit float).
    expected = bytes.fromhex("09" "000000000000f83f" "10" "07" "2a0a" "0a08" "0a0161" "15" "0000003f")
    assert encode_event(1.5, 7, {"a": 0.5}) == expected
    assert encode_event(0.0, 300, file_version="v")[9:] == bytes.fromhex("10ac02" "1a0176")


def test_scalars_round_trip_at_float32_precision(tmp_path):
    path = tmp_path / "tb" / "events.out.tfevents.x"
    w = EventWriter(path)
    w.scalars(1, {"loss/total": 3.14159265358979, "학습률": 1e-4}, wall_time=1700000000.123456)
    w.scalars(2**40, {"x": -2.5e-8, "big": 1e39}, wall_time=1700000001.5)
    w.close()
    data = path.read_bytes()
    assert FILE_VERSION.encode() in data[12:12 + struct.unpack("<Q", data[:8])[0]]  # the first record
    assert read_events(path) == [
        (1, 1700000000.123456, {"loss/total": _f32(3.14159265358979), "학습률": _f32(1e-4)}),
        (2**40, 1700000001.5, {"x": _f32(-2.5e-8), "big": float("inf")}),  # beyond float32: inf
    ]
    assert _f32(3.14159265358979) != 3.14159265358979  # the comparison above is at float32


def test_damaged_records_are_clear_errors(tmp_path):
    path = tmp_path / "events.out.tfevents.x"
    w = EventWriter(path)
    for step in (1, 2):
        w.scalars(step, {"loss": float(step)}, wall_time=0.0)
    w.close()
    good = path.read_bytes()
    offsets, pos = [], 0
    while pos < len(good):  # [version][step 1][step 2]
        offsets.append(pos)
        pos += 16 + struct.unpack("<Q", good[pos:pos + 8])[0]
    assert len(offsets) == 3 and pos == len(good)
    second = offsets[2]  # the step-2 record
    where = re.escape(f"{path}: record at byte {second}: ")

    def damaged(data: bytes, match: str):
        path.write_bytes(data)
        with pytest.raises(CorruptEventFile, match=match):
            read_events(path)

    flipped = bytearray(good)
    flipped[second + 14] ^= 0x01  # a data byte of the step-2 record
    damaged(bytes(flipped), where + "data CRC mismatch")
    flipped = bytearray(good)
    flipped[second + 1] ^= 0x01  # its length
    damaged(bytes(flipped), where + "length CRC mismatch")
    damaged(good[:-3], where + rf"truncated \({len(good) - 3 - second} bytes left, record needs {len(good) - second}\)")
    damaged(good[:second + 5], where + "truncated header")


def test_every_metric_has_a_tag_of_its_own():
    keys = set(metrics.MEAN_KEYS) | set(metrics.RATIOS) | {"disc_auc", "lr", "tokens_per_s", "mfu"}
    assert keys <= set(metrics.TAGS)
    assert len(set(metrics.TAGS.values())) == len(metrics.TAGS)
    assert metrics.scalars({"step": 3, "loss": 2, "gen_acc": None, "xla_compiles": 2}) == {
        "loss/total": 2.0, "device/xla_compiles": 2.0}


def _events(out):
    return read_events(out / "tensorboard" / "events.out.tfevents.kolectra")


def _assert_events_match_metrics(out):
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    events = _events(out)
    assert [e[0] for e in events] == [r["step"] for r in rows]
    for (_, _, values), row in zip(events, rows):
        expected = {metrics.TAGS[k]: v for k, v in row.items() if k != "step" and v is not None}
        assert {"loss/total", "loss/discriminator", "disc/auc", "train/lr", "perf/tokens_per_s"} <= set(expected)
        assert values == pytest.approx(expected, rel=1e-6, abs=1e-30)
    return events


def test_pretrain_events_match_metrics_before_and_after_resume(inputs, tmp_path, monkeypatch):  # noqa: F811
    examples, tok = inputs
    cfg = _cfg(steps=12, save_every=6)
    real, calls = objectives.STEPS["electra"], []

    def failing(*a, **k):  # fails inside step 10: lines 1-9 written, checkpoint at step 6
        calls.append(1)
        if len(calls) == 10:
            raise RuntimeError("simulated crash")
        return real(*a, **k)

    monkeypatch.setitem(objectives.STEPS, "electra", failing)
    with pytest.raises(RuntimeError, match="simulated crash"):
        train.pretrain(cfg, examples, tok, tmp_path)
    before = _assert_events_match_metrics(tmp_path)
    assert [e[0] for e in before] == list(range(1, 10))
    event_file = tmp_path / "tensorboard" / "events.out.tfevents.kolectra"
    event_file.write_bytes(event_file.read_bytes()[:-7])  # a record cut by the crash: the rest still serves

    monkeypatch.setitem(objectives.STEPS, "electra", real)
    result = train.pretrain(cfg, examples, tok, tmp_path, resume=True)
    assert result.stats["resumed_from_step"] == 6
    after = _assert_events_match_metrics(tmp_path)
    assert [e[0] for e in after] == list(range(1, 13))  # steps 7-9 once, not twice
    assert [e[1] for e in after[:6]] == [e[1] for e in before[:6]]  # the kept steps keep their wall times
    assert min(e[1] for e in after[6:]) > max(e[1] for e in before)
