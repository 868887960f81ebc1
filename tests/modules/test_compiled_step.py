"""
The compiled LSTM recurrence (`elmo_plugin.modules.execution.compiled_step`) against the eager
paths: the training model's loss and every gradient, compiled with Inductor's C++ backend on the
CPU, equal the eager ones within float32 rounding, on random weights whose clips bind and on the
golden fixture's weights; the recurrence is one graph, without breaks; the plan reaches the
layers only where it compiles and only for batches without padding; and the TF32 option touches
CUDA's setting only, for the forward and the backward pass. (What is compiled, run eagerly,
against the plain definition: tests/modules/test_fast_paths.py.)

All compiled cases share one architecture (the golden fixture's: 64 cells, projection 16) and one
window shape, so one process compiles the recurrence once for training and once for inference.
"""
import copy
import logging
import math
from typing import Dict, Tuple

import pytest
import torch
from allennlp.common.checks import ConfigurationError

from elmo_plugin.data.character_ids import batch_to_ids
from elmo_plugin.data.vocabulary import BilmTfVocabulary
from elmo_plugin.models.elmo_language_model import ElmoLanguageModel
from elmo_plugin.modules.execution import compiled_step, plan
from elmo_plugin.modules.execution.lstm_recurrence import (
    LstmWeights,
    recurrence_backward,
    reference_recurrence,
    training_recurrence,
)
from elmo_plugin.modules.execution.plan import ExecutionPlan
from tests.helpers import FIXTURE_OPTIONS, FIXTURE_WEIGHTS, assert_clips_exercised, randomize_bilm_

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module", autouse=True)
def nothing_compiled_by_earlier_modules():
    """Starts the module from a clean compiled state: other modules' compilations of the same
    functions (other shapes) count towards dynamo's recompile limit, which this module would reach
    after them in an order that runs them first (``-m slow`` alone)."""
    torch._dynamo.reset()
    yield

WORDS = ["<S>", "</S>", "<UNK>", "the", "cat", "sat", "on", "a", "mat", "dog", "ran", "."]
BATCH, WINDOW = 3, 6
# Float32 rounding, accumulated over the steps of a window and two layers: the compiled and eager
# paths sum in different orders (fused kernels, autograd's backward against the hand-written one).
RELATIVE = 2e-5
# The whole model's gradients (the character encoder's too): the eager path's own distance from
# float64 reaches 1e-4 (the character embedding's, measured by the float32 rounding test below).
WHOLE_MODEL_RELATIVE = 1e-4


@pytest.fixture(scope="module")
def vocab(tmp_path_factory) -> BilmTfVocabulary:
    path = tmp_path_factory.mktemp("vocab") / "vocabulary.txt"
    path.write_text("\n".join(WORDS) + "\n", encoding="utf-8")
    return BilmTfVocabulary.from_bilm_tf_file(str(path))


def fixture_options() -> Dict:
    import json

    return json.loads(FIXTURE_OPTIONS.read_text())


def make_model(vocab, compile, weights: str) -> ElmoLanguageModel:
    torch.manual_seed(0)
    model = ElmoLanguageModel(
        vocab, fixture_options(), num_samples=5, compile=compile, check_vocabulary_order=False,
        initial_weight_file=str(FIXTURE_WEIGHTS) if weights == "golden" else None,
    )
    if weights == "random":
        randomize_bilm_(model.bilm, seed=3, scale=2.0)
    return model.train()


def windows(seed: int = 0) -> Dict:
    """Stream-mode fields: every row a full window of ``WINDOW`` tokens in both directions."""
    generator = torch.Generator().manual_seed(seed)
    words = WORDS[3:]
    fields = {}
    for direction in ("forward", "backward"):
        rows = [[words[int(k)] for k in torch.randint(len(words), (WINDOW,), generator=generator)]
                for _ in range(BATCH)]
        fields[f"{direction}_tokens"] = {"elmo_characters": {"elmo_tokens": batch_to_ids(rows)}}
        targets = torch.randint(len(WORDS), (BATCH, WINDOW), generator=generator)
        fields[f"{direction}_targets"] = {"lm_targets": {"tokens": targets}}
    return fields


