"""A checkpoint of the twin's previous operator (applyInPandasWithState) is refused in one line."""

from __future__ import annotations

import pytest

from infra.config import ConfigError
from streaming.twin import refuse_previous_operator

# As Spark 4.0.0 wrote it for the previous operator (state/0/_metadata/metadata).
PREVIOUS = ('v1\n{"operatorInfo":{"operatorId":0,"operatorName":"applyInPandasWithState"},'
            '"stateStoreInfo":[{"storeName":"default","numColsPrefixKey":0,"numPartitions":4}]}')


def test_a_checkpoint_of_the_previous_operator_is_refused_with_one_line(tmp_path):
    metadata = tmp_path / "state" / "0" / "_metadata" / "metadata"
    metadata.parent.mkdir(parents=True)
    metadata.write_text(PREVIOUS)
    with pytest.raises(ConfigError, match="applyInPandasWithState") as refused:
        refuse_previous_operator(tmp_path)
    assert "\n" not in str(refused.value) and str(tmp_path) in str(refused.value)


def test_a_new_or_current_checkpoint_is_accepted(tmp_path):
    refuse_previous_operator(tmp_path / "new")
    metadata = tmp_path / "state" / "0" / "_metadata" / "metadata"
    metadata.parent.mkdir(parents=True)
    metadata.write_text(PREVIOUS.replace("applyInPandasWithState", "transformWithStateInPandasExec"))
    refuse_previous_operator(tmp_path)
