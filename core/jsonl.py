"""Reading a JSON Lines file one object at a time (a run's ``metrics.jsonl``): a long run's log is
never held whole, and a blank line is skipped. Shared by the trainer's resume, ``kolectra report``
and the study report."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator

from kolectra.core.errors import UserInputError


def read_lines(path: Path) -> Iterator[dict]:
    """The objects of the JSON Lines file at ``path`` (a local path, or a store's path object: an
    artifact kept in s3:// or gs://), parsed one at a time."""
    with (Path(path) if isinstance(path, (str, os.PathLike)) else path).open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as e:  # an artifact's log edited or damaged since: one line, not
                    # 'internal error: JSONDecodeError' (kolectra report of a checkpoint read it so)
                    raise UserInputError(f"{path}: line {number} is no JSON ({e.msg}): the file changed or was "
                                         "damaged since it was written (kolectra artifacts verify names an "
                                         "artifact's changed files)") from None
