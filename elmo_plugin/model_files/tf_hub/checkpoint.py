"""
A TensorFlow checkpoint's variables (a SavedModel's ``variables/``), read without TensorFlow:
``PREFIX.index`` is a LevelDB table of ``BundleEntryProto``s (the empty key: the header),
``PREFIX.data-*`` the tensors' bytes; TensorFlow 2's object paths are named by the object graph.
Compressed blocks, partitioned variables and big-endian tensors need TensorFlow (the ``tf-hub``
extra); CRC32C checksums are not verified, sizes and offsets are.
"""
import os
import struct
from dataclasses import dataclass
from typing import Dict, List, Tuple

import numpy as np
from allennlp.common.checks import ConfigurationError

from elmo_plugin.model_files.tf_hub.wire_format import (
    WireFormatError,
    first,
    message_fields,
    read_varint,
    signed,
)

# What installs TensorFlow for the plugin (pyproject.toml's optional dependencies).
TENSORFLOW_EXTRA = "pip install 'elmo_plugin[tf-hub]'"
READERS = ("auto", "builtin", "tensorflow")

_TABLE_MAGIC = 0xDB4775248B80FB57
_FOOTER_SIZE = 48
_BLOCK_TRAILER_SIZE = 5  # compression type (1 byte) + masked CRC32C (4 bytes)
OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"

# TensorFlow's DataType numbers (types.proto) of the numbers a checkpoint may hold, as numpy
# reads them. DT_BFLOAT16 (14) is widened to float32 (numpy has no bfloat16).
_NUMPY_DTYPES = {
    1: np.float32, 2: np.float64, 3: np.int32, 4: np.uint8, 5: np.int16, 6: np.int8, 9: np.int64,
    10: np.bool_, 14: np.uint16, 17: np.uint16, 19: np.float16, 22: np.uint32, 23: np.uint64,
}
_DT_BFLOAT16 = 14
_DT_STRING = 7


class UnsupportedCheckpointError(ConfigurationError):
    """A checkpoint that this reader does not read, but TensorFlow's may."""


@dataclass(frozen=True)
class CheckpointEntry:
    """One tensor of a checkpoint, as its index describes it."""

    key: str
    dtype: int  # TensorFlow's DataType number
    shape: Tuple[int, ...]
    shard: int
    offset: int
    size: int


def _block_entries(data: bytes, where: str) -> List[Tuple[bytes, bytes]]:
    if len(data) < 4:
        raise WireFormatError(f"{where} is shorter than its restart count")
    num_restarts = struct.unpack_from("<I", data, len(data) - 4)[0]
    end = len(data) - 4 - 4 * num_restarts
    if end < 0:
        raise WireFormatError(f"{where} has more restart points than bytes")
    entries: List[Tuple[bytes, bytes]] = []
    key = b""
    position = 0
    while position < end:
        shared, position = read_varint(data, position)
        unshared, position = read_varint(data, position)
        value_length, position = read_varint(data, position)
        if shared > len(key) or position + unshared + value_length > end:
            raise WireFormatError(f"{where} has an entry that runs past the block")
        key = key[:shared] + data[position : position + unshared]
        position += unshared
        entries.append((key, data[position : position + value_length]))
        position += value_length
    return entries


def _block_handle(data: bytes, position: int = 0) -> Tuple[int, int, int]:
    """``(offset, size, next position)`` of a BlockHandle (two varints)."""
    offset, position = read_varint(data, position)
    size, position = read_varint(data, position)
    return offset, size, position


def _read_block(table: bytes, offset: int, size: int, path: str) -> bytes:
    if offset + size + _BLOCK_TRAILER_SIZE > len(table):
        raise WireFormatError("a block runs past the end of the file")
    compression = table[offset + size]
    if compression != 0:
        kind = {1: "Snappy", 2: "Zlib"}.get(compression, f"type {compression}")
        raise UnsupportedCheckpointError(f"{path}: its index table is {kind}-compressed")
    return table[offset : offset + size]


