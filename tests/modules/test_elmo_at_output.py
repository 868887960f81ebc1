"""
ELMo at the input and the output of a task encoder (``elmo_input_output`` + ``elmo_at_output``):
the embedder against AllenNLP core's ``Elmo`` with two representations, the encoder wrappers
against a hand computation, and a ``crf_tagger`` built and trained from a config.
"""
import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.data import Batch, Instance, Vocabulary
from allennlp.data.fields import SequenceLabelField, TextField
from allennlp.data.token_indexers import SingleIdTokenIndexer
from allennlp.data.tokenizers import Token
from allennlp.models import Model
from allennlp.modules import Seq2SeqEncoder, Seq2VecEncoder, TextFieldEmbedder

from elmo_plugin.data.token_indexers import ElmoCharactersIndexer
from elmo_plugin.modules.elmo_at_output import (
    ElmoAtOutputSeq2Seq,
    ElmoAtOutputSeq2Vec,
    ElmoInputOutputEmbedder,
)
from tests.helpers import FIXTURE_OPTIONS, FIXTURE_WEIGHTS
from tests.modules.test_elmo import ATOL, SENTENCES, core_elmo

pytestmark = pytest.mark.usefixtures("single_thread")

ELMO_DIM = 32  # the fixture biLM: 2 x projection_dim 16


def batch(vocab: Vocabulary, sentences=SENTENCES, with_tags: bool = False):
    indexers = {"tokens": SingleIdTokenIndexer(), "elmo": ElmoCharactersIndexer()}
    instances = []
    for sentence in sentences:
        field = TextField([Token(t) for t in sentence], indexers)
        fields = {"tokens": field}
        if with_tags:
            # More than one label, or the CRF's loss would be constant.
            fields["tags"] = SequenceLabelField(["B-X"] + ["O"] * (len(sentence) - 1), field)
        instances.append(Instance(fields))
    if vocab.get_vocab_size("tokens") <= 2:
        vocab.extend_from_instances(instances)
    result = Batch(instances)
    result.index_instances(vocab)
    return result.as_tensor_dict()


def embedder_params(**elmo) -> Params:
    return Params(
        {
            "type": "elmo_input_output",
            "text_field_embedder": {"token_embedders": {"tokens": {"type": "embedding", "embedding_dim": 5}}},
            "elmo": {
                "options_file": str(FIXTURE_OPTIONS),
                "weight_file": str(FIXTURE_WEIGHTS),
                "dropout": 0.0,
                **elmo,
            },
        }
    )


@pytest.mark.parametrize("do_layer_norm", [False, True])
def test_the_embedder_is_the_models_embeddings_then_two_mixes_of_one_biLM_run(do_layer_norm):
    vocab = Vocabulary()
    tensors = batch(vocab)["tokens"]
    embedder = TextFieldEmbedder.from_params(
        embedder_params(do_layer_norm=do_layer_norm), vocab=vocab
    ).eval()
    assert isinstance(embedder, ElmoInputOutputEmbedder)
    assert embedder.get_elmo_dim() == ELMO_DIM and embedder.get_output_dim() == 5 + 2 * ELMO_DIM
    core = core_elmo(do_layer_norm, num_output_representations=2)
    # Two different mixes, so that swapping input and output would show.
    with torch.no_grad():
        for k, weights in enumerate(([0.5, -1.0, 2.0], [-2.0, 1.0, 0.25])):
            embedder.elmo.scalar_mixes[k].gamma.fill_(1.5 + k)
            core_mix = getattr(core, f"scalar_mix_{k}")
            for i, value in enumerate(weights):
                embedder.elmo.scalar_mixes[k].scalar_parameters[i].fill_(value)
                core_mix.scalar_parameters[i].fill_(value)
            core_mix.gamma.fill_(1.5 + k)
    output = embedder(tensors)
    expected_tokens = embedder._text_field_embedder({"tokens": tensors["tokens"]})
    expected_input, expected_output = core(tensors["elmo"]["elmo_tokens"])["elmo_representations"]
    assert output.shape[-1] == 5 + 2 * ELMO_DIM
    assert torch.equal(output[..., :5], expected_tokens)
    assert torch.allclose(output[..., 5 : 5 + ELMO_DIM], expected_input, atol=ATOL)
    assert torch.allclose(output[..., 5 + ELMO_DIM :], expected_output, atol=ATOL)
    assert not torch.allclose(expected_input, expected_output, atol=1e-2)