def loss_and_gradients(model: ElmoLanguageModel, fields: Dict) -> Tuple[float, Dict]:
    model.zero_grad(set_to_none=True)
    torch.manual_seed(1)  # the same sampled negatives on both sides
    loss = model(**fields)["loss"]
    loss.backward()
    return float(loss.detach()), {name: parameter.grad.clone()
                         for name, parameter in model.named_parameters()
                         if parameter.grad is not None}


def relative_difference(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    ours, theirs = ours.detach().double(), theirs.detach().double()
    return float((ours - theirs).norm() / theirs.norm().clamp_min(1e-30))


@pytest.fixture(autouse=True)
def fresh_shapes():
    compiled_step.forget_compiled_shapes()
    yield
    compiled_step.forget_compiled_shapes()


@pytest.mark.slow  # compiling takes 20-90 s on a busy 2-core machine (5 s with a warm cache)
@pytest.mark.parametrize("weights", ["random", "golden"])
def test_compiled_training_equals_eager_within_float32_rounding(vocab, weights, caplog):
    """
    Float32 rounding is measured, not assumed: each gradient's compiled-eager distance must stay
    within a few times the eager path's own largest distance from the same computation in float64
    (a missing clip, or a clip's gradient passed where it binds, is orders of magnitude more).
    """
    eager = make_model(vocab, False, weights)
    compiled = copy.deepcopy(eager)
    compiled._compile = True
    exact = copy.deepcopy(eager).double()
    if weights == "random":
        # The clips bind on these weights, so a clip missing or with a wrong gradient shows.
        ids = windows()["forward_tokens"]["elmo_characters"]["elmo_tokens"]
        assert_clips_exercised(eager.bilm, ids, min_effect=1e-3)
    calls = []
    real = compiled_step.compiled_recurrence
    with caplog.at_level(logging.INFO, logger=compiled_step.__name__):
        for step in range(2):  # the second carries the first's state (stream mode)
            fields = windows(seed=step)
            eager_loss, eager_gradients = loss_and_gradients(eager, fields)
            exact_loss, exact_gradients = loss_and_gradients(exact, fields)
            compiled_step.compiled_recurrence = (
                lambda mode, gradient=False: calls.append(mode) or real(mode, gradient))
            try:
                compiled_loss, compiled_gradients = loss_and_gradients(compiled, fields)
            finally:
                compiled_step.compiled_recurrence = real
            assert math.isfinite(eager_loss)
            assert abs(compiled_loss - eager_loss) <= 4 * abs(eager_loss - exact_loss) + 1e-6
            assert compiled_gradients.keys() == eager_gradients.keys()
            # One gradient's eager rounding can be small by chance (a sum whose errors cancel:
            # the first convolution's bias, 4e-6 on an AVX2 EPYC, where the compiled path's is
            # 2.3e-5), so the scale is the largest eager rounding of the step.
            rounding = max(relative_difference(gradient, exact_gradients[name])
                           for name, gradient in eager_gradients.items())
            for name, gradient in eager_gradients.items():
                difference = relative_difference(compiled_gradients[name], gradient)
                assert difference <= 4 * rounding + 1e-6, (step, name, difference, rounding)
    # Every layer and direction ran compiled (2 x 2 per step); one shape, compiled once and
    # logged once with its time.
    assert calls == ["default"] * 8
    compile_lines = [r.getMessage() for r in caplog.records if "compiled in" in r.getMessage()]
    assert len(compile_lines) == 1, compile_lines
    assert f"batch {BATCH} x {WINDOW} steps (64 cells, projection 16" in compile_lines[0]


@pytest.mark.slow  # compiling: see above
def test_compiled_training_in_bfloat16_autocast_equals_eager(vocab):
    """``mixed_precision``: the products in bfloat16 on both paths (where the CPU has native
    bfloat16; elsewhere both train in float32), everything else float32."""
    eager = make_model(vocab, False, "random")
    eager._mixed_precision = True
    compiled = copy.deepcopy(eager)
    compiled._compile = True
    for step in range(2):
        fields = windows(seed=step)
        eager_loss, eager_gradients = loss_and_gradients(eager, fields)
        compiled_loss, compiled_gradients = loss_and_gradients(compiled, fields)
        assert compiled_loss == pytest.approx(eager_loss, rel=1e-6)
        for name, gradient in eager_gradients.items():
            assert relative_difference(compiled_gradients[name], gradient) < WHOLE_MODEL_RELATIVE, name
    assert len(compiled_step._SHAPES_SEEN) == 1


def random_recurrence_inputs(seed: int = 0, requires_grad: bool = True, clips=(0.5, 0.4)):
    """Input gates, h0, c0 and `LstmWeights` of a full batch: clips at 0.5 and 0.4 bind on most
    positions."""
    generator = torch.Generator().manual_seed(seed)
    cell, projection = 64, 16

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, generator=generator) * scale).requires_grad_(requires_grad)

    return (randn(WINDOW * BATCH, 4 * cell, scale=2.0), randn(BATCH, projection),
            randn(BATCH, cell), LstmWeights(randn(projection, 4 * cell, scale=0.5),
                                            randn(cell, projection, scale=0.5), *clips))


