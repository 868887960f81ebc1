"""
Tests of `elmo_plugin.model_files` (resolve, download, catalogue): how a model is named (published names, directories,
archives, explicit files) and how published models are downloaded, cached and checked, against a
local HTTP model_server that serves AllenNLP's golden fixture as the published "Original" model.
"""
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.modules.token_embedders import TokenEmbedder
from cached_path import resource_to_filename

from elmo_plugin.elmo_embedder import ElmoEmbedder
from elmo_plugin.model_files.catalogue import (
    MODELS_URL_VARIABLE,
    PUBLISHED_MODELS,
    describe_published_models,
)
from elmo_plugin.model_files.resolve import resolve_model
from elmo_plugin.modules.elmo import Elmo
from tests.model_server import (
    DROPPED,
    HTML_PAGE,
    NOT_FOUND,
    ModelServer,
    cache_entries,
    golden_fixtures_dir,
)

FIXTURES = golden_fixtures_dir()
ORIGINAL = PUBLISHED_MODELS["original"]
SENTENCES = [["The", "cat", "sat", "."], ["Hello", "!"], ["밥", "을", "먹었다"]]

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def reference() -> ElmoEmbedder:
    return ElmoEmbedder(FIXTURES / "options.json", FIXTURES / "lm_weights.hdf5")


def url_of(which: str, model_server: ModelServer) -> str:
    if which == "options":
        return ORIGINAL.options_url(model_server.url)
    return ORIGINAL.weights_url(model_server.url)


def entries_of(url: str, cache_dir: Path):
    """Everything cached_path keeps for ``url``: the file, its .json metadata, its .lock."""
    return [name for name in cache_entries(cache_dir) if name.startswith(resource_to_filename(url))]


def test_published_urls():
    assert ORIGINAL.options_url("https://example.org/elmo/") == (
        "https://example.org/elmo/2x4096_512_2048cnn_2xhighway/"
        "elmo_2x4096_512_2048cnn_2xhighway_options.json"
    )
    assert PUBLISHED_MODELS["original-5.5b"].weights_url("https://m") == (
        "https://m/2x4096_512_2048cnn_2xhighway_5.5B/"
        "elmo_2x4096_512_2048cnn_2xhighway_5.5B_weights.hdf5"
    )
    assert [(m.name, m.parameters, m.output_dim) for m in PUBLISHED_MODELS.values()] == [
        ("small", "13.6M", 256),
        ("medium", "28.0M", 512),
        ("original", "93.6M", 1024),
        ("original-5.5b", "93.6M", 1024),
    ]


def test_default_is_original_downloaded_once_then_used_offline(model_server, cache_dir):
    files = resolve_model()
    assert Path(files.options_file).parent == cache_dir
    assert Path(files.options_file).read_bytes() == (FIXTURES / "options.json").read_bytes()
    assert Path(files.weight_file).read_bytes() == (FIXTURES / "lm_weights.hdf5").read_bytes()
    assert sorted(model_server.gets()) == sorted(model_server.files)
    # Published files never change: a cached copy is used without asking the server again ...
    requests_before = len(model_server.requests)
    assert resolve_model("original") == files
    assert len(model_server.requests) == requests_before
    # ... also when the server is gone.
    model_server.stop()
    assert resolve_model() == files


def test_a_published_model_is_resolved_and_checked_once_a_process(model_server, cache_dir, monkeypatch):
    import elmo_plugin.model_files.download as download

    files = resolve_model("original")
    checked = []

    def counted_check(path, kind):
        checked.append(kind)
        return original_check(path, kind)

    original_check = download.file_problem
    monkeypatch.setattr(download, "file_problem", counted_check)
    # Asked for again, as Elmo, a config's elmo_output_dim and an embedder of one process do:
    # the same files, not looked for, checked or asked about again.
    requests_before = len(model_server.requests)
    assert resolve_model("original") == resolve_model("Original") == resolve_model() == files
    Elmo(model="original")
    assert checked == [] and len(model_server.requests) == requests_before
    # A cached file replaced since it was checked (by another process, or by hand) is checked
    # again, and downloaded again when it is no longer the file.
    Path(files.weight_file).write_bytes(b"<html>cached by something that did not check</html>")
    again = resolve_model("original")
    assert checked == ["options", "weights", "weights"]  # the damaged copy, then the new one
    assert Path(again.weight_file).read_bytes() == (FIXTURES / "lm_weights.hdf5").read_bytes()
    # Another cache is another copy.
    other = resolve_model("original", cache_dir=cache_dir / "other")
    assert Path(other.weight_file).parent == cache_dir / "other" and len(checked) == 5


