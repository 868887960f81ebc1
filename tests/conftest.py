"""Shared fixtures; the helpers themselves live in `tests.helpers`."""
from pathlib import Path

import pytest
import torch
from allennlp.common import file_utils

import elmo_plugin  # noqa: F401  (registers the plugin's components with AllenNLP)
from elmo_plugin.common import threads
from elmo_plugin.model_files.catalogue import MODELS_URL_VARIABLE, PUBLISHED_MODELS
from tests.helpers import FIXTURE_OPTIONS, FIXTURE_WEIGHTS, FIXTURES, make_random_bilm_files  # noqa: F401
from tests.model_server import ModelServer

# This process's threads fixed at PyTorch's number, so that no comparison of two runs here depends
# on the load between them; the plugin's own choice, which follows the load, is tested with fakes in
# tests/common/test_threads.py (the single_thread fixture below still sets one for its modules).
threads.fix_threads(torch.get_num_threads())


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.fail(f"ELMo test fixtures not found at {FIXTURES}")
    return FIXTURES


@pytest.fixture(scope="module")
def single_thread():
    """
    Runs a module's tiny-model tests on one intra-op thread, then restores the setting. The
    models are so small that threads bring nothing, and on a busy 2-core machine OpenMP's
    spinning threads made these tests 10-30 times slower.
    """
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


@pytest.fixture
def cache_dir(tmp_path_factory, monkeypatch) -> Path:
    """An empty download cache, also AllenNLP's default for the test (never the user's); outside
    tmp_path, so that tests can check that tmp_path holds no output."""
    directory = tmp_path_factory.mktemp("allennlp_cache")
    monkeypatch.setattr(file_utils, "CACHE_DIRECTORY", str(directory))
    return directory


@pytest.fixture
def model_server(monkeypatch):
    """A local HTTP server that serves the golden fixture as the published "original" model,
    with ELMO_MODELS_URL pointing at it."""
    with ModelServer() as server:
        server.serve_published(PUBLISHED_MODELS["original"], FIXTURES)
        monkeypatch.setenv(MODELS_URL_VARIABLE, server.url)
        yield server
