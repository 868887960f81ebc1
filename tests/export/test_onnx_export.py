"""
``allennlp elmo-export MODEL OUT --format onnx`` and the graph it writes, run by ONNX Runtime:
every layer within 1e-5 of `ElmoEmbedder` (our float32 PyTorch) at batch 1 and batch 16 of mixed
lengths from 1 to 100 tokens, for the golden fixture and for a random biLM whose two clips bind;
any batch and length from one graph, an empty batch, the outputs to choose, the refusal of a
graph with fixed axes, bad input on one line; and examples/serve_onnx.py, which serves the graph
with numpy and ONNX Runtime only.
"""
import importlib.util
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import List

import numpy as np
import onnxruntime
import pytest
import torch
from allennlp.common.checks import ConfigurationError

from elmo_plugin.data.sentence_file import check_sentence_file
from elmo_plugin.elmo_embedder import ElmoEmbedder
from elmo_plugin.export import onnx_export
from elmo_plugin.export.onnx_export import (
    CHARACTER_IDS_NAME,
    MODEL_NAME,
    ExportedElmo,
    character_id_table,
    export_onnx,
    symbolic_input_axes,
)
from elmo_plugin.model_files.bilm_tf.directory import write_bilm_tf_directory
from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.modules.elmo import Elmo
from elmo_plugin.modules.scalar_mix import ScalarMix
from tests.export.test_scan_forward import clip_binding_bilm
from tests.helpers import (
    FIXTURES,
    REPO_ROOT,
    VARIED_BATCH,
    assert_clips_exercised,
    run_export,
    train_elmo_tagger,
)

pytestmark = pytest.mark.usefixtures("single_thread")

ATOL = 1e-5
SERVE = REPO_ROOT / "examples" / "serve_onnx.py"
WORDS = ["the", "a", "dog", "runs", "quickly", ".", ",", "café", "naïve", "😀", "밥",
         "아버지가방에들어가신다", "Pneumonoultramicroscopicsilicovolcanoconiosis-and-then-some",
         "<S>", "</S>"]