def leaves(inputs):
    return [*inputs[:3], inputs[3].recurrent, inputs[3].projection]


def test_the_compiled_functions_are_one_graph_each_on_a_fixed_shape():
    import torch._dynamo

    torch._dynamo.reset()
    inputs = random_recurrence_inputs(clips=(3.0, 3.0))
    steps = [BATCH] * WINDOW
    explain = torch._dynamo.explain
    with torch.no_grad():
        inference = explain(reference_recurrence)(*inputs, steps)
        forward = explain(reference_recurrence)(*inputs, steps, True)
        outputs, final_h, final_c, record = reference_recurrence(*inputs, steps, True)
        backward = explain(recurrence_backward)(
            torch.ones_like(outputs), torch.zeros_like(final_h), torch.zeros_like(final_c),
            *inputs[1:], outputs, record, steps)
    for explanation in (inference, forward, backward):
        assert explanation.graph_break_count == 0, explanation.break_reasons
        assert explanation.graph_count == 1


def compiling(setting) -> ExecutionPlan:
    return ExecutionPlan.build("cpu", compile=setting)


@pytest.mark.slow  # compiling: see above
def test_compiled_recurrence_equals_the_hand_written_backward_where_clips_bind():
    """At the recurrence alone (Inductor, CPU): clips at 0.5 and 0.4 bind on most positions."""
    compiled_inputs = random_recurrence_inputs(seed=5)
    eager_inputs = random_recurrence_inputs(seed=5)
    steps = [BATCH] * WINDOW
    function = compiled_step.recurrence_for(
        compiling(True), *compiled_inputs, steps, needs_gradient=True)
    assert function is not None
    compiled = function(*compiled_inputs, steps)
    eager = training_recurrence(*eager_inputs, steps)
    assert float((eager[2].abs() == 0.5).float().mean()) > 0.2  # the cell clip binds
    assert float((eager[0].abs() == 0.4).float().mean()) > 0.2  # the projection clip binds
    weights = torch.linspace(-1, 1, eager[0].numel()).view_as(eager[0])
    for compiled_output, eager_output in zip(compiled, eager):
        assert relative_difference(compiled_output, eager_output) < 1e-6
    (compiled[0] * weights).sum().backward()
    (eager[0] * weights).sum().backward()
    for compiled_input, eager_input in zip(leaves(compiled_inputs), leaves(eager_inputs)):
        assert relative_difference(compiled_input.grad, eager_input.grad) < RELATIVE


