"""kolectra's error family: what a command reports in one line, and what is a bug.

- :class:`UserInputError`: what was asked cannot be done as asked — a setting, an input file, a
  reference to an artifact, a flag. The user changes the request.
- :class:`EnvironmentProblem`: the request is fine but the machine or a service is not — credentials,
  an object store, a runner, a missing optional package, an accelerator that is not there. The user
  changes the environment.

Both are :class:`KolectraError`, which :mod:`kolectra.pipeline.cli.errors` turns into ``kolectra CMD:
error: ...`` and exit status 2; anything else (besides the operating system's own ``OSError``) is a
bug and gets a traceback log. Every error kolectra raises on purpose is one of these, by class: the
CLI never guesses from where an exception was raised. ``KolectraError`` is a ``ValueError`` so that
code catching a bad value keeps catching it.
"""

from __future__ import annotations


class KolectraError(ValueError):
    """A failure kolectra names on purpose; its message says what and where, in one line."""


class UserInputError(KolectraError):
    """A setting, input, reference or flag that cannot work as given."""


class EnvironmentProblem(KolectraError):
    """The machine or a service it needs: credentials, a store, a runner, a package, a device."""


# what a rank of torchrun's adds to its line when stopped (TORCHELASTIC_RUN_ID set): torchrun stops every
# rank once one ends (a refusal on rank 0 while rank 1 still loads)
BY_TORCHRUN = " (torchrun stops every rank once one ends: that rank's line says why)"


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler's or a preempted machine's stop), turned into an exception so that
    clean-up (``finally``) runs as for Ctrl-C; the command ends with status 143 (128 + 15), which
    schedulers read as stopped from outside, not failed."""