def _table_entries(path: str) -> List[Tuple[bytes, bytes]]:
    """Every ``(key, value)`` of the LevelDB table at ``path``, in key order."""
    with open(path, "rb") as handle:
        table = handle.read()
    if len(table) < _FOOTER_SIZE:
        raise WireFormatError("shorter than a table's footer")
    footer = table[-_FOOTER_SIZE:]
    if int.from_bytes(footer[-8:], "little") != _TABLE_MAGIC:
        raise WireFormatError("no LevelDB table footer (magic number) at its end")
    _, _, position = _block_handle(footer)  # the metaindex block: unused
    index_offset, index_size, _ = _block_handle(footer, position)
    entries: List[Tuple[bytes, bytes]] = []
    for _, handle_bytes in _block_entries(_read_block(table, index_offset, index_size, path), "the index block"):
        offset, size, _ = _block_handle(handle_bytes)
        entries.extend(_block_entries(_read_block(table, offset, size, path), f"the block at byte {offset}"))
    return entries


def _entry(key: str, value: bytes, path: str) -> CheckpointEntry:
    """A ``BundleEntryProto``: dtype 1, shape 2 (``TensorShapeProto``: dim 2 {size 1}), shard_id
    3, offset 4, size 5, crc32c 6, slices 7."""
    found = message_fields(value)
    if found.get(7):
        raise UnsupportedCheckpointError(f"{path}: variable {key!r} is partitioned into slices")
    shape_fields = message_fields(first(found, 2, b""))  # type: ignore[arg-type]
    if first(shape_fields, 3):
        raise UnsupportedCheckpointError(f"{path}: variable {key!r} has a shape of unknown rank")
    shape = tuple(signed(first(message_fields(dim), 1)) for dim in shape_fields.get(2, []))  # type: ignore
    return CheckpointEntry(
        key=key,
        dtype=int(first(found, 1)),
        shape=shape,
        shard=int(first(found, 3)),
        offset=signed(first(found, 4)),  # type: ignore[arg-type]
        size=signed(first(found, 5)),  # type: ignore[arg-type]
    )


