"""`python -m shadowtwin`, the `shadowtwin` script, and the entry point for spark-submit: the command line.

    spark-submit --master spark://host:7077 shadowtwin/__main__.py twin run --bootstrap broker:9092

spark-submit starts the driver JVM first; the twin's session builder then joins that session
(getOrCreate) and the master given to spark-submit wins. The project must be installed on the
driver and on every executor's Python (the operator imports `state` and `schemas` there).

The command line's modules take a moment to import: Ctrl-C meanwhile ends as Ctrl-C in a
command does (`shadowtwin: interrupted`, exit status 130), not with a traceback.

A standard stream the caller closed (`<&-`, `2>&-`) is opened on /dev/null, so that no file the
command opens takes its number (and a child's output, the broker's or Spark's); closed standard
output is refused, as a write error, in one line (exit status 2): what the command says would be lost.
"""

import os
import sys

from shadowtwin.errors import interrupted


def main() -> int:
    if 1 in _closed_to_devnull():
        print("shadowtwin: standard output is closed (>&-): what it prints would be lost; send it to /dev/null"
              " instead", file=sys.stderr)
        return 2
    try:
        from shadowtwin.cli import main as command_line
    except KeyboardInterrupt:
        return interrupted("shadowtwin")
    return command_line()


def _closed_to_devnull() -> list[int]:
    """The standard descriptors that were closed, each now open on /dev/null."""
    closed = []
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            setattr(sys, name, open(fd, mode, closefd=False))
            closed.append(fd)
    return closed


if __name__ == "__main__":
    sys.exit(main())