def test_the_plan_reaches_only_batches_without_padding_where_it_compiles():
    inputs = random_recurrence_inputs(requires_grad=False, clips=(3.0, 3.0))
    full = [BATCH] * WINDOW
    padded = [BATCH] * (WINDOW - 1) + [BATCH - 1]

    def answer(step_sizes, execution):
        return compiled_step.recurrence_for(execution, *inputs, step_sizes, False)

    assert answer(full, None) is None  # no plan: eager
    assert answer(full, compiling(False)) is None
    assert plan.COMPILED_BY_DEFAULT["cpu"] is None
    assert compiling("auto").compile_mode is None  # not measured faster on a CPU: eager
    assert compiling(True).compile_mode == "default"
    assert answer(padded, compiling(True)) is None
    with pytest.raises(ValueError, match="compile must be one of"):
        compiling("fast")


def test_a_wrong_compile_setting_is_a_configuration_error(vocab):
    with pytest.raises(ConfigurationError, match="model.compile must be one of"):
        ElmoLanguageModel(vocab, fixture_options(), compile="yes")


def test_tf32_is_set_for_cuda_only_and_restored_after_each_call():
    matmul = torch.backends.cuda.matmul
    before = matmul.allow_tf32
    try:
        matmul.allow_tf32 = False
        assert ExecutionPlan.build("cpu", tf32=True).tf32 is None
        with plan.float32_products(ExecutionPlan.build("cpu", tf32=True)):
            assert matmul.allow_tf32 is False
        # Setting CUDA's flag needs no GPU: what a CUDA device would get.
        with plan.float32_products(ExecutionPlan.build("cuda:0", tf32=True)):
            assert matmul.allow_tf32 is True
        assert matmul.allow_tf32 is False
        matmul.allow_tf32 = True
        with plan.float32_products(ExecutionPlan.build("cuda", tf32=False)):
            assert matmul.allow_tf32 is False
        assert matmul.allow_tf32 is True
        with plan.float32_products(ExecutionPlan.build("cuda", tf32=None)):
            assert matmul.allow_tf32 is True
    finally:
        matmul.allow_tf32 = before


def test_tf32_holds_for_the_backward_pass_and_is_restored_after_it():
    """The backward pass runs after the forward pass has returned: the plan sets TF32 again
    when it starts at the loss and restores it when every parameter's gradient is computed."""
    matmul = torch.backends.cuda.matmul
    before = matmul.allow_tf32
    cuda = ExecutionPlan.build("cuda:0", tf32=True)  # a CUDA plan; the tensors stay on the CPU
    weight = torch.nn.Parameter(torch.randn(3, 3))
    seen = []
    try:
        matmul.allow_tf32 = False
        for step in range(2):
            with plan.running(cuda):
                assert matmul.allow_tf32 is True
                hidden = torch.randn(2, 3) @ weight
                hidden.register_hook(lambda gradient: seen.append(matmul.allow_tf32))
                loss = hidden.sum()
            assert matmul.allow_tf32 is False
            plan.tf32_through_backward(cuda, loss, [weight])
            loss.backward()
            assert seen == [True] * (step + 1)  # the backward pass ran in TF32
            assert matmul.allow_tf32 is False  # and left the setting as it was
        # A forward pass without a backward pass leaves nothing behind.
        with plan.running(cuda):
            loss = (torch.randn(2, 3) @ weight).sum()
        plan.tf32_through_backward(cuda, loss, [weight])
        del loss
        (torch.randn(2, 3) @ weight).sum().backward()
        assert matmul.allow_tf32 is False
    finally:
        matmul.allow_tf32 = before


def test_training_on_a_cpu_leaves_the_tf32_setting_alone(vocab):
    matmul = torch.backends.cuda.matmul
    before = matmul.allow_tf32
    assert make_model(vocab, False, "random")._tf32 is False  # the default, until a GPU run
    model = ElmoLanguageModel(vocab, fixture_options(), num_samples=5, compile=False, tf32=True,
                              check_vocabulary_order=False).train()
    model(**windows())["loss"].backward()  # asked for: on a CPU it must still change nothing
    assert matmul.allow_tf32 == before
    assert model._plans == {(torch.device("cpu"), True): ExecutionPlan(torch.device("cpu"))}


