"""pyspark's own reading of `transformWithStateInPandas` input against `load_stream_by_slices`, on
the same Arrow streams: the same groups in the same order, each with the same rows, in frames
within the same limits."""

from __future__ import annotations

import io

import pandas as pd
import pyarrow as pa
import pyspark
import pytest
from pyspark.sql.pandas.serializers import TransformWithStateInPandasSerializer

from streaming import group_frames
from streaming.group_frames import REPLACED_RELEASE, UNLIMITED_BYTES, load_stream_by_slices, pyspark_load_stream

# The operator's input columns (streaming.operator.apply_model), the grouping key first, as Spark sends them.
SCHEMA = pa.schema([
    ("primary_server", pa.string()), ("event_time", pa.timestamp("us", tz="UTC")), ("value", pa.binary()),
    ("key", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
    ("reason", pa.string()), ("fact", pa.string()), ("node", pa.string()),
    ("hops", pa.int16()), ("weight", pa.float32()),  # not the operator's: narrower numbers
])


def rows(primaries: str, first: int = 0) -> list[dict]:
    """One row per letter of `primaries`, that letter's server (`_`: the empty group); some nulls."""
    return [{"primary_server": "" if p == "_" else f"mbx{p}", "event_time": 1_700_000_000_000_000 + 1000 * n,
             "value": None if n % 7 == 3 else b"\x00\x01" + bytes([n % 256]), "key": None if n % 2 else b"k",
             "topic": "events", "partition": n % 3, "offset": n, "reason": "bad" if p == "_" else None,
             "fact": "seen" if n % 5 == 4 else None, "node": f"mbx{n % 4}" if n % 5 == 4 else None,
             "hops": None if n == 5 else n, "weight": n / 4}
            for n, p in enumerate(primaries, start=first)]


def arrow_stream(batches: list[str]) -> bytes:
    sink, first = io.BytesIO(), 0
    with pa.ipc.new_stream(sink, SCHEMA) as writer:
        for primaries in batches:
            writer.write_batch(pa.RecordBatch.from_pylist(rows(primaries, first), schema=SCHEMA))
            first += len(primaries)
    return sink.getvalue()


def serializer(limit: int, max_bytes: int = UNLIMITED_BYTES) -> TransformWithStateInPandasSerializer:
    """Made as pyspark's worker makes it for this eval type, the key at offset 0."""
    ser = TransformWithStateInPandasSerializer("UTC", False, True, limit, max_bytes,
                                               int_to_decimal_coercion_enabled=False)
    ser.key_offsets = [0]
    return ser


def read(load_stream, data: bytes, limit: int, max_bytes: int = UNLIMITED_BYTES) -> list:
    """(mode, key, [frames]) as the worker's mapper sees them."""
    return [(mode, key, None if group is None else [frame for _, frame in group])
            for mode, key, group in load_stream(serializer(limit, max_bytes), io.BytesIO(data))]


SPARKS_DEFAULT_BYTES = 64 * 1024 * 1024  # spark.sql.execution.arrow.maxBytesPerBatch, as the worker is given it
STREAMS = {
    "one group": ["aaaa"],
    "groups within a batch": ["aabbbc_"],
    "a group across batches": ["aab", "bbb", "bc"],
    "a group again later": ["ab", "a", "_a"],
    "an empty batch between": ["aa", "", "ab"],
}


@pytest.mark.parametrize("max_bytes", [UNLIMITED_BYTES, SPARKS_DEFAULT_BYTES])
@pytest.mark.parametrize("limit", [1, 2, 3, 10_000])
@pytest.mark.parametrize("batches", STREAMS.values(), ids=STREAMS.keys())
def test_the_same_frames_as_pyspark_reads(batches, limit, max_bytes):
    data = arrow_stream(batches)
    ours, theirs = read(load_stream_by_slices, data, limit, max_bytes), read(pyspark_load_stream, data, limit, max_bytes)
    assert [(mode, key) for mode, key, _ in ours] == [(mode, key) for mode, key, _ in theirs]
    for (_, key, our_frames), (_, _, their_frames) in zip(ours, theirs):
        assert (our_frames is None) == (their_frames is None), key
        if our_frames is not None:
            pd.testing.assert_frame_equal(pd.concat(our_frames, ignore_index=True),
                                          pd.concat(their_frames, ignore_index=True))
            assert all(0 < len(frame) <= limit for frame in our_frames), key
            for frame in our_frames:
                assert frame.index.equals(pd.RangeIndex(len(frame))), key


def test_a_group_across_batches_comes_whole_in_frames_of_each_batch_cut_at_the_limit():
    groups = read(load_stream_by_slices, arrow_stream(["aab", "bbb", "bc"]), limit=2)
    data = [(key, [frame["offset"].tolist() for frame in frames]) for _, key, frames in groups if frames is not None]
    assert data == [(("mbxa",), [[0, 1]]), (("mbxb",), [[2], [3, 4], [5], [6]]), (("mbxc",), [[7]])]


@pytest.mark.parametrize("max_bytes", [40, 200, 500])
def test_under_a_byte_limit_each_group_has_its_rows_in_chunks_within_it(max_bytes):
    data = arrow_stream(["aab", "bbbbbbb", "bc", "cccccccccc"])
    ours, theirs = read(load_stream_by_slices, data, 10_000, max_bytes), read(pyspark_load_stream, data, 10_000, max_bytes)
    assert [key for _, key, _ in ours] == [key for _, key, _ in theirs]
    for (_, key, our_frames), (_, _, their_frames) in zip(ours, theirs):
        if our_frames is not None:
            pd.testing.assert_frame_equal(pd.concat(our_frames, ignore_index=True),
                                          pd.concat(their_frames, ignore_index=True))
            assert max(len(f) for f in our_frames) <= max(len(f) for f in their_frames), key
    assert max(len(f) for _, _, frames in ours if frames for f in frames) < 10, "the byte limit cut no chunk"


def test_installed_only_on_the_release_compared(monkeypatch):
    monkeypatch.setattr(TransformWithStateInPandasSerializer, "load_stream", pyspark_load_stream)
    monkeypatch.setattr(pyspark, "__version__", "4.2.0")
    assert group_frames.install() is False
    assert TransformWithStateInPandasSerializer.load_stream is pyspark_load_stream
    monkeypatch.setattr(pyspark, "__version__", REPLACED_RELEASE)
    assert group_frames.install() is True
    assert TransformWithStateInPandasSerializer.load_stream is load_stream_by_slices


def test_the_operator_installs_it():
    import streaming.operator  # noqa: F401 - importing it is what installs the reader in a worker

    assert pyspark.__version__ == REPLACED_RELEASE, "pyspark was upgraded: compare its reader again"
    assert TransformWithStateInPandasSerializer.load_stream is load_stream_by_slices
    assert read(TransformWithStateInPandasSerializer.load_stream, arrow_stream(["ab"]), 10)[1][1] == ("mbxb",)
