"""Typed configuration: frozen dataclasses, dotted-key overrides, strict loading.

Every stage keeps its settings in a frozen dataclass (nested dataclasses for groups) and a
preset is a plain function returning one. The CLI's ``--set a.b=value`` goes through
:func:`override`, which parses the value by the field's declared type and rejects keys the
dataclass does not have, so a typo is an error instead of a silently ignored setting. The
resolved config is what :func:`to_dict` returns; it is hashed into the artifact id and written
to the manifest. A ``--config FILE`` (TOML or YAML) is read by :func:`read_config_file` into the
same ``key=value`` assignments, placed before the ``--set`` flags: one resolution path, flags win.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import re
import types
import typing
from pathlib import Path
from typing import Any, Iterable, TypeVar

from kolectra.core.errors import UserInputError

T = TypeVar("T")


class ConfigError(UserInputError):
    """A bad override or config document; the message names the offending key."""


def to_dict(cfg: Any) -> dict:
    """The resolved config as plain JSON-able data (tuples become lists).

    A field declared with ``metadata={"recorded": "unless default"}`` is left out while it holds
    its default: a setting added to a stage after artifacts were made with it would otherwise
    change every existing artifact's id (the id hashes this dict) though their outputs do not
    change. :func:`from_dict` gives the default back for a key that is not there."""
    return json.loads(json.dumps(_recorded(cfg)))


def _recorded(cfg: Any) -> dict:
    out = {}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if f.metadata.get("recorded") == "unless default" and value == f.default:
            continue
        out[f.name] = _recorded(value) if dataclasses.is_dataclass(value) else value
    return out


def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _parse(raw: str, tp: Any, key: str) -> Any:
    """Parse the text ``raw`` as a value of the annotated type ``tp``."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if raw.lower() in ("none", "null") and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        errors = []
        for a in inner:
            try:
                return _parse(raw, a, key)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError("; ".join(errors))
    if tp is bool:
        low = raw.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{key}: expected a boolean, got {raw!r}")
    if tp is int:
        try:
            return int(raw)
        except ValueError:
            raise ConfigError(f"{key}: expected an integer, got {raw!r}") from None
    if tp is float:
        try:
            value = float(raw)
        except ValueError:
            raise ConfigError(f"{key}: expected a number, got {raw!r}") from None
        if math.isnan(value):  # no setting means NaN: it passed every "< 0" check and reached the manifest
            raise ConfigError(f"{key}: expected a number, got {raw.strip()} (not a number)")
        if math.isinf(value):  # every setting has a finite "off" (0); inf reached the manifest as Infinity, not JSON
            raise ConfigError(f"{key}: expected a finite number, got {raw.strip()}")
        return value
    if tp is str:
        return raw
    if origin is typing.Literal:
        for a in args:
            if str(a) == raw:
                return a
        raise ConfigError(f"{key}: expected one of {list(args)}, got {raw!r}")
    if origin in (tuple, list):
        text = raw.strip()
        if text.startswith("["):
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError as e:
                raise ConfigError(f"{key}: bad JSON list {raw!r}: {e}") from None
            nested = [x for x in parsed if x is None or isinstance(x, (dict, list))]
            if nested:  # Python's text of them ("{'a': 1}", "None") was taken as an item
                raise ConfigError(f"{key}: a list of plain values, got {json.dumps(nested[0])} in {raw!r}")
            items = [x if isinstance(x, str) else json.dumps(x) for x in parsed]
        else:
            items = [x.strip() for x in text.split(",")] if text else []
            if "" in items:  # "," or "a,,b" named nothing: a typo, not an empty list
                raise ConfigError(f"{key}: an empty item in {raw!r} (a stray comma?); an empty list is an "
                                  "empty value")
        elem = args[0] if args else str
        vals = [_parse(x, elem, key) for x in items]
        return tuple(vals) if origin is tuple else vals
    raise ConfigError(f"{key}: cannot set a field of type {tp!r} from the command line")


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Check/convert a JSON value (from a manifest or file) against the annotated type."""
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping")
        return from_dict(tp, value, prefix=key + ".")
    origin = typing.get_origin(tp)
    if value is None:
        return None
    if origin in (tuple, list):
        elem = (typing.get_args(tp) or (Any,))[0]
        vals = [_coerce(v, elem, key) for v in value]
        return tuple(vals) if origin is tuple else vals
    if tp is float and isinstance(value, int):
        return float(value)
    return value


def from_dict(cls: type[T], data: dict, prefix: str = "") -> T:
    """Build ``cls`` from a mapping; unknown keys are errors, missing keys keep defaults."""
    hints = _field_types(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(f"unknown config key(s): {', '.join(prefix + k for k in unknown)}")
    kwargs = {k: _coerce(v, hints[k], prefix + k) for k, v in data.items()}
    return cls(**kwargs)


class FileAssignment(str):
    """A ``key=value`` read from a ``--config`` file: an ordinary assignment that remembers its file,
    so an unknown key or a bad value is reported naming the file."""

    source: str

    def __new__(cls, text: str, source: str) -> "FileAssignment":
        self = super().__new__(cls, text)
        self.source = source
        return self


def override(cfg: T, assignments: Iterable[str]) -> T:
    """Apply ``key=value`` assignments (dotted keys reach nested dataclasses), then check the result.

    A config checks itself in one place, its ``validate()`` method, called here once after every
    assignment: so settings that bound each other (``min_chars``, ``max_chars``) may come in any order."""
    sources: dict[str, str | None] = {}  # key -> the file its value came from (None: the command line)
    for assignment in assignments:
        if "=" not in assignment:
            raise ConfigError(f"override {assignment!r} is not of the form key=value")
        key, raw = assignment.split("=", 1)
        source = sources[key.strip()] = getattr(assignment, "source", None)
        try:
            cfg = _set(cfg, key.strip().split("."), raw, key.strip())
        except ConfigError as e:
            raise ConfigError(f"{source}: {e}" if source else str(e)) from None
    try:
        validate(cfg)
    except ConfigError as e:  # a file's value is refused naming the file
        if (said := _sourced(str(e), sources)) == str(e):
            raise
        raise ConfigError(said) from None
    return cfg


_KEY = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def _sourced(message: str, sources: dict[str, str | None]) -> str:
    """A failed check's ``message``, told where the keys it concerns were set when a file set one of them. A
    check of one key starts with it (``KEY: ...``, ``KEY must ...``; other keys it names explain); one relating
    keys names each (``A (256) must be divisible by B (3)``, ``need 0 <= A <= B``, ``A=x ... needs B=y``): the
    file alone when it gave every one set, else each key with its source (before 2026-12-02 the file was named
    whenever it gave the first key, a bad value from --set blamed on it, and never for the second)."""
    first = _KEY.match(message)
    one = first is not None and message[first.end():].startswith((":", " must"))
    named = [first.group(0)] if one and first else list(dict.fromkeys(_KEY.findall(message)))
    given = [(key, sources[key]) for key in named if key in sources]
    files = {source for _, source in given}
    if not any(files):
        return message
    if len(files) == 1:
        return f"{files.pop()}: {message}"
    return ", ".join(f"{key} from {source or 'the command line'}" for key, source in given) + f": {message}"


def validate(cfg: Any) -> None:
    """Check a config: its ``validate()`` method raises a :class:`ConfigError` naming the key."""
    check = getattr(cfg, "validate", None)
    if check is not None:
        check()


def read_config_file(path: str | Path) -> list[str]:
    """A ``--config`` file as ``key=value`` assignments, in the file's order, for :func:`override`.

    TOML (``tomllib``), or YAML (``.yaml``/``.yml``) when PyYAML is installed. Nested tables
    flatten to dotted keys (``[train]`` ``lr = 1e-3`` is ``train.lr=1e-3``), so a file and
    ``--set`` name a setting the same way; each value is written back as ``--set`` would spell it
    and parsed by the field's type, so the two paths cannot disagree. What a file may hold (kind,
    size, no YAML aliases or duplicate keys) is :mod:`kolectra.core.config_file`'s."""
    from kolectra.core import storage  # noqa: PLC0415 - light: no store client until a URL is opened
    from kolectra.core.config_file import read_table  # noqa: PLC0415 - its bounds and parsers

    if storage.is_url(path):  # read as the local path s3:/b/k, it said 'No such file or directory'
        raise ConfigError(f"--config {path}: a URL, and a settings file is read from this machine's disk: "
                          "copy it here first")
    path = Path(storage.local_path(path))
    doc = read_table(path, ConfigError)
    pairs = list(_flatten(doc, ""))
    seen: set[str] = set()
    for key, _ in pairs:  # "train.lr" = 1 and [train] lr = 2: one key twice, as --set refuses it
        if key.strip() in seen:
            raise ConfigError(f"--config {path}: {key.strip()} is given twice (as a dotted key and inside its "
                              "table?): give each key once")
        seen.add(key.strip())
    return [FileAssignment(f"{key}={_spell(value, key, path)}", str(path)) for key, value in pairs]


