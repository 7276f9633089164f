"""Reading a ``--config`` file (TOML, or YAML with PyYAML) into a table, with bounds on what it costs.

:func:`kolectra.core.config.read_config_file` turns the table into ``key=value`` assignments. A
settings file is small and flat, so anything else is refused in one line naming the file before it
can hang or fill memory: only a regular file (a FIFO or ``/dev/zero`` would block or never end), at
most :data:`MAX_BYTES`; no YAML aliases (an alias "bomb" of a kilobyte expands to gigabytes, and a
self-referencing anchor makes a cycle), no duplicate keys (TOML refuses them too), nesting at most
:data:`MAX_DEPTH` deep; and whatever else a parser refuses (an integer of thousands of digits,
invalid UTF-8) is the same kind of one line. A UTF-8 byte-order mark is accepted, as YAML does.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from kolectra.core.errors import UserInputError

MAX_BYTES = 1 << 20  # 1 MiB: a settings file is a few hundred bytes
MAX_DEPTH = 32  # settings nest two or three tables deep


def read_table(path: Path, error: type[UserInputError]) -> dict:
    """The file's top-level table; every refusal is ``error("--config PATH: ...")``."""
    def refuse(why: str) -> UserInputError:
        return error(f"--config {path}: {' '.join(str(why).split())[:300]}")

    text = _read_bytes(path, refuse)
    try:
        doc = _yaml(text) if path.suffix.lower() in (".yaml", ".yml") else _toml(text)
    except RecursionError:
        raise refuse(f"nested more than {MAX_DEPTH} deep") from None
    except UnicodeDecodeError as e:
        raise refuse(f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    except ValueError as e:  # the parsers' own errors, and int()'s digit limit inside them
        digits = "integer string conversion" in str(e)
        raise refuse("a number longer than Python reads (4300 digits)" if digits else e) from None
    if not isinstance(doc, dict):
        raise refuse(f"expected a table of settings (key = value), got {type(doc).__name__}")
    if nested_deeper(doc, MAX_DEPTH):
        raise refuse(f"nested more than {MAX_DEPTH} deep")
    return doc


def _read_bytes(path: Path, refuse) -> bytes:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise refuse("not a regular file (a settings file is read whole: a pipe or device could "
                          "block or never end)")
        # O_NONBLOCK: a file swapped for a FIFO after the check opens at once instead of waiting
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise refuse(e.strerror or e) from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise refuse("not a regular file")
        text = f.read(MAX_BYTES + 1)
    if len(text) > MAX_BYTES:
        raise refuse(f"larger than {MAX_BYTES} bytes: not a settings file")
    return text


def _toml(text: bytes) -> dict:
    import tomllib  # noqa: PLC0415

    try:
        return tomllib.loads(text.decode("utf-8-sig"))  # -sig: a leading BOM, as Windows editors write
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"not valid TOML: {e}") from None


def _yaml(text: bytes):
    try:
        import yaml  # noqa: PLC0415 - optional
    except ImportError:
        raise ValueError("reading YAML needs PyYAML (pip install pyyaml); or write the file as TOML") from None

    class Loader(yaml.SafeLoader):
        """SafeLoader without aliases, duplicate keys or deep nesting."""

        depth = 0

        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                mark = self.peek_event().start_mark
                raise yaml.composer.ComposerError(None, None, "aliases (*name) are not accepted in a settings "
                                                  "file: write the value out", mark)
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise RecursionError
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, (str, int, float, bool)) or key is None:
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"duplicate key {key!r}", key_node.start_mark)
                    seen.add(key)
            return super().construct_mapping(node, deep=deep)

    try:
        return yaml.load(text, Loader=Loader) or {}  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as e:
        where = f" (line {e.problem_mark.line + 1}, column {e.problem_mark.column + 1})" if e.problem_mark else ""
        raise ValueError(f"not valid YAML: {e.problem or e.context}{where}") from None
    except yaml.YAMLError as e:
        raise ValueError(f"not valid YAML: {e}") from None


def nested_deeper(value, limit: int) -> bool:
    """Whether ``value`` nests dicts and lists more than ``limit`` levels (itself level 1); iterative,
    so no nesting is too deep to measure (a settings file here, a JSON Lines row in finetune)."""
    todo = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return True
            todo.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return False
