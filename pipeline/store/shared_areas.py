"""Private areas several roots may share, and where a build directory may be renamed: a root's mark on what
it builds in a ``.tmp`` or ``.work`` that is a link, and the check that a build can be published by a rename.

:mod:`.workspace` lays out a root's private areas; ``docs/artifacts.md`` allows a ``.tmp`` or ``.work`` that is
a link (a scratch folder, maybe another root's). Two things follow, kept here:

- roots sharing such an area must not take each other's builds: a root marks a ``.tmp`` entry's name
  (``<kind>-r<8 hex>-<id>-<hex8>``) and a run's ``request.json`` (``root``) with a hash of its real path
  (:func:`mark`), kept in ``ROOT/.kolectra-root.json`` (:func:`claim`) so that a root moved keeps it;
  :func:`foreign` and :func:`own` read the name's mark;
- a build is published by ``os.rename``, which cannot cross file systems or mount points: :func:`crossing`
  refuses such an area (or a kind folder on another disk) before the stage runs, not once it has built.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import uuid
from pathlib import Path

_MARK = re.compile(r"r[0-9a-f]{8}")
_MARKED = re.compile(r"-(?P<mark>r[0-9a-f]{8})-[0-9a-f]{16}-[0-9a-f]{8}$")  # a .tmp entry of a root whose .tmp is a link


# a root that marks what it builds in a shared area keeps its mark here, so that the root moved (renamed) keeps it:
# the mark was a hash of its real path alone, and a root moved after a kill lost its complete builds left there
ROOT_MARK = ".kolectra-root.json"


def _kept(root: Path | str) -> dict:
    try:
        found = json.loads((Path(root) / ROOT_MARK).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    ok = isinstance(found, dict) and isinstance(found.get("path"), str) and _MARK.fullmatch(str(found.get("mark")))
    return found if ok else {}


def mark(root: Path) -> str:
    """What a root whose private area is a link (maybe shared with other roots) marks its build directories there
    with (in a ``.tmp`` entry's name, in a run's ``request.json``): ``r`` and 8 hex digits of the root's real path
    when it first marked one (:func:`claim` keeps it in ``ROOT/.kolectra-root.json``), so a root moved keeps its
    mark; a copy of a root (its original still where the file says, with the same mark, another folder) takes its
    own; the same folder seen at another path (a bind mount, an NFS export mounted twice) keeps it. Reads only (a
    read-only command calls it: ``artifacts list``, ``gc --dry-run``); a root moved is said so in its file by the
    next command that writes in it (:func:`settle`)."""
    return _read(root)[0]


def _read(root: Path) -> tuple[str, bool]:
    """:func:`mark`, and whether the root was moved since its file was written (the file names where it was)."""
    real = os.path.realpath(root)
    made = "r" + hashlib.sha256(real.encode()).hexdigest()[:8]
    kept = _kept(root)
    if not kept or kept["path"] == real or _same(kept["path"], real):
        return kept.get("mark", made), False  # (the same folder at another path: a bind mount, an NFS export mounted twice)
    if _kept(kept["path"]).get("mark") == kept["mark"]:
        return made, False  # a copy: the original is where the file says
    return kept["mark"], True


def settle(root: Path) -> None:
    """A root moved: its file says where it is now (its mark kept), so that a copy made from here is told apart.
    Called by what writes in the root (a build's :func:`claim`, the sweep of a build or of ``gc``), never by a
    read-only command (before 2026-12-02 ``artifacts list`` and ``gc --dry-run`` rewrote it)."""
    found, moved = _read(root)
    if moved:
        _keep(root, found, os.path.realpath(root))


def _same(path: str, real: str) -> bool:
    try:
        return os.path.samefile(path, real)
    except (OSError, ValueError):  # ValueError: a path no file system takes (a NUL byte), in a mark file from elsewhere
        return False


def claim(root: Path) -> str:
    """:func:`mark`, kept in the root (written when missing) before the root marks a build directory in a shared
    area. A file another process wrote since :func:`mark` looked (its first build at once, maybe at another path of
    the same folder) is looked at again, not written over (its build is named with that mark); a copy's is; a
    moved root's is said where it is now (:func:`settle`)."""
    settle(root)
    found = mark(root)
    if _kept(root).get("mark") == found or (kept := _kept(root)).get("mark") == (found := mark(root)):
        return found
    # none yet: made only where still none (link fails on one made since: that one's mark); a copy's: written over
    return found if _keep(root, found, os.path.realpath(root), made=not kept) else mark(root)


def _keep(root: Path, found: str, real: str, made: bool = False) -> bool:
    """Write the root's mark file (``made``: only where there is none yet); False where another process made one
    first."""
    part, into = Path(root) / f"{ROOT_MARK}.{uuid.uuid4().hex[:8]}.part", Path(root) / ROOT_MARK  # (a kill's: swept)
    try:
        part.write_text(json.dumps({"mark": found, "path": real}) + "\n", encoding="utf-8")
        try:
            os.link(part, into) if made else os.replace(part, into)
        except FileExistsError:
            if _kept(root):
                return False
            os.replace(part, into)  # (over one that cannot be read: made again)
        except OSError:
            if not made:
                raise
            os.replace(part, into)  # no hard links on this file system (FAT, some FUSE mounts)
    except OSError:  # not writable (a read-only root), or full: the hash of its path, as before
        pass
    finally:
        with contextlib.suppress(OSError):
            part.unlink()
    return True


def foreign(root: Path, d: Path) -> bool:
    """Whether the ``.tmp`` entry ``d`` was made by another root sharing this ``.tmp`` (its name's mark says so;
    unmarked: made by a root whose ``.tmp`` is its own folder, or by a kolectra before 2026-12-02). Such a complete
    build is that root's artifact (a kill between ``--force``'s renames left it there): another root's sweep
    published it as its own, and that root lost it; its own next build publishes it."""
    found = _MARKED.search(d.name)
    return found is not None and found["mark"] != mark(root)


def made_by(d: Path) -> str | None:
    """The mark in the ``.tmp`` entry ``d``'s name (None: unmarked)."""
    found = _MARKED.search(d.name)
    return found["mark"] if found else None


def own(root: Path, d: Path) -> bool:
    """Whether ``d`` is a ``.tmp`` entry this root marked (:func:`mark`)."""
    found = _MARKED.search(d.name)
    return found is not None and found["mark"] == mark(root)


def others_run(root: Path, run: Path, request: Path, made: str | None) -> str:
    """Why ``root`` does not build in the run folder ``run`` of another root sharing its ``.work`` (``made``: the
    mark its ``request`` names; None: unmarked, in a ``.work`` that is a link): one line, with the way out."""
    whose = (f"its {request.name} names root {made}, this root is {mark(root)}" if made else
             f"its {request.name} names no root: a run of the root whose own folder {run.parent.resolve()} is, which "
             f"marks none, or one this root made before 2026-12-02 (to continue it here, add \"root\": "
             f"\"{mark(root)}\" to {request})")
    return (f"{run} is the run of this request of another root sharing {run.parent} ({whose}): build it from that "
            "root (which continues or publishes it), or delete that folder to build it here")


# the name's start of :func:`crossing`'s empty probe folder, renamed on into ``ROOT/<kind>`` for an instant (a kill may
# leave it there): no artifact's (Catalog.scan passes over it)
PROBE = ".kolectra-rename-"


def crossing(root: Path, area: str, kind: str | None = None) -> str | None:
    """Why a build in the private area ``ROOT/<area>`` could not be published (or a copy moved aside there): it is
    on another file system or mount than ``root`` (a link to a scratch disk), and a rename cannot cross them; or
    ``ROOT/<kind>``, where it is published, is (a disk mounted there); or None. Found by renaming an empty folder
    from there into ``root`` (and on into ``ROOT/<kind>`` where that folder is), before the stage runs: such a
    build failed only once built (``Invalid cross-device link``), and a resumed pretraining did again."""
    src = root / area
    if src.is_symlink() and not src.exists():  # the build failed making its folder there: '.tmp: File exists'
        return (f"{src} is a link to {os.readlink(src)}, which is not there (a root moved with a relative link, or "
                f"the folder it led to deleted): make it lead to a folder on {root}'s file system, or remove it "
                f"({area} is then made in {root})")
    into = kind is not None and (root / kind).is_dir() and not (root / kind).is_symlink()
    if not src.is_dir() and not into:  # none yet: made in the root, on its file system
        return None
    # none yet: the probe starts in the root, where the area is made
    probe = (src if src.is_dir() else root) / f"{PROBE}{uuid.uuid4().hex[:8]}"  # no build's name
    try:
        probe.mkdir()
    except OSError:
        return None  # not writable: the build says so where it writes, as before
    try:
        if probe.parent != root:
            os.rename(probe, root / probe.name)
            probe = root / probe.name
        if into:
            for left in (root / kind).glob(f"{PROBE}*"):  # a kill between rename and rmdir left it
                with contextlib.suppress(OSError):
                    left.rmdir()
            os.rename(probe, root / kind / probe.name)
            probe = root / kind / probe.name
    except OSError as e:
        if e.errno != errno.EXDEV:
            return None
        if probe.parent == root:  # into the root it went: ROOT/<kind> is the other file system
            return (f"{root / kind} is another file system (or mount) than {root}: a build is published by renaming "
                    f"it from {src} into {root / kind}, which cannot cross file systems nor mount points; mount the "
                    f"disk at the root instead (--out on it), or make {kind} a folder of {root}")
        led = f" (it leads to {src.resolve()})" if src.is_symlink() else ""
        return (f"{src} is on another file system (or mount) than {root}{led}: a build is published by renaming it "
                f"from there into {root}, which cannot cross file systems nor mount points; make {area} a folder of "
                f"{root}, or a link to a folder on its file system")
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()
    return None
