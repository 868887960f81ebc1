"""
Protocol Buffers' wire format, read without TensorFlow's message classes: the few fields of
TensorFlow's files that the readers need, by number, as the ``.proto`` files define them.
"""
from typing import Dict, List, Tuple, Union

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


def message_fields(data: bytes) -> Dict[int, List[FieldValue]]:
    """Every value of every field of the message ``data``, by field number, in order: ints for
    varints and fixed-size values, bytes for length-delimited ones."""
    found: Dict[int, List[FieldValue]] = {}
    position = 0
    while position < len(data):
        key, position = read_varint(data, position)
        number, wire_type = key >> 3, key & 7
        value: FieldValue
        if wire_type == VARINT:
            value, position = read_varint(data, position)
        elif wire_type == LENGTH_DELIMITED:
            length, position = read_varint(data, position)
            value = bytes(data[position : position + length])
            if len(value) != length:
                raise WireFormatError("a length-delimited field runs past the end of the data")
            position += length
        elif wire_type in (FIXED64, FIXED32):
            size = 8 if wire_type == FIXED64 else 4
            value = int.from_bytes(data[position : position + size], "little")
            position += size
        else:  # groups (3, 4) are deprecated and unused by TensorFlow's messages
            raise WireFormatError(f"field {number} has wire type {wire_type}, which no message read here uses")
        if position > len(data):
            raise WireFormatError("a field runs past the end of the data")
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