def test_elmo_embedder_default_and_named_model(model_server, cache_dir, reference):
    expected = reference.embed_batch(SENTENCES)
    for embedder in (ElmoEmbedder(), ElmoEmbedder(model="original")):
        for ours, theirs in zip(embedder.embed_batch(SENTENCES), expected):
            np.testing.assert_array_equal(ours, theirs)
    with pytest.raises(ConfigurationError) as info:
        ElmoEmbedder(model="small")  # not on this model_server
    message = str(info.value)
    assert PUBLISHED_MODELS["small"].options_url(model_server.url) in message
    assert "not found (HTTP 404)" in message and MODELS_URL_VARIABLE in message
    assert entries_of(PUBLISHED_MODELS["small"].options_url(model_server.url), cache_dir) == []


@pytest.mark.parametrize("behaviour", [NOT_FOUND, DROPPED, HTML_PAGE])
@pytest.mark.parametrize("which", ["options", "weights"])
def test_a_bad_download_is_a_clear_error_and_leaves_no_cache_entry(
    model_server, cache_dir, behaviour, which
):
    url = url_of(which, model_server)
    model_server.misbehave[model_server.path_of(url)] = behaviour
    with pytest.raises(ConfigurationError) as info:
        resolve_model(cache_dir=cache_dir)
    message = str(info.value)
    assert url in message and "\n" not in message
    expected = {
        NOT_FOUND: "not found (HTTP 404)",
        DROPPED: "failed (",  # the transfer noticed the missing bytes
        HTML_PAGE: "the server sent an HTML or XML page",
    }[behaviour]
    assert expected in message
    assert entries_of(url, cache_dir) == []
    assert not [name for name in cache_entries(cache_dir) if name.endswith(".tmp")]

    # Fixed on the server: the next run downloads it.
    del model_server.misbehave[model_server.path_of(url)]
    files = resolve_model(cache_dir=cache_dir)
    assert Path(files.weight_file).read_bytes() == (FIXTURES / "lm_weights.hdf5").read_bytes()


@pytest.mark.parametrize(
    "which, content, expected",
    [
        ("weights", "truncated", "a damaged or incomplete HDF5 file"),
        ("weights", b"\x00" * 4096, "not an HDF5 file"),
        ("options", b'{"lstm": {"dim": 8}}', "it is JSON but not ELMo options (the file: missing"),
        ("options", b"\xff\xfe not text", "it is not JSON"),
    ],
)
def test_a_complete_transfer_of_the_wrong_file_is_removed_from_the_cache(
    model_server, cache_dir, which, content, expected
):
    url = url_of(which, model_server)
    if content == "truncated":
        # A file cut short that the transfer cannot notice (its Content-Length says the same).
        content = model_server.files[model_server.path_of(url)][:-1000]
    model_server.files[model_server.path_of(url)] = content
    with pytest.raises(ConfigurationError, match="did not give a bilm-tf") as info:
        resolve_model(cache_dir=cache_dir)
    assert url in str(info.value) and expected in str(info.value)
    assert entries_of(url, cache_dir) == []


def test_a_damaged_cached_copy_is_downloaded_again(model_server, cache_dir):
    files = resolve_model(cache_dir=cache_dir)
    Path(files.weight_file).write_bytes(b"<html>cached by something that did not check</html>")
    again = resolve_model(cache_dir=cache_dir)
    assert Path(again.weight_file).read_bytes() == (FIXTURES / "lm_weights.hdf5").read_bytes()


def test_offline_with_an_empty_cache_is_one_line_naming_the_url(model_server, cache_dir):
    model_server.stop()
    with pytest.raises(ConfigurationError) as info:
        resolve_model(cache_dir=cache_dir)
    message = str(info.value)
    assert message.startswith(f"cannot download {ORIGINAL.options_url(model_server.url)} (")
    assert "Connection refused" in message and str(cache_dir) in message
    assert "model=DIRECTORY" in message and "options_file=OPTIONS_JSON" in message
    assert "\n" not in message
    assert entries_of(ORIGINAL.options_url(model_server.url), cache_dir) == []


def test_explicit_urls_win_over_model_and_work_offline_once_cached(model_server, cache_dir):
    # Not the published layout: files that may change, so the server is asked each time.
    model_server.files["/mine/options.json"] = (FIXTURES / "options.json").read_bytes()
    model_server.files["/mine/weights.hdf5"] = (FIXTURES / "lm_weights.hdf5").read_bytes()
    options_url, weights_url = f"{model_server.url}/mine/options.json", f"{model_server.url}/mine/weights.hdf5"
    files = resolve_model("no-such-model", options_file=options_url, weight_file=weights_url)
    assert Path(files.weight_file).read_bytes() == (FIXTURES / "lm_weights.hdf5").read_bytes()
    requests_before = len(model_server.requests)
    assert resolve_model(options_file=options_url, weight_file=weights_url) == files
    assert len(model_server.requests) > requests_before  # the ETags were checked
    assert model_server.gets().count("/mine/weights.hdf5") == 1  # but nothing downloaded again
    model_server.stop()
    # Offline, cached_path's rule: the newest cached copy (found at once, without its retries).
    assert resolve_model(options_file=options_url, weight_file=weights_url) == files


