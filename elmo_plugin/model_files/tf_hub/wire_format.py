"""
Protocol Buffers' wire format, read without the message classes: what TensorFlow's files are
made of: a handful of fields of a handful of messages, by number, as the ``.proto`` files define
them (TensorFlow's message classes would need TensorFlow).

A message is a sequence of fields, each a key (the field's number and wire type, a varint) and
a value: a varint (type 0), 8 bytes (type 1), a length and that many bytes (type 2: strings,
bytes, nested messages, packed repeated numbers) or 4 bytes (type 5).
"""
import struct
from typing import Dict, Iterator, List, Tuple, Union

VARINT, FIXED64, LENGTH_DELIMITED, FIXED32 = 0, 1, 2, 5

FieldValue = Union[int, bytes]


class WireFormatError(ValueError):
    """Bytes that are not a protocol buffer message (a damaged or a different file)."""


def read_varint(data: bytes, position: int) -> Tuple[int, int]:
    """The varint at ``position`` and the position after it."""
    result = shift = 0
    while True:
        if position >= len(data):
            raise WireFormatError("a varint runs past the end of the data")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7
        if shift > 63:
            raise WireFormatError("a varint longer than 10 bytes")


def fields(data: bytes) -> Iterator[Tuple[int, int, FieldValue]]:
    """Yields ``(field number, wire type, value)`` for each field of the message ``data``, in
    order: ints for varints and fixed-size values, bytes for length-delimited ones."""
    position = 0
    while position < len(data):
        key, position = read_varint(data, position)
        number, wire_type = key >> 3, key & 7
        value: FieldValue
        if wire_type == VARINT:
            value, position = read_varint(data, position)
        elif wire_type == FIXED64:
            value = int.from_bytes(data[position : position + 8], "little")
            position += 8
        elif wire_type == LENGTH_DELIMITED:
            length, position = read_varint(data, position)
            value = bytes(data[position : position + length])
            if len(value) != length:
                raise WireFormatError("a length-delimited field runs past the end of the data")
            position += length
        elif wire_type == FIXED32:
            value = int.from_bytes(data[position : position + 4], "little")
            position += 4
        else:  # groups (3, 4) are deprecated and unused by TensorFlow's messages
            raise WireFormatError(f"field {number} has wire type {wire_type}, which no message read here uses")
        if position > len(data):
            raise WireFormatError("a field runs past the end of the data")
        yield number, wire_type, value


def message_fields(data: bytes) -> Dict[int, List[FieldValue]]:
    """Every value of every field of the message ``data``, by field number, in order."""
    found: Dict[int, List[FieldValue]] = {}
    for number, _, value in fields(data):
        found.setdefault(number, []).append(value)
    return found


def first(found: Dict[int, List[FieldValue]], number: int, default: FieldValue = 0) -> FieldValue:
    """The value of a singular field (the last one written wins, as protobuf parsers do)."""
    values = found.get(number)
    return values[-1] if values else default


def repeated_ints(found: Dict[int, List[FieldValue]], number: int) -> List[int]:
    """A repeated integer field, written packed (one length-delimited run of varints) or not."""
    numbers: List[int] = []
    for value in found.get(number, []):
        if isinstance(value, bytes):
            position = 0
            while position < len(value):
                number_value, position = read_varint(value, position)
                numbers.append(number_value)
        else:
            numbers.append(value)
    return numbers


def signed(value: int) -> int:
    """An ``int64`` field's value: varints hold negative numbers as their 64-bit two's complement."""
    return value - (1 << 64) if value >= 1 << 63 else value


def as_float(value: int) -> float:
    """A ``float`` field's value (a FIXED32)."""
    return struct.unpack("<f", value.to_bytes(4, "little"))[0]
