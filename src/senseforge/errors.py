"""Errors raised by senseforge.

Every error a user can cause derives from :class:`SenseforgeError`; the CLI prints
one line for these (the traceback only with ``--debug``). Subclasses also inherit the
matching builtin so that callers can catch them the usual way.
"""

from __future__ import annotations


class SenseforgeError(Exception):
    """Base class for errors that carry a message meant for the user."""


class ConfigError(SenseforgeError, ValueError):
    """A setting, flag or model string is wrong; the message says how to fix it."""


class DataValidationError(SenseforgeError, ValueError):
    """A data file or record does not match the expected schema.

    The message is located: ``file:line: field: problem``.
    """


class MissingDependencyError(SenseforgeError, ImportError):
    """An optional dependency is not installed; the message names the install command."""


class BackendError(SenseforgeError, RuntimeError):
    """A model backend failed in a way that retrying will not fix."""


class StoreError(SenseforgeError, RuntimeError):
    """The cache, ledger or run store could not be opened or written."""


class RunBusy(StoreError):
    """Another process builds the run now (it holds the run's writer lease); nothing was written.

    The CLI exits with :attr:`exit_code` (75, ``EX_TEMPFAIL``: try again later) so that a caller that resumes runs
    by itself (``annotate serve --follow``) can tell a busy run from a failed one.
    """

    exit_code = 75
