"""`python -m shadowtwin`, and the entry point for spark-submit: the same command line as `shadowtwin`.

    spark-submit --master spark://host:7077 shadowtwin/__main__.py twin run --bootstrap broker:9092

spark-submit starts the driver JVM first; the twin's session builder then joins that session
(getOrCreate) and the master given to spark-submit wins. The project must be installed on the
driver and on every executor's Python (the operator imports `state` and `schemas` there).
"""

import sys

from shadowtwin.cli import main

if __name__ == "__main__":
    sys.exit(main())
