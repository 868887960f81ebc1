"""
``dense_sparse_adagrad`` with the sampled softmax's sparse row gradients against the reference,
torch's Adagrad with dense gradients: Adagrad leaves a row whose gradient is zero unchanged, so
updating only the rows a step uses must give the dense update exactly, weights and accumulators
bit for bit, over several steps, in the module and through ``allennlp train``.
"""
import copy
import json
from pathlib import Path
from typing import Dict

import pytest
import torch
from allennlp.commands.train import train_model_from_file

from elmo_plugin.modules.sampled_softmax_loss import SampledSoftmaxLoss
from elmo_plugin.training.optimizers import DenseSparseAdagrad
from tests.helpers import config_calling
from tests.training_configs.test_bilm_configs import write_sample_subset

pytestmark = pytest.mark.usefixtures("single_thread")


def _named(*modules: torch.nn.Module):
    return [(f"{index}.{name}", parameter) for index, module in enumerate(modules)
            for name, parameter in module.named_parameters()]


def test_row_updates_equal_the_dense_update_bit_for_bit():
    # A softmax of 500 words behind a linear layer; targets from the 40 most frequent words, so
    # that ids repeat within a batch and between the targets and the negatives, two calls per
    # step (the biLM's two directions) add their gradients, and the norm is clipped as the
    # trainer clips (to 10: it does not bind here, so clipping multiplies by exactly 1).
    torch.manual_seed(0)
    num_words, dim, rows = 500, 8, 60
    dense_softmax = SampledSoftmaxLoss(num_words, dim, num_samples=32)
    dense_layer = torch.nn.Linear(dim, dim)
    sparse_softmax = copy.deepcopy(dense_softmax)
    sparse_softmax.sparse_gradients = True
    sparse_layer = copy.deepcopy(dense_layer)
    dense = torch.optim.Adagrad(
        [p for _, p in _named(dense_softmax, dense_layer)], lr=0.2, initial_accumulator_value=1.0
    )
    sparse = DenseSparseAdagrad(_named(sparse_softmax, sparse_layer), lr=0.2,
                                initial_accumulator_value=1.0)
    used = set()
    for step in range(6):
        inputs = torch.randn(2 * rows, dim)
        targets = torch.randint(0, 40, (2 * rows,))
        for softmax, layer, optimizer in ((dense_softmax, dense_layer, dense),
                                          (sparse_softmax, sparse_layer, sparse)):
            sampled = softmax.sample(generator=torch.Generator().manual_seed(step))
            optimizer.zero_grad()
            hidden = layer(inputs)
            loss = softmax(hidden[:rows], targets[:rows], sampled).mean()
            loss = loss + softmax(hidden[rows:], targets[rows:], sampled).mean()
            loss.backward()
            if softmax is sparse_softmax:
                assert softmax.softmax_weight.grad.is_sparse
                assert softmax.softmax_bias.grad.is_sparse
                # Its dense form is the dense gradient.
                assert torch.equal(softmax.softmax_weight.grad.to_dense(),
                                   dense_softmax.softmax_weight.grad)
                assert torch.equal(softmax.softmax_bias.grad.to_dense(),
                                   dense_softmax.softmax_bias.grad)
            optimizer.step()
        used |= set(targets.tolist()) | set(sampled.ids.tolist())
        for a, b in ((dense_softmax.softmax_weight, sparse_softmax.softmax_weight),
                     (dense_softmax.softmax_bias, sparse_softmax.softmax_bias),
                     (dense_layer.weight, sparse_layer.weight)):
            assert torch.equal(a, b), step
            assert torch.equal(dense.state[a]["sum"], sparse.state[b]["sum"]), step
            assert torch.equal(dense.state[a]["step"], sparse.state[b]["step"]), step
    # Rows no step used kept their accumulator's initial value.
    unused = sorted(set(range(num_words)) - used)
    assert unused and (sparse.state[sparse_softmax.softmax_weight]["sum"][unused] == 1.0).all()


