"""`python -m shadowtwin`, the `shadowtwin` script, and the entry point for spark-submit: the command line.

    spark-submit --master spark://host:7077 shadowtwin/__main__.py twin run --bootstrap broker:9092

spark-submit starts the driver JVM first; the twin's session builder then joins that session
(getOrCreate) and the master given to spark-submit wins. The project must be installed on the
driver and on every executor's Python (the operator imports `state` and `schemas` there).

The command line's modules take a moment to import: Ctrl-C meanwhile ends as Ctrl-C in a
command does (`shadowtwin: interrupted`, exit status 130), not with a traceback.
"""

import sys

from shadowtwin.errors import interrupted


def main() -> int:
    try:
        from shadowtwin.cli import main as command_line
    except KeyboardInterrupt:
        return interrupted("shadowtwin")
    return command_line()


if __name__ == "__main__":
    sys.exit(main())
