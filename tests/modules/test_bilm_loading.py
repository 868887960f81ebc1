"""
Loading a pretrained biLM from below the network: `ElmoBiLm.from_files`, `from_model` and
`from_stored` build the class they are called on (a subclass gets itself back, its overrides and
its own constructor arguments kept), the character encoder builds itself from the options, and
nothing the biLM imports imports it back.
"""
import ast
from pathlib import Path
from typing import Dict, Optional, Set

import pytest
import torch

from elmo_plugin.data.character_ids import ElmoCharacterIds
from elmo_plugin.model_files.bilm_tf.options import BilmOptions
from elmo_plugin.model_files.stored_bilm import read_stored_bilm
from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.modules.character_encoder import CharacterEncoder
from tests.helpers import FIXTURE_OPTIONS, FIXTURE_WEIGHTS, REPO_ROOT
from tests.modules.test_bilm_golden import BATCH_SIZE, golden, top_layer_errors  # noqa: F401

pytestmark = pytest.mark.usefixtures("single_thread")

SENTENCES = [["The", "cat", "sat", "."], ["Hello", "!"], ["밥", "을", "먹었다"]]


class TopOnly(ElmoBiLm):
    """A subclass that changes what the biLM gives (only the top layer) and takes an argument of
    its own, as a user's subclass would."""

    def __init__(self, options: BilmOptions, stateful: bool = False, scale: float = 1.0, **kwargs) -> None:
        super().__init__(options, stateful=stateful, **kwargs)
        self.scale = scale

    def forward(self, character_ids: torch.Tensor, execution=None):
        output = super().forward(character_ids, execution)
        return {"activations": [self.scale * output["activations"][-1]], "mask": output["mask"]}


def reference_layers():
    plain = ElmoBiLm.from_files(FIXTURE_OPTIONS, FIXTURE_WEIGHTS).eval()
    with torch.no_grad():
        return plain(ElmoCharacterIds(50).batch_to_ids(SENTENCES))["activations"]


def test_from_files_on_a_subclass_builds_the_subclass_with_the_weights():
    bilm = TopOnly.from_files(FIXTURE_OPTIONS, FIXTURE_WEIGHTS, scale=2.0).eval()
    assert type(bilm) is TopOnly and bilm.scale == 2.0
    assert not any(parameter.requires_grad for parameter in bilm.parameters())
    with torch.no_grad():
        activations = bilm(ElmoCharacterIds(50).batch_to_ids(SENTENCES))["activations"]
    # The override ran (one layer, scaled) on the fixture's weights.
    assert len(activations) == 1
    assert torch.equal(activations[0], 2.0 * reference_layers()[-1])


def test_a_subclass_reproduces_the_tensorflow_outputs(golden):  # noqa: F811
    sentences, expected = golden

    class Stateful(ElmoBiLm):
        pass

    bilm = Stateful.from_files(FIXTURE_OPTIONS, FIXTURE_WEIGHTS, stateful=True).eval()
    assert type(bilm) is Stateful and bilm.stateful
    errors = [error for i in range(3) for error in top_layer_errors(bilm, sentences, expected, i)]
    assert len(errors) == 3 * BATCH_SIZE and max(errors) < 2e-6


