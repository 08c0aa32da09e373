"""Errors a user can act on.

`InputError` is the single base for "the input is wrong" (bad table, bad option, infeasible
demand): the command line turns it into a one-paragraph message and exit code 2. Anything else
escaping is an internal failure (exit code 1).
"""

from __future__ import annotations


class InputError(ValueError):
    """The user's input (file, table, option, model) is unusable; the message says why."""


def first_line(exc: BaseException) -> str:
    """`SyntaxError: invalid syntax (mod.py, line 3)`: an error's type and first line (at most
    300 characters), to quote a failure of a user's code in one paragraph."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:300] if lines else ''}".rstrip(": ")
