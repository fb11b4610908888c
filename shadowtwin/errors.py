"""A person's mistake, as the command line reports it: one line on stderr, exit status 2.

    raise UsageError(f"--speed: expected a positive number or max, got {text!r}")

`shadowtwin.cli.main` is the one place that turns these (and the lower layers' bad-input
errors: a missing or unreadable file, a garbled recording, a refused setting) into that line;
`--debug` shows the traceback instead.
"""

from __future__ import annotations


class UsageError(Exception):
    """Bad input named by its message (the file or argument, and the problem)."""