def test_published_urls_given_as_files_are_not_asked_about_again(model_server, cache_dir):
    # As in AllenNLP configs, which name the published files by URL.
    urls = dict(options_file=ORIGINAL.options_url(), weight_file=ORIGINAL.weights_url())
    files = resolve_model(**urls)
    requests_before = len(model_server.requests)
    again, default = resolve_model(**urls), resolve_model()
    assert again == files
    assert (default.options_file, default.weight_file) == (files.options_file, files.weight_file)
    assert len(model_server.requests) == requests_before


def test_only_one_of_the_files_is_an_error_naming_the_other():
    with pytest.raises(ConfigurationError, match="^weight_file not given: ELMo needs options_file"):
        resolve_model(options_file=FIXTURES / "options.json")
    with pytest.raises(ConfigurationError, match="^options_file not given"):
        ElmoEmbedder(weight_file=FIXTURES / "lm_weights.hdf5")


def export_layout(directory: Path) -> Path:
    """The fixture as ``allennlp elmo-export`` writes a model: options.json + weights.hdf5."""
    directory.mkdir()
    shutil.copy(FIXTURES / "options.json", directory / "options.json")
    shutil.copy(FIXTURES / "lm_weights.hdf5", directory / "weights.hdf5")
    return directory


def test_model_directory(tmp_path, reference):
    directory = export_layout(tmp_path / "exported")
    files = resolve_model(directory)
    assert (files.options_file, files.weight_file) == (
        str(directory / "options.json"),
        str(directory / "weights.hdf5"),
    )
    # Published files as downloaded by hand work too.
    by_hand = tmp_path / "by_hand"
    by_hand.mkdir()
    prefix = f"elmo_{ORIGINAL.architecture}"
    shutil.copy(FIXTURES / "options.json", by_hand / f"{prefix}_options.json")
    shutil.copy(FIXTURES / "lm_weights.hdf5", by_hand / f"{prefix}_weights.hdf5")
    embedder = ElmoEmbedder(model=str(by_hand))
    for ours, theirs in zip(embedder.embed_batch(SENTENCES), reference.embed_batch(SENTENCES)):
        np.testing.assert_array_equal(ours, theirs)

    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigurationError, match="holds no ELMo model: expected options.json"):
        resolve_model(tmp_path / "empty")
    with pytest.raises(ConfigurationError, match="not a model directory, ZIP or model.tar.gz"):
        resolve_model(directory / "weights.hdf5")
    with pytest.raises(ConfigurationError, match="unknown ELMo model 'tiny': not a published"):
        resolve_model("tiny")


def test_model_from_a_training_run(tmp_path, reference):
    from tests.modules.test_elmo import write_bilm_archive  # a run with the fixture's weights

    run = write_bilm_archive(tmp_path / "run")
    assert resolve_model(run).archive_file == str(run)  # the serialization directory
    assert resolve_model(run / "model.tar.gz").archive_file == str(run / "model.tar.gz")
    embedder = ElmoEmbedder(model=run / "model.tar.gz")
    for ours, theirs in zip(embedder.embed_batch(SENTENCES), reference.embed_batch(SENTENCES)):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)


def test_token_embedder_from_a_config_with_a_model_directory(tmp_path):
    directory = export_layout(tmp_path / "exported")
    embedder = TokenEmbedder.from_params(
        Params({"type": "elmo_token_embedder", "model": str(directory), "dropout": 0.0})
    ).eval()
    core = Elmo(
        str(FIXTURES / "options.json"), str(FIXTURES / "lm_weights.hdf5"), dropout=0.0
    ).eval()
    ids = core.bilm.character_ids.batch_to_ids(SENTENCES)
    assert torch.allclose(embedder(ids), core(ids)["elmo_representations"][0], atol=1e-6)


def test_describe_published_models(model_server, cache_dir):
    text = describe_published_models()
    for model in PUBLISHED_MODELS.values():
        assert model.options_url(model_server.url) in text and model.weights_url(model_server.url) in text
    assert "original             93.6M        1024  no" in text
    resolve_model()
    assert "original             93.6M        1024  yes" in describe_published_models()
    assert str(cache_dir) in text and f"{MODELS_URL_VARIABLE}={model_server.url}" in text
