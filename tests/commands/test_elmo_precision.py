"""
``allennlp elmo --precision``: bfloat16 with native bfloat16 (mocked CPU flags) writes float32
vectors within bfloat16's rounding of float32's; without it, one warning on stderr's log and
the very same file contents as float32. The arithmetic itself is tested in
tests/modules/test_precision.py.
"""
import logging

import numpy as np
import pytest

from elmo_plugin.common import hardware
from tests.helpers import read_output, run_elmo, write_lines

pytestmark = pytest.mark.usefixtures("single_thread")

LINES = [
    "The cat sat on the mat .",
    "Hello !",
    "ELMo vectors depend on context , not only on the word .",
    "one",
]


@pytest.mark.parametrize("native", [True, False])
def test_precision_bfloat16(tmp_path, monkeypatch, caplog, native):
    monkeypatch.setattr(hardware, "cpu_model_name", lambda: "AMD EPYC 7B13")
    flags = {"avx2", "avx512_bf16"} if native else {"avx2"}
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset(flags))
    input_file = write_lines(tmp_path / "in.txt", LINES)
    assert run_elmo(input_file, tmp_path / "float32.hdf5", "--all", "--batch-size", "2") == 0
    with caplog.at_level(logging.INFO, logger="elmo_plugin.modules.precision"):
        status = run_elmo(
            input_file, tmp_path / "bfloat16.hdf5", "--all", "--batch-size", "2",
            "--precision", "bfloat16",
        )
    assert status == 0
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.name == "elmo_plugin.modules.precision" and r.levelno >= logging.WARNING
    ]
    expected, expected_mapping = read_output(tmp_path / "float32.hdf5")
    got, mapping = read_output(tmp_path / "bfloat16.hdf5")
    assert mapping == expected_mapping and sorted(got) == sorted(expected)
    for key, array in got.items():
        assert array.dtype == np.float32
        if native:
            # Within two bfloat16 units at the layers' magnitudes (at most 8 in this model).
            np.testing.assert_allclose(array, expected[key], rtol=0, atol=2 * 2.0**-7 * 8)
        else:
            np.testing.assert_array_equal(array, expected[key])
    if native:
        assert warnings == []
        assert any(not np.array_equal(got[k], expected[k]) for k in got)
    else:
        assert len(warnings) == 1 and "the biLM runs in float32" in warnings[0]


def test_unknown_precision_is_a_usage_error(tmp_path, capsys):
    input_file = write_lines(tmp_path / "in.txt", LINES)
    assert run_elmo(input_file, tmp_path / "out.hdf5", "--top", "--precision", "fp16") == 2
    assert "invalid choice: 'fp16'" in capsys.readouterr().err
