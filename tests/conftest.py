"""Shared fixtures; the helpers themselves live in `tests.helpers`."""
from pathlib import Path

import pytest

import elmo_plugin  # noqa: F401  (registers the plugin's components with AllenNLP)
from tests.helpers import FIXTURES, FIXTURE_OPTIONS, FIXTURE_WEIGHTS, make_random_bilm_files  # noqa: F401


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
