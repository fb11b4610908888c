"""How the operator's input reaches it: pyspark 4.1.1's `transformWithStateInPandas` input,
cut into each group's frames by slicing columns instead of row by row.

Spark 4.1 may put the rows of several groups in one Arrow batch. Its Python worker
(`TransformWithStateInPandasSerializer.load_stream`) converts each batch to pandas, walks it
with `itertuples` (a `Timestamp` per row for the event time), and builds every group's frames
again from the row tuples with `pd.DataFrame(rows)`: a fifth of the twin's Python worker in
`benchmarks.twin` (docs/performance.md). `load_stream_by_slices` yields each group's rows as
pyspark does (the same rows in the same order, the same columns and dtypes, numbers in 64
bits), in frames of at most `maxRecordsPerBatch` rows or what `maxBytesPerBatch` allows,
sliced from each batch's columns where the grouping key changes; a group's rows in two batches
come as two frames, where pyspark joins them. `install` puts it in place of pyspark's in the
process that imports the operator: the worker, before its first task (unpickling the operator
imports this module, after the serializer is made and before it reads). It replaces exactly
the pyspark release it was compared with (tests/streaming/test_group_frames.py runs both on
the same Arrow streams), and leaves any other as it is.
"""

from __future__ import annotations

import itertools
import math
from typing import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyspark
from pyspark.sql.pandas.serializers import ArrowStreamPandasSerializer, TransformWithStateInPandasSerializer
from pyspark.sql.streaming.stateful_processor_util import TransformWithStateInPandasFuncMode

REPLACED_RELEASE = "4.1.1"
UNLIMITED_BYTES = 2**31 - 1  # the worker's default for maxBytesPerBatch
pyspark_load_stream = TransformWithStateInPandasSerializer.load_stream


def install() -> bool:
    """Read the operator's input by slices from now on in this process; False (nothing changed) on
    another pyspark release than the one compared."""
    if pyspark.__version__ != REPLACED_RELEASE:
        return False
    TransformWithStateInPandasSerializer.load_stream = load_stream_by_slices
    return True


def load_stream_by_slices(self: TransformWithStateInPandasSerializer, stream) -> Iterator[tuple]:
    """pyspark 4.1.1's `TransformWithStateInPandasSerializer.load_stream`, by column slices."""
    batches = super(ArrowStreamPandasSerializer, self).load_stream(stream)  # the Arrow batches, as pyspark reads them
    for key, group in itertools.groupby(_chunks(self, batches), key=lambda chunk: chunk[0]):
        yield TransformWithStateInPandasFuncMode.PROCESS_DATA, key, group
    yield TransformWithStateInPandasFuncMode.PROCESS_TIMER, None, None
    yield TransformWithStateInPandasFuncMode.COMPLETE, None, None


def _chunks(serializer, batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[tuple, pd.DataFrame]]:
    """(key, frame) for each run of equal keys in each batch, cut at the limits. A group's rows in
    two batches come as two frames, where pyspark joins them: joined with `pd.concat`, which checks
    every object value, they cost the twin's worker 5.6 % (docs/performance.md). One batch is held
    at a time."""
    for batch in batches:
        limit = _rows_per_chunk(serializer, batch)
        frame = _widened(pd.concat([serializer.arrow_to_pandas(column, i) for i, column
                                    in enumerate(pa.Table.from_batches([batch]).itercolumns())], axis=1))
        keys = [frame.iloc[:, offset].to_numpy(dtype=object) for offset in serializer.key_offsets]
        for start, end in _runs(keys, len(frame)):
            key = tuple(column[start] for column in keys)
            for at in range(start, end, limit):
                yield key, frame.iloc[at:min(at + limit, end)].reset_index(drop=True)


def _runs(keys: list[np.ndarray], size: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each run of rows with equal keys (compared as `itertools.groupby` compares
    them, by `==`), found by column: walking the rows' key tuples cost the worker ~3 %."""
    changed = np.zeros(max(size - 1, 0), bool)
    for column in keys:
        changed |= column[1:] != column[:-1]
    bounds = [0, *(changed.nonzero()[0] + 1).tolist(), size]
    return zip(bounds, bounds[1:]) if size else iter(())


def _rows_per_chunk(serializer, batch: pa.RecordBatch) -> int:
    """pyspark's limits on a chunk in rows, from this batch on: `maxRecordsPerBatch`, and with a byte
    limit, as many rows as fit at the average row size of the batches so far (pyspark's own count)."""
    limit = serializer.arrow_max_records_per_batch
    if serializer.arrow_max_bytes_per_batch == UNLIMITED_BYTES or batch.num_rows == 0:
        return limit
    serializer.total_bytes += sum(buf.size for column in batch.columns for buf in column.buffers() if buf is not None)
    serializer.total_rows += batch.num_rows
    serializer.average_arrow_row_size = serializer.total_bytes / serializer.total_rows
    if serializer.average_arrow_row_size <= 0:
        return limit
    return max(1, min(limit, math.ceil(serializer.arrow_max_bytes_per_batch / serializer.average_arrow_row_size)))


def _widened(frame: pd.DataFrame) -> pd.DataFrame:
    """Numbers as 64 bits: pyspark's frames are built from the rows' Python ints and floats."""
    narrow = {name: "int64" if dtype.kind in "iu" else "float64" for name, dtype in frame.dtypes.items()
              if dtype.kind in "iuf" and dtype.itemsize < 8}
    return frame.astype(narrow) if narrow else frame
