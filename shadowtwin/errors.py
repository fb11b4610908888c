"""A person's mistake, as the command line reports it: one line on stderr, exit status 2.

    raise UsageError(f"--speed: expected a positive number or max, got {text!r}")

`shadowtwin.cli.main` is the one place that turns these (and the lower layers' bad-input
errors: a missing or unreadable file, a garbled recording, a refused setting) into that line;
`--debug` shows the traceback instead.

Ctrl-C where no command answers it (one that does not stop on signals by itself, or the
command line while it loads) is no mistake but ends alike: `interrupted` gives its line and
the exit status shells expect, 130.
"""

from __future__ import annotations

import signal
import sys

INTERRUPTED_STATUS = 128 + signal.SIGINT  # as if SIGINT had ended the process, without a traceback


class UsageError(Exception):
    """Bad input named by its message (the file or argument, and the problem)."""


def interrupted(command: str, how_far: str = "") -> int:
    """`<command>: interrupted [how_far]` on stderr; the exit status to end with."""
    print(f"{command}: interrupted" + (f" {how_far}" if how_far else ""), file=sys.stderr)
    return INTERRUPTED_STATUS
