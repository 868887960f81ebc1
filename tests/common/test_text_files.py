"""
`decoded_lines`, the one reader of text files: what it refuses (NUL bytes, UTF-16, bytes that are
not UTF-8), always naming ``file:line``, and what it passes through unchanged.
"""
from pathlib import Path

import pytest
from allennlp.common.checks import ConfigurationError

from elmo_plugin.common.text_files import decoded_lines


def _read(path: Path):
    return [(index, text) for index, text, _ in decoded_lines(str(path))]


def test_utf16_without_a_byte_order_mark_is_refused_naming_the_line(tmp_path):
    # ASCII text in UTF-16LE is valid UTF-8 with a NUL after every character: read as UTF-8 it
    # would give tokens like 't\x00h\x00e\x00'.
    path = tmp_path / "utf16.txt"
    path.write_bytes("the cat\nsat\n".encode("utf-16-le"))
    with pytest.raises(ConfigurationError) as error:
        _read(path)
    message = str(error.value)
    assert message.startswith(f"{path}:1: NUL byte (byte offset 1 in the file)")
    assert "UTF-16" in message and "iconv -f UTF-16LE -t UTF-8" in message


def test_utf16_with_non_ascii_text_is_reported_as_utf16_not_as_bad_utf8(tmp_path):
    path = tmp_path / "korean.txt"
    path.write_bytes("고양이 the\n".encode("utf-16-le"))
    with pytest.raises(ConfigurationError, match=r"korean.txt:1: NUL byte .* UTF-16"):
        _read(path)


def test_utf16_with_a_byte_order_mark_is_refused(tmp_path):
    path = tmp_path / "bom.txt"
    path.write_bytes("the cat\n".encode("utf-16"))  # starts with the byte order mark ff fe
    with pytest.raises(ConfigurationError) as error:
        _read(path)
    assert str(error.value) == (
        f"{path}:1: not UTF-8: the file starts with a UTF-16 byte order mark (ff fe); "
        "convert it with 'iconv -f UTF-16 -t UTF-8'"
    )


def test_a_nul_byte_in_a_utf8_file_names_its_line_and_offset(tmp_path):
    path = tmp_path / "nul.txt"
    path.write_bytes(b"fine line\nthe c\x00t\n")
    with pytest.raises(ConfigurationError, match=rf"^{path}:2: NUL byte \(byte offset 15 in"):
        _read(path)


def test_invalid_utf8_still_names_line_and_offset(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"ok\ncaf\xe9\n")
    with pytest.raises(ConfigurationError, match=rf"^{path}:2: not valid UTF-8 \(byte offset 6"):
        _read(path)


def test_valid_text_passes_unchanged(tmp_path):
    path = tmp_path / "ok.txt"
    path.write_bytes("\ufeffthe cat\n\n아버지 \t café\r\nlast".encode("utf-8"))
    assert _read(path) == [(0, "the cat\n"), (1, "\n"), (2, "아버지 \t café\r\n"), (3, "last")]
