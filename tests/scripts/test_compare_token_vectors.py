"""scripts/compare_token_vectors.py on a hand-made HDF5 file in allennlp elmo's --all layout."""
import importlib.util

import h5py
import numpy as np

from tests.helpers import REPO_ROOT

spec = importlib.util.spec_from_file_location(
    "compare_token_vectors", REPO_ROOT / "scripts" / "compare_token_vectors.py"
)
compare_token_vectors = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_token_vectors)


def test_prints_the_per_layer_differences(tmp_path, capsys):
    (tmp_path / "s.txt").write_text("나 는 간다\n영화 는 좋다\n", encoding="utf-8")
    first = np.zeros((3, 3, 2), dtype=np.float32)
    second = np.zeros((3, 3, 2), dtype=np.float32)
    second[1, 1] = [0.5, -0.25]  # layer 1 of 는 differs by 0.5; layer 2 by 2.0
    second[2, 1] = [2.0, 0.0]
    with h5py.File(tmp_path / "e.hdf5", "w") as f:
        f["0"], f["1"] = first, second
    assert compare_token_vectors.main([str(tmp_path / "s.txt"), str(tmp_path / "e.hdf5"), "는"]) == 0
    printed = capsys.readouterr().out
    assert "layer 0: 0, layer 1: 0.5, layer 2: 2" in printed
    assert compare_token_vectors.main([str(tmp_path / "s.txt"), str(tmp_path / "e.hdf5"), "나"]) == 1
