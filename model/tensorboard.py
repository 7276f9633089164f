"""TensorBoard event files in pure Python: scalars only, written and read back without TensorFlow.

:class:`model.metrics.MetricsLog` writes every ``metrics.jsonl`` line a second time as scalars
here, so a run can be watched with ``tensorboard --logdir ARTIFACT/tensorboard``; the
``tensorboard`` package stays out of kolectra's dependencies (it is only needed to look). The
format, written from its description rather than TensorBoard's code:

- the file is a sequence of TFRecords: ``uint64`` little-endian length, ``uint32`` masked CRC32C
  of those 8 bytes, the data, ``uint32`` masked CRC32C of the data (tensorflow/core/lib/io/record_writer.cc);
- each record is a ``tensorflow.Event`` protobuf (tensorflow/core/util/event.proto): 1 wall_time
  (double), 2 step (int64), 3 file_version (``"brain.Event:2"``, the file's first record), 5 summary;
  ``Summary``: repeated 1 value; ``Summary.Value``: 1 tag (string), 2 simple_value (float).

The protobuf is encoded by hand (a varint and a length prefix are all it takes), so neither
``protobuf`` nor any ``.proto`` file is involved. Values are stored as float32, as TensorBoard
stores them. :func:`read_events` parses a file back, checking both CRCs, for the tests and tooling.
"""

from __future__ import annotations

import math
import struct
import time
from pathlib import Path

FILE_VERSION = "brain.Event:2"


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        for _ in range(8):
            n = (n >> 1) ^ 0x82F63B78 if n & 1 else n >> 1
        table.append(n)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), the checksum of TFRecords; ``crc32c(b"123456789") == 0xE3069283``."""
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# -- protobuf encoding: tag = field number << 3 | wire type (0 varint, 1 64-bit, 2 bytes, 5 32-bit).
def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative int64 as two's complement, the protobuf way
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _bytes_field(field: int, data: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _float32(value: float) -> bytes:
    try:
        return struct.pack("<f", value)
    except OverflowError:  # finite but beyond float32: what a float32 cast gives
        return struct.pack("<f", math.copysign(math.inf, value))


def encode_event(wall_time: float, step: int = 0, scalars: dict[str, float] | None = None,
                 file_version: str | None = None) -> bytes:
    out = _varint(1 << 3 | 1) + struct.pack("<d", wall_time) + _varint(2 << 3 | 0) + _varint(step)
    if file_version is not None:
        out += _bytes_field(3, file_version.encode())
    if scalars:
        values = b"".join(_bytes_field(1, _bytes_field(1, tag.encode()) + _varint(2 << 3 | 5) + _float32(v))
                          for tag, v in scalars.items())
        out += _bytes_field(5, values)
    return out


def frame(data: bytes) -> bytes:
    """One TFRecord."""
    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", masked_crc(header)) + data + struct.pack("<I", masked_crc(data))


class EventWriter:
    """Writes a new event file at ``path`` (replacing one that is there), starting with its version record."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.file = path.open("wb")
        self.file.write(frame(encode_event(time.time(), file_version=FILE_VERSION)))

    def scalars(self, step: int, values: dict[str, float], wall_time: float | None = None) -> None:
        """One event holding ``values`` (tag -> number) for ``step``."""
        self.file.write(frame(encode_event(time.time() if wall_time is None else wall_time, step, values)))

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.close()


# -- reading back ---------------------------------------------------------------------------
class CorruptEventFile(ValueError):
    """A record whose length, CRC or protobuf does not check out; the message names file and offset."""


def _read_varint(buf: bytes, i: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = buf[i]  # IndexError on a cut varint: reported by the caller
        n |= (b & 0x7F) << shift
        i, shift = i + 1, shift + 7
        if not b & 0x80:
            return n, i


def _fields(buf: bytes):
    """(field number, value) pairs of a message: ints for varints, bytes for the rest."""
    i = 0
    while i < len(buf):
        key, i = _read_varint(buf, i)
        wire = key & 7
        if wire == 0:
            value, i = _read_varint(buf, i)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, i = buf[i:i + size], i + size
        elif wire == 2:
            size, i = _read_varint(buf, i)
            value, i = buf[i:i + size], i + size
        else:
            raise ValueError(f"unsupported wire type {wire}")
        if i > len(buf):
            raise ValueError("message cut short")
        yield key >> 3, value


def _decode_event(data: bytes) -> tuple[int, float, dict[str, float]]:
    step, wall, scalars = 0, 0.0, {}
    for field, value in _fields(data):
        if field == 1:
            wall = struct.unpack("<d", value)[0]
        elif field == 2:
            step = value - (1 << 64) if value >= 1 << 63 else value
        elif field == 5:
            for f, v in _fields(value):
                if f == 1:
                    parts = dict(_fields(v))
                    if 2 in parts:  # simple_value; other kinds of values are not kolectra's
                        scalars[parts[1].decode()] = struct.unpack("<f", parts[2])[0]
    return step, wall, scalars


def iter_events(path: Path):
    """(step, wall_time, {tag: value}) per event holding scalars, in file order; raises
    :class:`CorruptEventFile` at the first record that does not check out (those before it are yielded)."""
    buf = Path(path).read_bytes()
    pos = 0
    while pos < len(buf):
        header = buf[pos:pos + 12]
        where = f"{path}: record at byte {pos}"
        if len(header) < 12:
            raise CorruptEventFile(f"{where}: truncated header ({len(header)} of 12 bytes)")
        length, crc = struct.unpack("<QI", header)
        if crc != masked_crc(header[:8]):
            raise CorruptEventFile(f"{where}: length CRC mismatch")
        data, tail = buf[pos + 12:pos + 12 + length], buf[pos + 12 + length:pos + 16 + length]
        if len(data) < length or len(tail) < 4:
            raise CorruptEventFile(f"{where}: truncated ({len(buf) - pos} bytes left, record needs {length + 16})")
        if struct.unpack("<I", tail)[0] != masked_crc(data):
            raise CorruptEventFile(f"{where}: data CRC mismatch")
        try:
            step, wall, scalars = _decode_event(data)
        except (ValueError, IndexError, struct.error, UnicodeDecodeError) as e:
            raise CorruptEventFile(f"{where}: not an Event protobuf ({e})") from None
        if scalars:
            yield step, wall, scalars
        pos += 16 + length


def read_events(path: Path) -> list[tuple[int, float, dict[str, float]]]:
    """All scalar events of an event file (the version record left out); see :func:`iter_events`."""
    return list(iter_events(path))
