"""The one rule for a relative file name that came from data (a manifest entry, an object key read
from a store): a plain path below its directory. Pure and import-light, so the store's checks
(``core/storage.py``) and the manifest's (``pipeline/store/manifest.py``) share it."""

from __future__ import annotations

import re
from typing import Any

NAME_MAX = 255  # bytes in one file name on Linux's, macOS's and Windows' file systems


def relative_path_problem(name: Any, leaves: str) -> str | None:
    """Why ``name`` may not name a file below a directory, or None: no ``..``, ``.`` or empty part,
    no absolute or drive path, no backslash, no NUL, no part over NAME_MAX bytes. ``leaves`` names the directory in the message."""
    if not isinstance(name, str) or not name:
        return "is not a file name"
    if name.startswith("/") or "\\" in name or "\0" in name or re.match(r"^[A-Za-z]:", name):
        return "is an absolute or foreign path"
    if any(part in ("", ".", "..") for part in name.split("/")):
        return f"leaves {leaves} (empty, '.' or '..' part)"
    if any(len(part.encode("utf-8", "surrogatepass")) > NAME_MAX for part in name.split("/")):
        return f"has a part longer than {NAME_MAX} bytes, which no file system holds"
    return None