@pytest.mark.filterwarnings("ignore:Sparse invariant checks are implicitly disabled")  # torch's own
def test_torch_adagrad_on_the_same_sparse_gradients_is_only_close():
    # Why the row by row form: torch's own sparse path coalesces the gradient (a sort whose size
    # the host must read) and computes param - lr * (g / std) where its dense path computes
    # param - (lr * g) / std: another rounding.
    torch.manual_seed(1)
    weight = torch.nn.Parameter(torch.randn(300, 8))
    ids = torch.randint(0, 300, (200,))
    grads = torch.randn(200, 8)
    references = {}
    for name in ("dense", "torch_sparse", "dense_sparse_adagrad"):
        parameter = torch.nn.Parameter(weight.detach().clone())
        if name == "dense_sparse_adagrad":
            optimizer = DenseSparseAdagrad([("w", parameter)], lr=0.2, initial_accumulator_value=1.0)
        else:
            optimizer = torch.optim.Adagrad([parameter], lr=0.2, initial_accumulator_value=1.0)
        for _ in range(3):
            gradient = torch.sparse_coo_tensor(ids.unsqueeze(0), grads, parameter.shape,
                                               check_invariants=True)
            parameter.grad = gradient.to_dense() if name == "dense" else gradient
            optimizer.step()
        references[name] = parameter.detach()
    assert torch.equal(references["dense_sparse_adagrad"], references["dense"])
    assert not torch.equal(references["torch_sparse"], references["dense"])
    assert torch.allclose(references["torch_sparse"], references["dense"], rtol=1e-6, atol=1e-7)


def test_weight_decay_needs_dense_gradients():
    parameter = torch.nn.Parameter(torch.zeros(5, 2))
    optimizer = DenseSparseAdagrad([("w", parameter)], weight_decay=0.1)
    parameter.grad = torch.sparse_coo_tensor(torch.tensor([[1]]), torch.ones(1, 2), (5, 2),
                                             check_invariants=True)
    with pytest.raises(RuntimeError, match="weight_decay changes every row"):
        optimizer.step()


def _train(directory: Path, data: Dict[str, str], batching: str, sparse: bool,
           overrides: Dict) -> Dict[str, torch.Tensor]:
    config = config_calling(
        directory.parent / f"{directory.name}.jsonnet", "bilm.jsonnet", **data,
        lstm_dim=16, projection_dim=8, batch_size=8, num_epochs=1, unroll_steps=10,
        num_samples=16, batching=batching, sparse_softmax=sparse,
    )
    train_model_from_file(str(config), str(directory),
                          overrides=json.dumps({"trainer.callbacks": [], **overrides}))
    optimizer = torch.load(directory / "training_state_e1_b0.th", weights_only=False)["optimizer"]
    state = torch.load(directory / "model_state_e1_b0.th")
    sums = {f"sum.{index}": value["sum"] for index, value in optimizer["state"].items()}
    return {**state, **sums}


@pytest.mark.parametrize("batching", ["stream", "sentences"])
def test_allennlp_train_with_sparse_softmax_gradients_equals_dense_training(tmp_path, batching):
    # bilm.jsonnet as it is (sparse_softmax, dense_sparse_adagrad) against its dense reference
    # (sparse_softmax=false: dense gradients, torch's Adagrad), the plugin's trainer clipping
    # the gradient norm to 10, one epoch of 200 sentences.
    data = write_sample_subset(tmp_path / "data", train_lines=200, heldout_lines=16)
    sparse = _train(tmp_path / "sparse", data, batching, True, {})
    dense = _train(tmp_path / "dense", data, batching, False, {})
    assert sparse.keys() == dense.keys()
    different = [name for name in dense if not torch.equal(sparse[name], dense[name])]
    assert different == []


def test_a_binding_norm_clip_equals_the_dense_one_to_float_rounding(tmp_path):
    # Clipped to 0.05, every step is scaled. The scale comes from the norm of all gradients,
    # which for the sparse rows sums the squares of their values, not of the mostly-zero dense
    # matrix: the same numbers, but a reduction of another length may round the last bit of
    # the norm differently (not on this CPU and size), so float32 rounding is what is promised.
    data = write_sample_subset(tmp_path / "data", train_lines=100, heldout_lines=16)
    overrides = {"trainer.grad_norm": 0.05}
    sparse = _train(tmp_path / "sparse", data, "stream", True, overrides)
    dense = _train(tmp_path / "dense", data, "stream", False, overrides)
    for name in dense:
        assert torch.allclose(sparse[name], dense[name], rtol=1e-5, atol=1e-6), name
    largest = max(float((dense[name] - sparse[name]).abs().max()) for name in dense)
    print(f"largest difference: {largest:.2e}")
    # The clip did bind: unclipped (to 10) the weights end elsewhere.
    unclipped = _train(tmp_path / "unclipped", data, "stream", True, {})
    assert max(float((unclipped[name] - sparse[name]).abs().max()) for name in dense) > 1e-3