class TensorFlowCheckpoint:
    """The checkpoint whose files start with ``prefix``, its index read at once, its tensors when asked
    for (`read`). `ConfigurationError` naming a missing or damaged file; `UnsupportedCheckpointError`
    for what only TensorFlow reads."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.index_path = prefix + ".index"
        if not os.path.isfile(self.index_path):
            raise ConfigurationError(f"no TensorFlow checkpoint index at {self.index_path}")
        try:
            raw = {key.decode("utf-8"): value for key, value in _table_entries(self.index_path)}
            header = raw.pop("", b"")
            self.entries = {key: _entry(key, value, self.index_path) for key, value in raw.items()}
            header_fields = message_fields(header)
        except (WireFormatError, UnicodeDecodeError) as error:
            raise ConfigurationError(
                f"{self.index_path}: not a TensorFlow checkpoint index ({error}); is it complete?"
            ) from None
        self.num_shards = int(first(header_fields, 1, 1))
        if first(header_fields, 2):
            raise UnsupportedCheckpointError(f"{self.index_path}: the tensors are stored big-endian")

    def data_path(self, shard: int) -> str:
        return f"{self.prefix}.data-{shard:05d}-of-{self.num_shards:05d}"

    def read(self, key: str) -> np.ndarray:
        """The tensor stored under ``key``: numbers as a numpy array, a string as bytes (an array
        of ``object`` for several)."""
        entry = self.entries[key]
        path = self.data_path(entry.shard)
        try:
            with open(path, "rb") as handle:
                handle.seek(entry.offset)
                data = handle.read(entry.size)
        except FileNotFoundError:
            raise ConfigurationError(f"{self.index_path} names the data file {path}, which is missing") from None
        if len(data) != entry.size:
            raise ConfigurationError(
                f"{path}: variable {key!r} needs bytes {entry.offset} to {entry.offset + entry.size}, "
                f"but the file ends at {entry.offset + len(data)}; is it complete?"
            )
        if entry.dtype == _DT_STRING:
            return _strings(data, entry, path)
        numpy_dtype = _NUMPY_DTYPES.get(entry.dtype)
        if numpy_dtype is None:
            raise UnsupportedCheckpointError(f"{path}: variable {key!r} has TensorFlow dtype number {entry.dtype}")
        count = int(np.prod(entry.shape, dtype=np.int64))
        if count * np.dtype(numpy_dtype).itemsize != entry.size:
            raise ConfigurationError(
                f"{self.index_path}: variable {key!r} of shape {entry.shape} has {entry.size} bytes, "
                f"not {count * np.dtype(numpy_dtype).itemsize}; is the checkpoint damaged?"
            )
        array = np.frombuffer(data, dtype=np.dtype(numpy_dtype).newbyteorder("<")).reshape(entry.shape)
        if entry.dtype == _DT_BFLOAT16:
            return (array.astype(np.uint32) << 16).view(np.float32)
        return array.astype(array.dtype.newbyteorder("="))

    def variable_names(self) -> Dict[str, str]:
        """Each variable's name to its checkpoint key: the key itself in graph-mode checkpoints,
        the object graph's ``full_name`` in object-based ones. Bookkeeping entries (the object
        graph, a save counter) are left out: only numbers with a name are variables."""
        graph = self.read(OBJECT_GRAPH_KEY) if OBJECT_GRAPH_KEY in self.entries else b""
        full_names = object_graph_names(graph, self.index_path)
        return {full_names.get(key, key): key for key, entry in self.entries.items() if entry.dtype != _DT_STRING}


def _strings(data: bytes, entry: CheckpointEntry, path: str):
    """A string tensor's bytes: every element's length (varints), a 4-byte checksum of the
    lengths, then the elements one after another."""
    lengths = []
    position = 0
    try:
        for _ in range(int(np.prod(entry.shape, dtype=np.int64))):
            length, position = read_varint(data, position)
            lengths.append(length)
    except WireFormatError as error:
        raise ConfigurationError(f"{path}: string variable {entry.key!r} is damaged ({error})") from None
    values = []
    position += 4
    for length in lengths:
        values.append(data[position : position + length])
        position += length
    if not entry.shape:
        return values[0]
    return np.array(values, dtype=object).reshape(entry.shape)


def object_graph_names(serialized: bytes, where: str) -> Dict[str, str]:
    """Checkpoint key to variable name, from a ``TrackableObjectGraph``: nodes 1, each with
    attributes 2 (``SerializedTensor``: name 1, full_name 2, checkpoint_key 3)."""
    names: Dict[str, str] = {}
    try:
        for node in message_fields(serialized).get(1, []):
            for attribute in message_fields(node).get(2, []):  # type: ignore[arg-type]
                tensor = message_fields(attribute)  # type: ignore[arg-type]
                full_name = first(tensor, 2, b"").decode("utf-8")  # type: ignore[union-attr]
                key = first(tensor, 3, b"").decode("utf-8")  # type: ignore[union-attr]
                if full_name and key:
                    names[key] = full_name
    except (WireFormatError, UnicodeDecodeError, AttributeError) as error:
        raise ConfigurationError(f"{where}: its object graph is damaged ({error})") from None
    return names


def read_checkpoint(prefix: str, reader: str = "auto") -> Dict[str, np.ndarray]:
    """Every numeric variable of the checkpoint at ``prefix`` (``DIRECTORY/variables/variables``), by
    name. ``reader``: ``"builtin"`` (`TensorFlowCheckpoint`), ``"tensorflow"`` (``tf.train.load_checkpoint``)
    or ``"auto"``: the built-in reader, else TensorFlow's."""
    if reader not in READERS:
        raise ConfigurationError(f"reader must be one of {', '.join(READERS)}, got {reader!r}")
    if reader == "tensorflow":
        return _read_with_tensorflow(prefix, f"{prefix}: reading it with TensorFlow was asked for")
    try:
        checkpoint = TensorFlowCheckpoint(prefix)
        return {name: checkpoint.read(key) for name, key in checkpoint.variable_names().items()}
    except UnsupportedCheckpointError as error:
        if reader == "builtin":
            raise
        return _read_with_tensorflow(prefix, f"{error}, which only TensorFlow reads")


def _read_with_tensorflow(prefix: str, reason: str) -> Dict[str, np.ndarray]:
    """``reason``: why TensorFlow is needed, for the error where it is not installed."""
    try:
        # Only here: the plugin never needs TensorFlow otherwise.
        import tensorflow as tf  # type: ignore[import-not-found]
    except ImportError:
        raise ConfigurationError(f"{reason}, and TensorFlow is not installed: {TENSORFLOW_EXTRA}") from None
    try:
        checkpoint = tf.train.load_checkpoint(prefix)
    except (tf.errors.OpError, ValueError) as error:
        raise ConfigurationError(f"{prefix}: TensorFlow cannot read the checkpoint ({error})") from None
    dtypes = checkpoint.get_variable_to_dtype_map()
    graph = checkpoint.get_tensor(OBJECT_GRAPH_KEY) if OBJECT_GRAPH_KEY in dtypes else b""
    full_names = object_graph_names(graph, prefix)
    return {
        full_names.get(key, key): np.asarray(checkpoint.get_tensor(key))
        for key, dtype in dtypes.items()
        if dtype != tf.string
    }
