"""Errors a user can act on.

`InputError` is the single base for "the input is wrong" (bad table, bad option, infeasible
demand): the command line turns it into a one-paragraph message and exit code 2. Anything else
escaping is an internal failure (exit code 1).
"""

from __future__ import annotations


class InputError(ValueError):
    """The user's input (file, table, option, model) is unusable; the message says why."""
