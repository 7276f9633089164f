"""``python -m kolectra``: the ``kolectra`` command, where no script is on the PATH (a venv not
activated, ``python3.11 -m kolectra`` to choose the interpreter). ``kolectra`` is a namespace
package with no ``__init__.py`` (its parts are the repository's top-level folders, see
pyproject.toml); this folder adds only this module to it."""

import os

from kolectra.pipeline.cli import entry

if __name__ == "__main__":  # pragma: no cover
    os.environ.setdefault("PYTHONUNBUFFERED", "1")  # for the worker processes it starts
    entry()
