"""
A training step that never waits on the device: over the batches of ``allennlp train`` with
``training_configs/bilm.jsonnet`` (the plugin's trainer, model, sampled softmax and optimizer),
every read of a tensor's value by the host (``.item()``, ``float()``, ``int()``, ``bool()``,
``.tolist()``, ``.numpy()``, ``.cpu()``) and every operation whose output shape depends on the
data (``nonzero``, ``unique``, boolean indexing, ...) is recorded with the Python stack that made
it. On a GPU each of them waits until every kernel launched so far has run.

Allowed: the reads at the trainer's logging interval (``metrics_every_num_batches``), and, on
the general path, those of the biLM's network itself (the LSTM's per-step row counts, the token
encoder's distinct tokens, the character convolutions' token lengths). Stream training with the
fixed-shape path (the model's ``fixed_shape_stream``) has none there either, the epoch's last
batches (where a stream ran dry, padding its rows) included.
"""
import contextlib
import json
import re
import traceback
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest
import torch
from allennlp.commands.train import train_model_from_file
from allennlp.training import GradientDescentTrainer, Trainer
from torch.utils._python_dispatch import TorchDispatchMode

from tests.helpers import REPO_ROOT, config_calling
from tests.training_configs.test_bilm_configs import write_sample_subset

pytestmark = [
    pytest.mark.usefixtures("single_thread"),
    pytest.mark.filterwarnings("ignore:Anomaly Detection has been enabled"),
]

aten = torch.ops.aten
# Operations that read a value to the host or whose output's shape depends on the data.
HOST_READS = {aten._local_scalar_dense.default}
DATA_DEPENDENT_SHAPES = {
    aten.nonzero.default, aten._unique2.default, aten.unique_dim.default,
    aten.unique_consecutive.default, aten.masked_select.default, aten.bincount.default,
    aten.repeat_interleave.Tensor, aten.nonzero_static.default,
}
PACKAGE = str(REPO_ROOT / "elmo_plugin")


@pytest.fixture(autouse=True)
def no_compiled_code_of_earlier_tests():
    """Forgets what earlier tests compiled: its guards read the host (in torch/_dynamo's
    eval_frame.py) when a later test's modules pass through them."""
    torch._dynamo.reset()
    yield

# The biLM's network: its host reads are the execution plan's to remove.
NETWORK = tuple(
    f"{PACKAGE}/modules/{name}"
    for name in ("bilm.py", "character_encoder.py", "elmo_lstm.py", "projected_lstm.py",
                 "token_cache.py", "execution/")
)


class HostReadRecorder(TorchDispatchMode):
    """Records host reads and data-dependent shapes while ``recording`` is true."""

    def __init__(self, ignored: List[torch.Tensor]) -> None:
        super().__init__()
        self.recording = False
        self.batch = 0
        self.reads: List[Dict[str, Any]] = []
        # The optimizer's step counters: host scalars by design (on a GPU they stay on the CPU).
        self._ignored = {tensor.data_ptr() for tensor in ignored}

    def record(self, what: str) -> None:
        if not self.recording:
            return
        frames = traceback.extract_stack()[:-2]
        node = torch._C._current_autograd_node()
        backward = None
        if node is not None:
            backward = node.name()
            frames = frames + _forward_frames(node)
        self.reads.append(dict(what=what, batch=self.batch, frames=frames, backward=backward))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in HOST_READS and not (
            isinstance(args[0], torch.Tensor) and args[0].data_ptr() in self._ignored
        ):
            self.record(f"{func} (a value read by the host)")
        elif func in DATA_DEPENDENT_SHAPES:
            self.record(f"{func} (an output shape that depends on the data)")
        elif func is aten.index.Tensor and any(
            index is not None and index.dtype == torch.bool for index in args[1]
        ):
            self.record(f"{func} with a boolean mask (a data-dependent shape)")
        return func(*args, **kwargs)


@contextlib.contextmanager
def python_reads_recorded(recorder: HostReadRecorder) -> Iterator[None]:
    """
    ``.tolist()``, ``.numpy()`` and ``.cpu()`` copy a tensor to the host without an operation
    the dispatch mode sees on a CPU tensor: recorded at the Python call.
    """
    originals = {name: getattr(torch.Tensor, name) for name in ("tolist", "numpy", "cpu")}

    def recorded(name: str, original: Any) -> Any:
        def method(self, *args, **kwargs):
            recorder.record(f"Tensor.{name}() (a copy to the host)")
            return original(self, *args, **kwargs)

        return method

    for name, original in originals.items():
        setattr(torch.Tensor, name, recorded(name, original))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)


def _where(read: Dict[str, Any]) -> str:
    """The innermost frames of the package or AllenNLP that made a read."""
    frames = [f for f in read["frames"] if "elmo_plugin" in f.filename or "allennlp" in f.filename]
    return " <- ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(frames[-4:]))


def _is_network(read: Dict[str, Any]) -> bool:
    return any(frame.filename.startswith(NETWORK) for frame in read["frames"])


class RecordedLoader:
    """The trainer's data loader, telling the recorder which batch is running."""

    def __init__(self, loader: Any, recorder: HostReadRecorder, skip: int) -> None:
        self._loader, self._recorder, self._skip = loader, recorder, skip

    def __len__(self) -> int:
        return len(self._loader)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def __iter__(self) -> Iterator:
        for number, batch in enumerate(self._loader, start=1):
            self._recorder.batch = number
            # The first batch is left out: AllenNLP logs its inputs, checks the model's layers
            # once, and the model makes its one-time choices.
            self._recorder.recording = number > self._skip
            yield batch
        self._recorder.recording = False  # the end of the epoch reads, as it should