def _flatten(doc: dict, prefix: str) -> Iterable[tuple[str, Any]]:
    for key, value in doc.items():
        if isinstance(value, dict):
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _spell(value: Any, key: str, path: Path) -> str:
    """A file's value as ``--set`` text: booleans lower-case, lists as JSON, null as ``none``."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        try:
            return json.dumps(list(value), ensure_ascii=False, allow_nan=True)
        except (TypeError, ValueError) as e:  # a date or a set inside a list
            raise ConfigError(f"--config {path}: {key}: cannot set this list ({e})") from None
    if isinstance(value, (int, float, str)):
        return str(value)
    raise ConfigError(f"--config {path}: {key}: cannot set a value of type {type(value).__name__}")


def _set(cfg: Any, path: list[str], raw: str, full_key: str) -> Any:
    names = [f.name for f in dataclasses.fields(cfg)]
    head = path[0]
    if head not in names:
        close = difflib.get_close_matches(head, names, n=1, cutoff=0.75)
        known = f"known at this level: {', '.join(sorted(names))}"
        if close:  # the whole dotted key, spelled right, to paste back into --set
            fixed = full_key[:len(full_key) - len(".".join(path))] + ".".join([close[0], *path[1:]])
            known = f"did you mean {fixed!r}? {known}"
        raise ConfigError(f"unknown config key {full_key!r} ({known})")
    current = getattr(cfg, head)
    if len(path) > 1:
        if not dataclasses.is_dataclass(current):
            raise ConfigError(f"{full_key}: {head!r} is not a group of settings")
        return dataclasses.replace(cfg, **{head: _set(current, path[1:], raw, full_key)})
    if dataclasses.is_dataclass(current):
        raise ConfigError(f"{full_key}: is a group; set one of its fields instead")
    tp = _field_types(type(cfg))[head]
    return dataclasses.replace(cfg, **{head: _parse(raw, tp, full_key)})


def flat_dict(config: dict, prefix: str = "") -> dict[str, Any]:
    """A resolved config as a manifest keeps it (nested dicts) as dotted key -> value: what ``artifacts list``
    and ``kolectra report`` compare and show (``train.steps``, ``objective.objective``)."""
    out: dict[str, Any] = {}
    for k, v in config.items():
        if isinstance(v, dict):
            out.update(flat_dict(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def flat_keys(cfg: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted key -> value, for printing and for naming differences between two configs."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        if dataclasses.is_dataclass(v):
            out.update(flat_keys(v, prefix + f.name + "."))
        else:
            out[prefix + f.name] = v
    return out
