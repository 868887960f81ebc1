"""
The fenced code blocks of README.md and of the documentation pages (docs/**/*.md), and the
commands in them: what `test_code_blocks.py` runs or checks, so that the documentation cannot
drift from the code.
"""
import re
import shlex
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List

from tests.helpers import REPO_ROOT

# An opening fence (possibly indented, inside a list item), its language, the body, the closing
# fence at the same indentation.
_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<language>[\w+-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```",
                    flags=re.S | re.M)
_MARKER = re.compile(r"<!--\s*([\w-]+)\s*-->\s*$")


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block: where it is (``file:line``), its language, its text (dedented), and the
    ``<!-- marker -->`` on the line before it, if any."""

    path: Path
    line: int
    language: str
    text: str
    marker: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO_ROOT)}:{self.line}"


def documentation_pages() -> List[Path]:
    """README.md and every page of the site."""
    return [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]


def code_blocks(path: Path) -> Iterator[CodeBlock]:
    text = path.read_text(encoding="utf-8")
    for match in _FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = _MARKER.search(before)
        yield CodeBlock(
            path=path,
            line=text.count("\n", 0, match.start()) + 1,
            language=match.group("language").lower(),
            text=textwrap.dedent(match.group("body")),
            marker=marker.group(1) if marker else "",
        )


def all_code_blocks() -> List[CodeBlock]:
    return [block for page in documentation_pages() for block in code_blocks(page)]


def shell_commands(script: str) -> List[List[str]]:
    """
    The simple commands of a shell block as argument lists: comments dropped, ``\\``
    continuations joined, newlines, ``&&``, ``;`` and ``|`` split (outside quotes, so a quoted
    ``-o '{...}'`` may span lines), leading ``VAR=value`` assignments dropped.
    """
    separated, quote, at_word_start = [], "", True
    text = script.replace("\\\n", " ")
    index = 0
    while index < len(text):
        character = text[index]
        if quote:
            quote = "" if character == quote else quote
        elif character in "'\"":
            quote = character
        elif character == "#" and at_word_start:
            while index < len(text) and text[index] != "\n":
                index += 1
            continue
        elif character == "\n":
            character = ";"
        separated.append(character)
        at_word_start = character.isspace() or character in ";&|"
        index += 1
    # Redirections (``> file``, ``2>&1``) are not arguments.
    script = re.sub(r"(?<=\s)\d*(?:>>?|<)(?:&\d+|\s*[^\s;&|]+)", " ", "".join(separated))
    lexer = shlex.shlex(script, posix=True, punctuation_chars="&;|")
    lexer.whitespace_split = True
    lexer.commenters = ""
    commands: List[List[str]] = [[]]
    for token in lexer:
        if set(token) <= set("&;|"):
            commands.append([])
        else:
            commands[-1].append(token)
    stripped = []
    for command in commands:
        # Shell variables the page leaves to the reader ($NODE_RANK, "$MASTER_ADDR"): a number
        # stands in, which every option that takes one accepts.
        command = [re.sub(r"\$\{?[A-Z_][A-Z0-9_]*\}?", "1", word) for word in command]
        # The words of a loop or a condition: the commands inside are checked, the header not.
        if command and command[0] in ("do", "then", "else"):
            command = command[1:]
        if command and command[0] in ("for", "done", "if", "fi", "while"):
            continue
        while command and re.match(r"^[A-Za-z_]\w*=", command[0]):
            command = command[1:]
        if command:
            stripped.append(command)
    return stripped