def train_recording(tmp_path: Path, monkeypatch, batching: str, metrics_every: int,
                    train_epoch: Optional[Any] = None, **overrides: Any) -> List[Dict[str, Any]]:
    """One epoch of bilm.jsonnet (tiny sizes) with every read of batches 2.. recorded."""
    data = write_sample_subset(tmp_path / "data", train_lines=80, heldout_lines=8)
    config = config_calling(
        tmp_path / f"{batching}.jsonnet", "bilm.jsonnet", **data, lstm_dim=16, projection_dim=8,
        batch_size=4, num_epochs=1, unroll_steps=10, num_samples=16, batching=batching,
    )
    trainer_class = Trainer.resolve_class_name("gradient_descent")[0]
    original = train_epoch or trainer_class._train_epoch
    recorders: List[HostReadRecorder] = []

    def recorded_epoch(self, epoch: int):
        steps = [state["step"] for state in self.optimizer.state.values()]
        recorder = HostReadRecorder(ignored=steps)
        recorders.append(recorder)
        loader = self.data_loader
        self.data_loader = RecordedLoader(loader, recorder, skip=1)
        try:
            # Anomaly mode keeps where each backward node's forward ran: a read in the backward
            # pass is charged to the code that made it.
            with recorder, python_reads_recorded(recorder), torch.autograd.detect_anomaly(
                check_nan=False
            ):
                return original(self, epoch)
        finally:
            self.data_loader = loader

    monkeypatch.setattr(trainer_class, "_train_epoch", recorded_epoch)
    train_model_from_file(
        str(config), str(tmp_path / f"run_{batching}_{metrics_every}"),
        overrides=json.dumps({"trainer.metrics_every_num_batches": metrics_every, **overrides}),
    )
    assert len(recorders) == 1 and recorders[0].batch > 5
    return recorders[0].reads


@pytest.mark.parametrize("batching", ["stream", "sentences"])
def test_a_training_step_reads_nothing_from_the_device(tmp_path, monkeypatch, batching):
    reads = train_recording(tmp_path, monkeypatch, batching, metrics_every=1000)
    outside = [read for read in reads if not _is_network(read)]
    network = [read for read in reads if _is_network(read)]
    print(f"{batching}: {len(outside)} host reads outside the network, {len(network)} in the "
          f"biLM network (the execution plan's, next)")
    assert outside == [], "\n".join(f"batch {r['batch']}: {r['what']} at {_where(r)}" for r in outside)


def test_the_fixed_shape_stream_step_reads_nothing_inside_the_network_either(tmp_path,
                                                                             monkeypatch):
    reads = train_recording(tmp_path, monkeypatch, "stream", metrics_every=1000,
                            **{"model.fixed_shape_stream": True})
    network = [read for read in reads if _is_network(read)]
    print(f"{len(reads)} host reads, {len(network)} in the biLM network")
    assert reads == [], "\n".join(f"batch {r['batch']}: {r['what']} at {_where(r)}" for r in reads)
    # The general path reads inside the network at every batch (what this test can catch).
    general = train_recording(tmp_path / "general", monkeypatch, "stream", metrics_every=1000)
    assert len({read["batch"] for read in general if _is_network(read)}) >= 5


def test_the_metrics_are_read_at_the_logging_interval_only(tmp_path, monkeypatch):
    reads = train_recording(tmp_path, monkeypatch, "stream", metrics_every=3)
    outside = [read for read in reads if not _is_network(read)]
    batches = sorted({read["batch"] for read in outside})
    # The reads of batch 3k come while batch 3k + 1 is being fetched: the progress bar's
    # metrics and the NaN check of the batches so far, nothing in between.
    assert batches and all(batch % 3 == 0 for batch in batches), batches
    where = {_where(read).split(" <- ")[0] for read in outside}
    print(where)
    # The trainer's metrics (the loss sums, the model's get_metrics) and its NaN check.
    assert all(place.split(" ")[-1] in {"as_float", "get_metrics", "_raise_on_nan_loss"}
               for place in where), where


@pytest.mark.filterwarnings("ignore:`torch.cuda.amp.autocast")  # AllenNLP's own loop
def test_allennlp_s_own_training_loop_reads_every_batch(tmp_path, monkeypatch):
    # The recorder itself: AllenNLP 2.10's loop (loss.item(), the NaN check, the gradient norm)
    # over the same model is caught at every batch.
    def allennlp_epoch(self, epoch):
        return GradientDescentTrainer._train_epoch(self, epoch)

    reads = train_recording(tmp_path, monkeypatch, "stream", metrics_every=1000,
                            train_epoch=allennlp_epoch)
    outside = [read for read in reads if not _is_network(read)]
    places = {_where(read).split(" <- ")[0].split(" ")[0] for read in outside}
    print(places)
    batches = {read["batch"] for read in outside}
    assert len(batches) >= 5
    assert any(place.startswith("gradient_descent_trainer.py") for place in places), places


def _forward_frames(node) -> List[traceback.FrameSummary]:
    """Where the forward of a backward node ran (anomaly mode records it as formatted lines)."""
    text = "".join(node.metadata.get("traceback_") or [])
    return [
        traceback.FrameSummary(filename, int(line), name)
        for filename, line, name in re.findall(r'File "([^"]+)", line (\d+), in (\S+)', text)
    ]