def test_from_model_on_a_subclass_for_every_kind_of_model(tmp_path):
    from tests.model_files.test_elmoformanylangs import make_model_directory
    from tests.model_files.test_resolve import export_layout
    from tests.modules.test_elmo import write_bilm_archive

    directory = export_layout(tmp_path / "exported")
    for model in (directory, write_bilm_archive(tmp_path / "run") / "model.tar.gz"):
        bilm = TopOnly.from_model(model).eval()
        assert type(bilm) is TopOnly
        with torch.no_grad():
            top = bilm(ElmoCharacterIds(50).batch_to_ids(SENTENCES))["activations"][0]
        torch.testing.assert_close(top, reference_layers()[-1], rtol=0, atol=1e-6)
    trainable = TopOnly.from_model(options_file=FIXTURE_OPTIONS, weight_file=FIXTURE_WEIGHTS, requires_grad=True)
    assert type(trainable) is TopOnly and all(p.requires_grad for p in trainable.parameters())

    # An ELMoForManyLangs model: its own character ids and encoder, on the subclass.
    efml = make_model_directory(tmp_path / "efml", word_dim=6)
    bilm = TopOnly.from_model(efml, scale=3.0).eval()
    plain = ElmoBiLm.from_model(efml).eval()
    assert type(bilm) is TopOnly and bilm.character_encoder.word_embedding is not None
    ids = plain.character_ids.batch_to_ids([["我", "们"], ["<bos>", "x"]])
    with torch.no_grad():
        assert torch.equal(bilm(ids)["activations"][0], 3.0 * plain(ids)["activations"][-1])


def test_from_stored_builds_what_the_files_describe():
    stored = read_stored_bilm(options_file=FIXTURE_OPTIONS, weight_file=FIXTURE_WEIGHTS)
    bilm = TopOnly.from_stored(stored, stateful=True)
    assert type(bilm) is TopOnly and bilm.stateful
    for name, value in ElmoBiLm.from_files(FIXTURE_OPTIONS, FIXTURE_WEIGHTS).state_dict().items():
        assert torch.equal(bilm.state_dict()[name], value), name


def test_the_character_encoder_builds_itself_from_the_options():
    options = BilmOptions.from_file(FIXTURE_OPTIONS)
    encoder = CharacterEncoder.from_options(options)
    assert encoder.filters == [tuple(f) for f in options.filters]
    assert encoder.char_embedding.embedding_dim == options.char_embedding_dim
    assert len(encoder.highway.layers) == options.n_highway
    assert encoder.output_dim == options.projection_dim and encoder.activation == options.activation
    # With the fixture's weights it is the biLM's own encoder: the same token vectors.
    bilm = ElmoBiLm.from_files(FIXTURE_OPTIONS, FIXTURE_WEIGHTS)
    encoder.load_state_dict(bilm.character_encoder.state_dict())
    ids = ElmoCharacterIds(50).batch_to_ids(SENTENCES).view(-1, 50)
    with torch.no_grad():
        assert torch.equal(encoder(ids), bilm.character_encoder(ids))
    # A model's own ids: the embedding as large as its dictionary, a word embedding beside it.
    own = CharacterEncoder.from_options(options, num_character_ids=30, num_word_ids=11, word_embedding_dim=3)
    assert own.char_embedding.num_embeddings == 30 and own.word_embedding.num_embeddings == 11


def _imports(path: Path) -> Set[str]:
    """The elmo_plugin modules a file imports, at any depth of the file (functions, type-only
    blocks) and however it names them."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("elmo_plugin"):
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names if alias.name.startswith("elmo_plugin"))
    return names


def _module_file(module: str) -> Optional[Path]:
    base = REPO_ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def test_nothing_the_biLM_imports_imports_it_back():
    # Every module reachable from bilm.py through imports (function-level ones included).
    start = "elmo_plugin.modules.bilm"
    reached: Dict[str, Set[str]] = {}
    todo = [start]
    while todo:
        module = todo.pop()
        path = _module_file(module)
        if module in reached or path is None:
            continue
        reached[module] = {name for name in _imports(path) if _module_file(name) is not None}
        todo.extend(reached[module])
    assert "elmo_plugin.modules.bilm_loading" not in reached
    back = sorted(module for module, imported in reached.items() if start in imported and module != start)
    assert back == []
    # The loading it needs lies below the network: the model files know nothing of modules/.
    assert not any(
        name.startswith("elmo_plugin.modules")
        for module, imported in reached.items() if module.startswith("elmo_plugin.model_files")
        for name in imported
    )
