"""A local folder uploaded to a store as a whole: an export (``kolectra export --to``) or a report going to a
store, drawn in a local folder (``kolectra report``), its defining file last, and what the upload added removed again
when it fails, so that the same command can run again.

It sits on :mod:`kolectra.core.storage`, whose ``upload``, ``children`` and ``remove`` it calls by the module's
name (a test that stops ``storage.upload`` midway stops this upload too).
"""

from __future__ import annotations

import os
from pathlib import Path

from kolectra.core import storage


def upload_folder(folder: str | os.PathLike, url: str, last: str | None = None) -> None:
    """Upload ``folder``'s files to ``url``/NAME (an export, a report drawn locally), ``last`` (the file
    that makes the folder what it is: a report's report.md, an export's config.json) after the others, so
    that a process killed midway never leaves it beside files still missing. On any failure (Ctrl-C too)
    the files this upload added go, so that the same command can run again; those it replaced stay (a
    report drawn again over an older one: removing them took the older report's files), and one that
    cannot be removed (the store no longer answering) is named, never said removed."""
    before = set(storage.children(url))  # its own level only: a --dest at a bucket's top lists no more than that
    files = sorted(Path(folder).iterdir(), key=lambda f: (f.name == last, f.name))
    sent: list[str] = []
    try:
        for f in files:
            sent.append(f.name)
            storage.upload(str(f), f"{url}/{f.name}")
    except BaseException as e:
        added = [name for name in sent if name not in before]
        for i, name in enumerate(added):
            try:
                storage.remove(f"{url}/{name}")
            except Exception as why:  # noqa: BLE001 - the store's own words go into the note
                reason = " ".join(str(why).split())[:160]
                e.add_note(f"what was uploaded to {url} could not be removed ({reason}): {', '.join(added[i:])} "
                           "may be there still; remove them before the same command runs again")
                break  # the store stopped answering: each of the rest would wait as long
        else:
            e.add_note(f"the files uploaded to {url} were removed, so the same command can run again")
        raise