@pytest.mark.slow
def test_compiled_embedding_of_one_length_equals_eager(tmp_path):
    """`ElmoEmbedder(compile=True)`: a batch of one length runs compiled, one with padding not."""
    from elmo_plugin.elmo_embedder import ElmoEmbedder

    eager = ElmoEmbedder(str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS))
    compiled = ElmoEmbedder(str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS), compile=True)
    same_length = [["the", "cat", "sat", "on", "a"], ["a", "dog", "ran", "on", "."]]
    for batch in (same_length, same_length + [["the", "mat"]]):
        ours, _ = compiled.batch_to_embeddings(batch)
        theirs, _ = eager.batch_to_embeddings(batch)
        assert relative_difference(ours, theirs) < 1e-6
    assert len(compiled_step._SHAPES_SEEN) == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_compiled_recurrence_on_a_gpu_equals_eager_there(mode):
    """On a GPU (Triton kernels; with CUDA graphs in reduce-overhead), plain float32 products."""
    matmul = torch.backends.cuda.matmul
    before = matmul.allow_tf32
    matmul.allow_tf32 = False
    try:
        device = torch.device("cuda")

        def on_gpu(inputs):
            tensors = [t.detach().to(device).requires_grad_() for t in leaves(inputs)]
            return (*tensors[:3], LstmWeights(*tensors[3:], *inputs[3][2:]))

        compiled_inputs = on_gpu(random_recurrence_inputs(seed=7))
        eager_inputs = on_gpu(random_recurrence_inputs(seed=7))
        steps = [BATCH] * WINDOW
        function = compiled_step.recurrence_for(
            ExecutionPlan.build(device, compile=mode), *compiled_inputs, steps,
            needs_gradient=True)
        assert function is not None
        compiled = function(*compiled_inputs, steps)
        eager = training_recurrence(*eager_inputs, steps)
        for compiled_output, eager_output in zip(compiled, eager):
            assert relative_difference(compiled_output, eager_output) < 1e-6
        weights = torch.linspace(-1, 1, eager[0].numel(), device=device).view_as(eager[0])
        (compiled[0] * weights).sum().backward()
        (eager[0] * weights).sum().backward()
        for compiled_input, eager_input in zip(leaves(compiled_inputs), leaves(eager_inputs)):
            assert relative_difference(compiled_input.grad, eager_input.grad) < RELATIVE
    finally:
        matmul.allow_tf32 = before


@pytest.mark.slow  # compiling: see above
def test_allennlp_train_with_compile_trains_a_stream_epoch(tmp_path, monkeypatch):
    """The option as a user sets it (``-o '{"model.compile": true}'``): one epoch of stream
    batching through ``allennlp train``, its windows compiled once and run compiled, learning.
    (AllenNLP's training replaces the logging handlers, so the calls are counted instead.)"""
    import json

    from tests.training_configs.test_bilm_configs import TINY_BILM, train_bilm, write_sample_subset

    arguments = {**write_sample_subset(tmp_path / "data", train_lines=64, heldout_lines=16),
                 **TINY_BILM, "batching": "stream", "num_epochs": 1, "num_samples": 16,
                 "batch_size": 4}
    compiles, runs = [], []
    real_compile, real_run = compiled_step._compile_now, compiled_step.training_recurrence
    monkeypatch.setattr(compiled_step, "_compile_now", lambda function, arguments, gradient: (
        compiles.append(tuple(arguments[0].shape)) or real_compile(function, arguments, gradient)))
    monkeypatch.setattr(compiled_step, "training_recurrence", lambda *arguments: (
        runs.append(1) or real_run(*arguments)))
    train_bilm(tmp_path / "run", arguments, {"model.compile": True})
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["model"]["compile"] is True
    assert compiles == [(4 * 10, 4 * 16)]  # batch 4 x 10 steps, 16 cells: compiled once
    assert len(runs) > 4  # every layer and direction of the full windows, warm-up included
    log = (tmp_path / "run" / "out.log").read_text()
    assert log.count("compile: the LSTM recurrence for batch 4 x 10 steps") == 1
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert math.isfinite(metrics["validation_ppl"]) and metrics["validation_ppl"] < 160
