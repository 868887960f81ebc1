"""
`input_at`: the check every command makes before writing, that its output is none of its inputs
(under the same path or another name for the same file).
"""
import os

from elmo_plugin.common.atomic_output import input_at


def test_input_at_finds_the_same_file_under_any_name(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat\n")
    other = tmp_path / "other.txt"
    other.write_text("the cat\n")  # same content, another file
    symlink = tmp_path / "link.txt"
    symlink.symlink_to(corpus)
    hard_link = tmp_path / "hard.txt"
    os.link(corpus, hard_link)
    dotted = str(tmp_path / "sub" / ".." / "corpus.txt")
    (tmp_path / "sub").mkdir()

    inputs = [str(other), str(corpus)]
    for output in (str(corpus), str(symlink), str(hard_link), dotted):
        assert input_at(output, inputs) == str(corpus), output
    assert input_at(str(other), [str(corpus)]) is None
    assert input_at(str(tmp_path / "new.txt"), inputs) is None  # does not exist yet
    assert input_at(str(corpus), [str(tmp_path / "vanished.txt")]) is None