def serve_module():
    spec = importlib.util.spec_from_file_location("serve_onnx", SERVE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def mixed_batch(size: int, seed: int) -> List[List[str]]:
    """``size`` sentences of 1 to 100 tokens (both ends included when there are two or more)."""
    generator = random.Random(seed)
    lengths = [generator.randint(1, 100) for _ in range(size)]
    if size > 1:
        lengths[:2] = [1, 100]
    return [[generator.choice(WORDS) for _ in range(length)] for length in lengths]


def session(directory: Path) -> onnxruntime.InferenceSession:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    return onnxruntime.InferenceSession(
        str(directory / MODEL_NAME), options, providers=["CPUExecutionProvider"]
    )


@pytest.fixture(scope="module")
def golden_export(tmp_path_factory) -> Path:
    """The golden fixture biLM, exported by the command."""
    out = tmp_path_factory.mktemp("golden") / "onnx"
    assert run_export(FIXTURES, out, "--format", "onnx") == 0
    return out


@pytest.fixture(scope="module")
def binding_model(tmp_path_factory) -> Path:
    """A random biLM whose cell and projection clips both bind, as bilm-tf files."""
    bilm = clip_binding_bilm()
    assert_clips_exercised(bilm, bilm.character_ids.batch_to_ids(mixed_batch(16, 0)), 1e-2)
    directory = tmp_path_factory.mktemp("binding") / "bilm"
    write_bilm_tf_directory(str(directory), bilm.options, bilm.state_dict())
    return directory


@pytest.fixture(scope="module")
def binding_export(binding_model, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("binding_onnx") / "onnx"
    export_onnx(str(binding_model), str(out))
    return out


# The clip-binding model takes an export of its own (10-30 s on a shared 2-core machine).
WHICH = ["golden", pytest.param("clips_binding", marks=pytest.mark.slow)]


@pytest.mark.parametrize("batch_size", [1, 16])
@pytest.mark.parametrize("which", WHICH)
def test_onnx_runtime_gives_every_layer_of_elmo_embedder(which, batch_size, request):
    if which == "golden":
        model, export = FIXTURES, request.getfixturevalue("golden_export")
    else:
        model, export = request.getfixturevalue("binding_model"), request.getfixturevalue(
            "binding_export")
    embedder = ElmoEmbedder(model=str(model))
    batch = mixed_batch(batch_size, seed=batch_size)
    expected, expected_mask = embedder.batch_to_embeddings(batch)  # (batch, layers, tokens, dim)
    ids = embedder.elmo_bilm.character_ids.batch_to_ids(batch).numpy()
    layers, mask = session(export).run(None, {"character_ids": ids})
    assert layers.shape == (embedder.num_layers, batch_size, max(map(len, batch)), 2 * 16)
    assert layers.dtype == np.float32
    assert np.array_equal(mask, expected_mask.numpy())
    worst = []
    for layer in range(embedder.num_layers):
        difference = np.abs(layers[layer] - expected[:, layer].numpy())
        worst.append(float(difference.max()))
        assert not layers[layer][~mask].any()
    print(f"{which}, batch {batch_size}: worst |ORT - ElmoEmbedder| per layer {worst}")
    assert max(worst) < ATOL, worst


@pytest.mark.slow
def test_the_clip_binding_model_is_within_float32_noise(binding_model):
    """
    The clip-binding model's own float32 run is within 2e-6 of float64 over 100 tokens, so a
    1e-5 bar compares implementations, not float32's drift (larger recurrent weights drift
    1e-5 to 1e-4, tests/export/test_scan_forward.py's clip_binding_bilm says).
    """
    embedder = ElmoEmbedder(model=str(binding_model))
    ids = embedder.elmo_bilm.character_ids.batch_to_ids(mixed_batch(16, seed=16))
    with torch.no_grad():
        single = embedder.elmo_bilm(ids)["activations"]
        embedder.elmo_bilm.double()
        double = embedder.elmo_bilm(ids)["activations"]
    drift = max(float((a.double() - b).abs().max()) for a, b in zip(single, double))
    assert drift < 2e-6


def test_one_graph_takes_any_batch_and_length_even_none(golden_export):
    assert symbolic_input_axes(str(golden_export / MODEL_NAME)) == [True, True, False]
    run = session(golden_export)
    embedder = ElmoEmbedder(model=str(FIXTURES))
    for batch in ([["a"]], [["word"] * 250, ["b"]], VARIED_BATCH):
        ids = embedder.elmo_bilm.character_ids.batch_to_ids(batch).numpy()
        layers, mask = run.run(None, {"character_ids": ids})
        expected, _ = embedder.batch_to_embeddings(batch)
        assert float(np.abs(layers - expected.transpose(0, 1).numpy()).max()) < ATOL
    for shape in [(0, 5, 50), (3, 0, 50), (0, 0, 50)]:
        layers, mask = run.run(None, {"character_ids": np.zeros(shape, dtype=np.int64)})
        assert layers.shape == (3, shape[0], shape[1], 32)
        assert mask.shape == shape[:2] and not mask.any()
        if layers.size:
            assert not layers.any()


def test_the_files_beside_the_graph(golden_export):
    assert sorted(os.listdir(golden_export)) == sorted(onnx_export.EXPORT_NAMES)
    options = json.loads((golden_export / "options.json").read_text())
    assert options["lstm"] == json.loads((FIXTURES / "options.json").read_text())["lstm"]
    table = json.loads((golden_export / CHARACTER_IDS_NAME).read_text())
    assert table["scheme"] == "utf-8-bytes" and table["max_characters_per_token"] == 50


@pytest.mark.parametrize("output", ["top", "average"])
def test_top_and_average_are_elmo_embedders(output):
    embedder = ElmoEmbedder(model=str(FIXTURES))
    module = ExportedElmo(embedder.elmo_bilm, output).eval()
    ids = embedder.elmo_bilm.character_ids.batch_to_ids(VARIED_BATCH)
    with torch.no_grad():
        ours, mask = module(ids)
    expected, expected_mask = embedder.batch_to_embeddings(VARIED_BATCH)
    expected = expected[:, -1] if output == "top" else expected.mean(dim=1)
    assert torch.equal(mask, expected_mask)
    assert float((ours - expected).abs().max()) < ATOL


def test_a_fine_tuned_scalar_mix_is_elmos():
    """A mix with layer norm and trained weights, computed as `Elmo` computes it (the layer norm
    counting the sentence boundaries), without dropout."""
    elmo = Elmo(str(FIXTURES / "options.json"), str(FIXTURES / "lm_weights.hdf5"),
                do_layer_norm=True, dropout=0.5).eval()
    mix = elmo.scalar_mixes[0]
    with torch.no_grad():
        for value, parameter in zip([0.3, -1.0, 2.0], mix.scalar_parameters):
            parameter.fill_(value)
        mix.gamma.fill_(1.7)
    ids = elmo.bilm.character_ids.batch_to_ids(VARIED_BATCH)
    with torch.no_grad():
        expected = elmo(ids)
        ours, mask = ExportedElmo(elmo.bilm, scalar_mix=mix).eval()(ids)
    assert torch.equal(mask, expected["mask"])
    assert float((ours - expected["elmo_representations"][0]).abs().max()) < ATOL
    with torch.no_grad():
        plain, _ = ExportedElmo(elmo.bilm, scalar_mix=ScalarMix(3)).eval()(ids)
    assert float((plain - ours).abs().max()) > 1e-2  # the mix's weights matter


def test_the_axes_check_refuses_fixed_batch_or_tokens(tmp_path):
    import onnx
    from allennlp.common.checks import ConfigurationError
    from onnx import TensorProto, helper

    for dims, refused in [(["b", "t", 50], False), ([2, "t", 50], True), (["b", 7, 50], True)]:
        graph = helper.make_graph(
            [helper.make_node("Identity", ["ids"], ["out"])], "g",
            [helper.make_tensor_value_info("ids", TensorProto.INT64, dims)],
            [helper.make_tensor_value_info("out", TensorProto.INT64, dims)],
        )
        path = tmp_path / "g.onnx"
        onnx.save(helper.make_model(graph), str(path))
        if refused:
            with pytest.raises(ConfigurationError, match="fixed axes"):
                onnx_export.check_dynamic_axes(str(path), "shown.onnx")
        else:
            onnx_export.check_dynamic_axes(str(path), "shown.onnx")


@pytest.mark.slow  # a whole export
def test_a_graph_with_fixed_axes_is_refused_and_nothing_is_written(tmp_path, capsys, monkeypatch):
    exporter = torch.onnx.export

    def pinning_exporter(*arguments, **keywords):
        keywords["dynamic_shapes"] = None  # what an exporter that specializes the shapes writes
        return exporter(*arguments, **keywords)

    monkeypatch.setattr(torch.onnx, "export", pinning_exporter)
    out = tmp_path / "out"
    assert run_export(FIXTURES, out, "--format", "onnx") == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert error.startswith(f"allennlp elmo-export: error: {out / MODEL_NAME}: the exported "
                            "graph's input has fixed axes (2, 7, 50)")
    assert os.listdir(tmp_path) == []


def test_bad_input_is_one_line(tmp_path, capsys):
    unknown = tmp_path / "unknown"
    unknown.mkdir()
    (unknown / "notes.txt").write_text("no model here")
    out = tmp_path / "out"
    assert run_export(unknown, out, "--format", "onnx") == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and f"{unknown} holds no ELMo model" in error

    assert run_export(FIXTURES, out, "--format", "onnx", "--scalar-mix", "0") == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert "--scalar-mix picks the ELMo embedder of a task model" in error

    assert run_export(FIXTURES, out, "--format", "onnx", "--include-softmax") == 2
    assert "--include-softmax is for --format bilm-tf" in capsys.readouterr().err
    legacy = REPO_ROOT / "tests" / "fixtures" / "legacy_elmo_bilm" / "model.tar.gz"
    assert run_export(legacy, out, "--top") == 2
    assert "--top chooses the outputs of --format onnx" in capsys.readouterr().err

    # A training run that has not finished an epoch: no weights yet.
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    (unfinished / "config.json").write_text(json.dumps({"model": {"type": "elmo_bilm"}}))
    assert run_export(unfinished, out, "--format", "onnx") == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "has training finished an epoch yet?" in error

    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "mine.txt").write_text("keep")
    assert run_export(FIXTURES, taken, "--format", "onnx") == 1
    assert "holds other files than an earlier output" in capsys.readouterr().err
    assert os.listdir(taken) == ["mine.txt"]
    assert sorted(os.listdir(tmp_path)) == ["taken", "unfinished", "unknown"]


# examples/serve_onnx.py


def test_the_served_character_ids_are_the_plugins(tmp_path):
    serve = serve_module()
    embedder = ElmoEmbedder(model=str(FIXTURES))
    batch = VARIED_BATCH + [["<S>", "</S>", "a" * 100, "é" * 30, "밥" * 20]]
    table = character_id_table(embedder.elmo_bilm)
    served = serve.CharacterIds(json.loads(json.dumps(table))).batch_to_ids(batch)
    assert np.array_equal(served, embedder.elmo_bilm.character_ids.batch_to_ids(batch).numpy())

    test_elmoformanylangs = pytest.importorskip("tests.model_files.test_elmoformanylangs")

    for word_dim in (6, 0):
        directory = test_elmoformanylangs.make_model_directory(tmp_path / f"w{word_dim}", word_dim)
        bilm = ElmoBiLm.from_model(directory)
        batch = [line.split() for line in test_elmoformanylangs.CORPUS[:3]] + [
            ["<bos>", "<eos>", "unseen", "x" * 80]]
        table = json.loads(json.dumps(character_id_table(bilm), ensure_ascii=False))
        served = serve.CharacterIds(table).batch_to_ids(batch)
        assert np.array_equal(served, bilm.character_ids.batch_to_ids(batch).numpy())


def test_serving_sorted_by_length_gives_each_sentence_its_vectors(golden_export):
    serve = serve_module()
    model = serve.ElmoOnnx(str(golden_export), threads=1)
    sentences = mixed_batch(24, seed=5)
    sentences[3] = []
    arrays = serve.embed_sorted(model, sentences, batch_size=8)
    expected = ElmoEmbedder(model=str(FIXTURES)).embed_batch(sentences)
    for ours, theirs in zip(arrays, expected):
        assert ours.shape == theirs.shape
        if ours.size:
            assert float(np.abs(ours - theirs).max()) < ATOL
    lengths = [len(s) for s in sentences]
    in_order = [list(range(i, i + 8)) for i in range(0, 24, 8)]
    # Lengths drawn uniformly from 1 to 100: sorted, about half the padding of the input order.
    assert serve.padding_share(lengths, serve.length_sorted_batches(lengths, 8)) < 0.6 * (
        serve.padding_share(lengths, in_order))


def test_a_position_budget_gives_long_sentences_smaller_batches():
    serve = serve_module()
    lengths = [5, 100, 6, 5, 98, 7, 5]
    # Longest first; 100 and 98 tokens: 2 rows x 102 positions fit 210, a third row would not.
    assert serve.length_sorted_batches(lengths, 4, max_positions=210) == [[1, 4], [5, 2, 0, 3], [6]]
    assert serve.length_sorted_batches(lengths, 4) == [[1, 4, 5, 2], [0, 3, 6]]
    # A sentence longer than the budget still gets its batch.
    assert serve.length_sorted_batches([500, 3], 4, max_positions=100) == [[0], [1]]
    budgeted = serve.length_sorted_batches(lengths, 4, max_positions=210)
    assert serve.padding_share(lengths, budgeted) < serve.padding_share(
        lengths, serve.length_sorted_batches(lengths, 4))


def run_example(*arguments) -> subprocess.CompletedProcess:
    """examples/serve_onnx.py with torch and the plugin made unimportable: it needs neither."""
    code = ("import sys, runpy; sys.modules['torch'] = None; sys.modules['elmo_plugin'] = None; "
            f"sys.argv = ['serve_onnx.py'] + {[str(a) for a in arguments]!r}; "
            f"runpy.run_path({str(SERVE)!r}, run_name='__main__')")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_the_example_runs_without_pytorch(golden_export, tmp_path):
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("the dog runs .\nbirds\nmany tired birds never visit the teachers .\n",
                         encoding="utf-8")
    output = tmp_path / "out.npz"
    result = run_example(golden_export, sentences, output, "--threads", "1")
    assert result.returncode == 0, result.stderr
    assert "3 sentences" in result.stderr and "padding computed" in result.stderr
    with np.load(output) as arrays:
        # One array a line, named by the line's number (docs/serving.md).
        assert sorted(arrays.files) == ["line_1", "line_2", "line_3"]
        ours = [arrays[f"line_{number}"] for number in (1, 2, 3)]
    expected = ElmoEmbedder(model=str(FIXTURES)).embed_batch(
        [["the", "dog", "runs", "."], ["birds"], "many tired birds never visit the teachers .".split()])
    for a, b in zip(ours, expected):
        assert a.shape == b.shape
        assert float(np.abs(a - b).max()) < ATOL
    assert sorted(os.listdir(tmp_path)) == ["out.npz", "sentences.txt"]


def test_the_examples_mistakes_are_one_line_each(golden_export, tmp_path):
    good = tmp_path / "good.txt"
    good.write_text("a b\n", encoding="utf-8")
    blank = tmp_path / "blank.txt"
    blank.write_text("a b\n\n   \nc\n", encoding="utf-8")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("ok\ncaf\u00e9 .\n".encode("latin-1"))
    output = tmp_path / "out.npz"
    cases = [
        # The bilm-tf folder instead of the export.
        ((FIXTURES, good, output),
         f"{FIXTURES} is a bilm-tf model (options.json and HDF5 weights), not an ONNX export: "
         f"export it first with allennlp elmo-export {FIXTURES} OUT --format onnx, then give OUT"),
        ((tmp_path / "nowhere", good, output),
         f"{tmp_path / 'nowhere'}: no such directory (what allennlp elmo-export ... --format onnx wrote)"),
        ((golden_export, tmp_path / "missing.txt", output), f"input file not found: {tmp_path / 'missing.txt'}"),
        ((golden_export, latin1, output),
         f"{latin1}:2: not valid UTF-8 (invalid continuation byte at byte 3 of the line); the text must be UTF-8"),
        # As allennlp elmo refuses them (elmo_plugin.data.sentence_file).
        ((golden_export, blank, output),
         f"{blank}: 2 blank or whitespace-only line(s), at line(s) 2, 3 (1-based). Every line must "
         "hold one tokenized sentence; please remove them."),
    ]
    for arguments, message in cases:
        result = run_example(*arguments)
        assert (result.returncode, result.stdout) == (1, ""), result.stderr
        assert result.stderr == f"serve_onnx.py: error: {message}\n"
        assert not output.exists()

    # The plugin's own check says the same of the blank lines.
    with pytest.raises(ConfigurationError) as raised:
        check_sentence_file(blank)
    assert str(raised.value) == cases[-1][1]


@pytest.mark.slow  # trains a tagger for an epoch, then exports
def test_a_task_models_fine_tuned_mix_through_the_command(tmp_path, capsys):
    from allennlp.models.archival import load_archive

    archive = train_elmo_tagger(tmp_path, num_epochs=2, requires_grad=True, do_layer_norm=True)
    out = tmp_path / "onnx"
    assert run_export(archive, out, "--format", "onnx", "--scalar-mix", "1") == 1
    assert "has 1 scalar mix(es); --scalar-mix takes 0 to 0, got 1" in capsys.readouterr().err
    assert run_export(archive, out, "--format", "onnx", "--scalar-mix", "0") == 0
    capsys.readouterr()
    elmo = next(module for module in load_archive(str(archive)).model.modules()
                if isinstance(module, Elmo)).eval()
    assert float(elmo.scalar_mixes[0].gamma.detach()) != 1.0  # fine-tuned: the mix moved
    ids = elmo.bilm.character_ids.batch_to_ids(mixed_batch(16, seed=3))
    with torch.no_grad():
        expected = elmo(ids)
    run = session(out)
    assert [output.name for output in run.get_outputs()] == ["mix", "mask"]
    mixed, mask = run.run(None, {"character_ids": ids.numpy()})
    assert np.array_equal(mask, expected["mask"].numpy())
    assert float(np.abs(mixed - expected["elmo_representations"][0].numpy()).max()) < ATOL


@pytest.mark.slow  # a whole export
def test_an_elmoformanylangs_model_with_word_ids(tmp_path, capsys):
    """Its own character and word ids in the graph's input, and served from its dictionaries."""
    test_elmoformanylangs = pytest.importorskip("tests.model_files.test_elmoformanylangs")
    directory = test_elmoformanylangs.make_model_directory(tmp_path / "efml", word_dim=6)
    out = tmp_path / "onnx"
    assert run_export(directory, out, "--format", "onnx", "--average") == 0
    capsys.readouterr()
    sentences = [line.split() for line in test_elmoformanylangs.CORPUS[:4]] + [["unseen", "<bos>"]]
    serve = serve_module()
    arrays = serve.embed_sorted(serve.ElmoOnnx(str(out), threads=1), sentences, batch_size=2)
    embedder = ElmoEmbedder(model=str(directory))
    for ours, theirs in zip(arrays, embedder.embed_batch(sentences)):
        assert ours.shape == theirs.shape[1:]
        assert float(np.abs(ours - theirs.mean(axis=0)).max()) < ATOL
