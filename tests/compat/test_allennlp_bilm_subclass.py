"""
AllenNLP's own token-cache tests of its biLM (``allennlp.modules.elmo._ElmoBiLm`` with
``vocab_to_cache``, called with character ids and word ids), ported the way code written for
AllenNLP ports them to the plugin: a subclass of `ElmoBiLm` that takes AllenNLP's call, built by
``from_files`` and given the tokens to cache. Each result is checked against AllenNLP's own
``_ElmoBiLm`` on the same fixture (its state reset before each call: ours is stateless).
"""
from typing import List, Optional

import pytest
import torch
from allennlp.data import Instance, Token, Vocabulary
from allennlp.data.batch import Batch
from allennlp.data.fields import TextField
from allennlp.data.token_indexers.elmo_indexer import ELMoTokenCharactersIndexer
from allennlp.data.token_indexers.single_id_token_indexer import SingleIdTokenIndexer
from allennlp.modules.elmo import _ElmoBiLm

from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.modules.elmo import Elmo
from tests.helpers import FIXTURE_OPTIONS, FIXTURE_WEIGHTS

pytestmark = pytest.mark.usefixtures("single_thread")

ATOL = 1e-5


class AllenNlpCallBiLm(ElmoBiLm):
    """The plugin's biLM called as AllenNLP's ``_ElmoBiLm`` is: ``bilm(character_ids, word_ids)``
    (the cache is looked up by characters here, so the word ids are not needed)."""

    def forward(self, inputs: torch.Tensor, word_inputs: Optional[torch.Tensor] = None):
        return super().forward(inputs)


def ported_bilm(vocab_to_cache: Optional[List[str]] = None) -> AllenNlpCallBiLm:
    bilm = AllenNlpCallBiLm.from_files(str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS))
    if vocab_to_cache is not None:
        bilm.cache_tokens(vocab_to_cache)
    return bilm.eval()


def allennlp_bilm(vocab_to_cache: Optional[List[str]] = None) -> _ElmoBiLm:
    return _ElmoBiLm(str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS), vocab_to_cache=vocab_to_cache).eval()


def indexed(sentences: List[List[str]]):
    """AllenNLP's tests' helper: the vocabulary of ``sentences`` and their character and word ids."""
    instances = [
        Instance({"elmo": TextField([Token(t) for t in sentence],
                                    {"character_ids": ELMoTokenCharactersIndexer(),
                                     "tokens": SingleIdTokenIndexer()})})
        for sentence in sentences
    ]
    batch = Batch(instances)
    vocab = Vocabulary.from_instances(instances)
    batch.index_instances(vocab)
    tensors = batch.as_tensor_dict()["elmo"]
    return vocab, tensors["character_ids"]["elmo_tokens"], tensors["tokens"]["tokens"]


def run_allennlp(bilm: _ElmoBiLm, character_ids, word_ids):
    bilm._elmo_lstm.reset_states()
    with torch.no_grad():
        return bilm(character_ids, word_ids)


def assert_same(ours, theirs):
    assert torch.equal(ours["mask"], theirs["mask"])
    assert len(ours["activations"]) == len(theirs["activations"])
    for mine, reference in zip(ours["activations"], theirs["activations"]):
        torch.testing.assert_close(mine, reference, rtol=0, atol=ATOL)


def test_the_ported_biLM_is_the_subclass():
    assert type(ported_bilm()) is AllenNlpCallBiLm


def test_the_cache_does_not_fail_on_uncached_words():
    vocab, in_vocab_chars, in_vocab_words = indexed([["here", "is"], ["a", "vocab"]])
    _, oov_chars, oov_words = indexed([["This", "is", "OOV"], ["so", "is", "this"]])
    words = list(vocab.get_token_to_index_vocabulary("tokens"))
    ours, theirs = ported_bilm(words), allennlp_bilm(words)
    for characters, word_ids in ((in_vocab_chars, in_vocab_words), (oov_chars, oov_words)):
        with torch.no_grad():
            assert_same(ours(characters, word_ids), run_allennlp(theirs, characters, word_ids))


def test_cached_and_uncached_character_encodings_agree():
    vocab, characters, word_ids = indexed([["This", "is", "a", "sentence"], ["Here", "'s", "one"],
                                           ["Another", "one"]])
    words = list(vocab.get_token_to_index_vocabulary("tokens"))
    with torch.no_grad():
        uncached = ported_bilm()(characters, characters)
        cached = ported_bilm(words)(characters, word_ids)
    assert_same(cached, uncached)
    assert_same(cached, run_allennlp(allennlp_bilm(words), characters, word_ids))


def test_elmo_with_a_cache_on_higher_dimensional_input():
    vocab, characters, word_ids = indexed([["This", "is", "a", "sentence"], ["Here", "'s", "one"],
                                           ["Another", "one"]])
    words = list(vocab.get_token_to_index_vocabulary("tokens"))
    elmo = Elmo(str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS), 1, vocab_to_cache=words, dropout=0.0,
                module=None).eval()
    module = Elmo(None, None, 1, dropout=0.0, module=ported_bilm(words)).eval()
    with torch.no_grad():
        single = elmo(characters, word_ids)["elmo_representations"][0]
        expanded = elmo(torch.stack([characters] * 4, dim=1), torch.stack([word_ids] * 4, dim=1))
        through_module = module(characters, word_ids)["elmo_representations"][0]
    for k in range(4):
        torch.testing.assert_close(expanded["elmo_representations"][0][:, k], single, rtol=0, atol=ATOL)
    # The same mix of the same layers, whether Elmo loaded the biLM or was given the subclass.
    torch.testing.assert_close(through_module, single, rtol=0, atol=0)
