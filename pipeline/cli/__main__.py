"""``python -m kolectra.pipeline.cli``: the ``kolectra`` command (the docs' ``torchrun`` line uses it)."""

import os

from kolectra.pipeline.cli import entry

if __name__ == "__main__":  # pragma: no cover
    os.environ.setdefault("PYTHONUNBUFFERED", "1")  # for the worker processes it starts
    entry()
