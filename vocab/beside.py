"""A piece of the vocab stage in a process of its own: ``python -m kolectra.vocab.beside REQUEST ANSWER``.

Stage: corpus -> **vocab** -> examples. With more than one CPU, :mod:`vocab.build` counts runs of
the corpus's shards here (:mod:`vocab.count`) and learns the plain-WordPiece baseline here beside
the chosen recipe (each learner is one thread of merges). The process is a fresh interpreter
started with ``-m``, not multiprocessing's spawn or forkserver, which import the caller's main
script again: a script that builds a vocabulary without an ``if __name__ == "__main__"`` guard
would run a second time, side effects and all. The request (a module-level function of kolectra,
pickled by name, and its arguments) and the answer (its value and seconds; or the error) travel
as pickle files in a private temporary directory.
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import time
from typing import Any, Callable

from kolectra.core import scratch
from kolectra.core.stage import warn


class Beside:
    """``fn(*args, **kwargs)`` running in a process of its own from the moment this is made;
    :meth:`result` waits for it. ``what`` names the work in the warning if the process dies."""

    def __init__(self, what: str, fn: Callable, *args, **kwargs) -> None:
        self.what, self._call = what, (fn, args, kwargs)
        self._dir = scratch.mkdtemp("vocab")
        request, self._answer = os.path.join(self._dir, "request.pkl"), os.path.join(self._dir, "answer.pkl")
        with open(request, "wb") as f:
            pickle.dump(self._call, f, protocol=pickle.HIGHEST_PROTOCOL)
        # the child finds kolectra where this process did (a source tree on sys.path included); in a
        # session of its own, Ctrl-C at the terminal reaches only this process, which stops it (stop)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self.process = subprocess.Popen([sys.executable, "-m", "kolectra.vocab.beside", request, self._answer],
                                        env=env, start_new_session=True)

    def result(self) -> tuple[Any, float]:
        """(value, seconds). If the process died without answering (killed for memory, say), the
        stage warns and does the work here; an error there is raised here."""
        code = self.process.wait()
        try:
            with open(self._answer, "rb") as f:
                ok, value = pickle.load(f)
        except (OSError, EOFError, pickle.UnpicklingError):
            ok = value = None
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)
        if ok is None:
            warn(f"vocab: the process {self.what} died (exit code {code}); doing it here instead")
            return _timed(*self._call)
        if not ok:
            raise value
        return value

    def stop(self) -> None:
        """End the process if it still runs (the stage failed or was interrupted)."""
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait()
        shutil.rmtree(self._dir, ignore_errors=True)


def _timed(fn: Callable, args: tuple, kwargs: dict) -> tuple[Any, float]:
    t0 = time.perf_counter()
    value = fn(*args, **kwargs)
    return value, round(time.perf_counter() - t0, 2)


def main(argv: list[str]) -> int:
    request, answer = argv
    with open(request, "rb") as f:
        call = pickle.load(f)
    os.remove(request)  # the arguments' copy on disk: gone even if the stage dies before it cleans up
    try:
        out = (True, _timed(*call))
    except Exception as e:  # noqa: BLE001 - handed to the stage, which raises it
        out = (False, e)
    partial = answer + ".partial"
    with open(partial, "wb") as f:
        pickle.dump(out, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(partial, answer)  # whole or absent: a process killed while writing leaves no answer
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
