"""
Issue 34's exactness bar: on random bilm-tf weights drawn large enough that both clips bind, in
three configurations, every layer of our float32 ``allennlp elmo`` output (`ElmoEmbedder`) is no
further from AllenNLP core's ``_ElmoBiLm`` in float64 than twice core float32's own distance.
The measurement is benchmarks/float32_exactness.py's (which also prints it as a table, with the
golden fixture).
"""
import importlib.util
import sys

import pytest

from tests.helpers import REPO_ROOT

_PATH = REPO_ROOT / "benchmarks" / "float32_exactness.py"
_SPEC = importlib.util.spec_from_file_location("float32_exactness", _PATH)
float32_exactness = importlib.util.module_from_spec(_SPEC)
sys.modules["float32_exactness"] = float32_exactness
_SPEC.loader.exec_module(float32_exactness)

pytestmark = pytest.mark.usefixtures("single_thread")


def test_the_batch_has_the_hard_tokens():
    sentences = float32_exactness.SENTENCES
    tokens = [token for sentence in sentences for token in sentence]
    assert len(sentences) == 64 and len({len(sentence) for sentence in sentences}) > 10
    assert any(len(token) == 80 for token in tokens)  # longer than the 50 characters read
    assert any("\uac00" <= character <= "\ud7a3" for token in tokens for character in token)
    assert any(len(character.encode("utf-8")) == 4 for token in tokens for character in token)


@pytest.mark.parametrize("name", list(float32_exactness.CONFIGURATIONS))
def test_float32_is_as_exact_as_allennlp_core(name, tmp_path):
    arch = float32_exactness.CONFIGURATIONS[name]
    assert arch["cell_clip"] == arch["proj_clip"] == 3.0
    result = float32_exactness.measure_configuration(name, tmp_path)
    report = f"[{name}] {result.describe()}; clips (core float64): {result.clips}"
    print(report)
    # The clips bind on these weights and sentences, else the check could not see them.
    assert result.clips.cells_clipped >= 10, report
    assert result.clips.outputs_clipped >= 10, report
    assert len(result.layers) == arch["n_layers"] + 1
    assert all(layer.core32_max > 0.0 for layer in result.layers), report
    missed = result.failures()
    assert not missed, (
        f"our float32 is further than {float32_exactness.BAR:g}x core float32's distance from "
        f"core float64 on layer(s) {[layer.layer for layer in missed]}: {report}"
    )