def test_the_embedder_names_a_missing_elmo_indexer():
    vocab = Vocabulary()
    tensors = batch(vocab)["tokens"]
    embedder = TextFieldEmbedder.from_params(embedder_params(), vocab=vocab)
    with pytest.raises(ConfigurationError, match="no indexer named 'elmo'.*'tokens'"):
        embedder({"tokens": tensors["tokens"]})
    with pytest.raises(Exception, match="num_output_representations"):
        TextFieldEmbedder.from_params(embedder_params(num_output_representations=1), vocab=vocab)


def test_seq2seq_wrapper_is_the_encoder_output_then_the_elmo_features():
    torch.manual_seed(0)
    lstm = Seq2SeqEncoder.from_params(
        Params({"type": "lstm", "input_size": 6, "hidden_size": 3, "bidirectional": True})
    )
    wrapper = ElmoAtOutputSeq2Seq(lstm, elmo_dim=4)
    assert (wrapper.get_input_dim(), wrapper.get_output_dim()) == (10, 10)
    assert wrapper.is_bidirectional()
    inputs = torch.randn(2, 5, 10)
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    output = wrapper(inputs, mask)
    assert torch.equal(output[..., :6], lstm(inputs[..., :6], mask))
    assert torch.equal(output[..., 6:], inputs[..., 6:])
    with pytest.raises(ConfigurationError, match="got 9 input features, expected 10"):
        wrapper(inputs[..., :9], mask)
    with pytest.raises(ConfigurationError, match="elmo_dim must be >= 1"):
        ElmoAtOutputSeq2Seq(lstm, elmo_dim=0)


def test_seq2vec_wrapper_appends_the_mean_of_the_elmo_features_over_real_tokens():
    torch.manual_seed(0)
    boe = Seq2VecEncoder.from_params(Params({"type": "boe", "embedding_dim": 6}))
    wrapper = Seq2VecEncoder.from_params(
        Params({"type": "elmo_at_output", "encoder": {"type": "boe", "embedding_dim": 6}, "elmo_dim": 4})
    )
    assert isinstance(wrapper, ElmoAtOutputSeq2Vec)
    assert (wrapper.get_input_dim(), wrapper.get_output_dim()) == (10, 10)
    inputs = torch.randn(2, 5, 10)
    mask = torch.tensor([[True] * 5, [True, True, False, False, False]])
    output = wrapper(inputs, mask)
    assert torch.allclose(output[:, :6], boe(inputs[..., :6], mask))
    # By hand: the mean over the first 5 and the first 2 tokens.
    assert torch.allclose(output[0, 6:], inputs[0, :, 6:].mean(dim=0), atol=1e-6)
    assert torch.allclose(output[1, 6:], inputs[1, :2, 6:].mean(dim=0), atol=1e-6)


def tagger_params(elmo_dim: int) -> Params:
    return Params(
        {
            "type": "crf_tagger",
            "text_field_embedder": embedder_params(dropout=0.5).as_dict(),
            "encoder": {
                "type": "elmo_at_output",
                "encoder": {"type": "lstm", "input_size": 5 + ELMO_DIM, "hidden_size": 4, "bidirectional": True},
                "elmo_dim": elmo_dim,
            },
            "regularizer": {"regexes": [["scalar_parameters", {"type": "l2", "alpha": 0.001}]]},
        }
    )


def test_a_crf_tagger_with_elmo_at_input_and_output_builds_and_learns_both_mixes():
    vocab = Vocabulary()
    tensors = batch(vocab, with_tags=True)
    vocab.add_tokens_to_namespace(["O", "B-X"], "labels")
    model = Model.from_params(vocab=vocab, params=tagger_params(ELMO_DIM))
    # Both mixes are trainable and regularised; the biLM stays frozen.
    # (AllenNLP's names: each mix's layer weights are "...scalar_parameters.0", ".1", ".2".)
    mixes = {
        n.rsplit(".scalar_parameters.", 1)[0]
        for n, p in model.named_parameters()
        if "scalar_parameters" in n and p.requires_grad
    }
    assert len(mixes) == 2
    assert not any(p.requires_grad for n, p in model.named_parameters() if "_elmo_lstm" in n)
    model.train()
    loss = model(**tensors)["loss"] + model.get_regularization_penalty()
    loss.backward()
    for name, parameter in model.named_parameters():
        if "scalar_parameters" in name:
            assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name
    # An elmo_dim that does not match the embedder: the model refuses to build.
    with pytest.raises(ConfigurationError, match="text field embedding dim"):
        Model.from_params(vocab=vocab, params=tagger_params(ELMO_DIM // 2))
