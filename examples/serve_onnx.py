"""
Serving ELMo with ONNX Runtime: the layers of tokenized sentences from a model that
``allennlp elmo-export MODEL OUT --format onnx`` wrote, with nothing but ``onnxruntime`` and
``numpy`` (no PyTorch, no AllenNLP, not even this plugin).

    allennlp elmo-export small elmo-small-onnx --format onnx        # once, where the plugin is
    python examples/serve_onnx.py elmo-small-onnx sentences.txt out.npz [--batch-size 32]
        [--max-positions 1024]

``sentences.txt`` holds one whitespace-tokenized sentence per line, UTF-8, no blank line (as
``allennlp elmo`` takes it); ``out.npz`` gets one array per line, named by the line's number
(``line_1``, ``line_2``, ..., counted from 1 as an editor counts), as the export's output gives it:
``(num_layers, tokens, dim)`` for an export with ``--all``, ``(tokens, dim)`` for ``--top``,
``--average`` or ``--scalar-mix`` (docs/serving.md). A mistake (a directory that holds no
exported graph, a missing input, bytes that are not UTF-8, blank lines) is one line
``serve_onnx.py: error: ...`` and status 1; ``out.npz`` is written under a temporary name and
renamed when complete.

How it works, in three pieces that a service copies:

- `CharacterIds` turns tokens into the rows of ids the graph takes, from the
  ``character_ids.json`` written beside the graph: bilm-tf's UTF-8 byte ids, or an
  ELMoForManyLangs model's own character (and word) dictionaries. It gives the ids that the
  plugin's ``batch_to_ids`` gives (tests/models/test_onnx_export.py checks it).
- `ElmoOnnx` runs the graph on a batch: any number of sentences of any length; the graph adds
  the sentence boundaries and starts every call from a zero state, so a sentence gets the same
  vectors whatever shares its batch.
- `embed_sorted` sorts sentences by length before batching them. The graph computes every row
  of a batch for as many steps as its longest sentence (finished rows are masked, not dropped),
  so a batch of one long and many short sentences computes mostly padding. Sorted, each batch
  holds sentences of about one length, and a batch of long sentences holds fewer of them (at most
  ``--max-positions`` rows times length, default 1024); `padding_share` says how much of the
  computed positions were padding (benchmarks/onnx_runtime.py measures it, in time too).
"""
import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import onnxruntime

MODEL_NAME = "elmo.onnx"
# The positions (rows times the longest sentence's tokens and boundaries) a batch may compute at
# most: measured with benchmarks/onnx_runtime.py (Small, 256 real sentences, batches of 64, one
# thread), no budget 20.0 ms a sentence, 4096 15.3, 1024 13.3, 256 12.1 (and 15.9, 1024 9.0 once
# the graph encoded each distinct token once); smaller batches gain little more, and larger ones
# serve threads and GPUs better.
DEFAULT_MAX_POSITIONS = 1024
CHARACTER_IDS_NAME = "character_ids.json"


class CharacterIds:
    """
    Tokens to +1-shifted id rows (0 means "no token"), from an export's ``character_ids.json``.

    - ``utf-8-bytes`` (bilm-tf, AllenNLP): a token's UTF-8 bytes, cut to ``max_characters - 2``,
      as ``[begin of word, bytes..., end of word, padding...]``, each +1; ``<S>`` and ``</S>``
      get the rows of the sentence markers (``token_rows``), as in bilm-tf.
    - ``elmoformanylangs``: the token's characters (code points, cut to ``max_characters -
      2``) looked up in the model's character dictionary (unknown ones as its ``<oov>``), framed
      the same way with its own markers; with a word dictionary, the row ends with the token's
      word id.
    """

    def __init__(self, table: Dict[str, Any]) -> None:
        self.scheme = table["scheme"]
        if self.scheme not in ("utf-8-bytes", "elmoformanylangs"):
            raise ValueError(f"unknown character id scheme {self.scheme!r}")
        self.max_characters = int(table["max_characters_per_token"])
        self.begin = int(table["beginning_of_word"])
        self.end = int(table["end_of_word"])
        self.padding = int(table["padding"])
        self.characters: Optional[Dict[str, int]] = table.get("characters")
        self.unknown_character = table.get("unknown_character")
        self.words: Optional[Dict[str, int]] = table.get("words")
        self.unknown_word = table.get("unknown_word")
        self.token_rows: Dict[str, List[int]] = table.get("token_rows") or {}

    @classmethod
    def from_directory(cls, directory: str) -> "CharacterIds":
        with open(os.path.join(directory, CHARACTER_IDS_NAME), encoding="utf-8") as handle:
            return cls(json.load(handle))

    @property
    def ids_per_token(self) -> int:
        return self.max_characters + (1 if self.words is not None else 0)

    def token_to_ids(self, token: str) -> List[int]:
        if token in self.token_rows:
            return list(self.token_rows[token])
        row = [self.padding] * self.max_characters
        row[0] = self.begin
        if self.scheme == "utf-8-bytes":
            # Byte ids are the bytes themselves, +1; a cut may split a character (bilm-tf does).
            encoded = token.encode("utf-8", "ignore")[: self.max_characters - 2]
            units = [byte + 1 for byte in encoded]
        else:
            token = token[: self.max_characters - 2]
            assert self.characters is not None
            if token in ("<bos>", "<eos>"):  # its sentence markers, also as tokens of the text
                units = [self.characters[token]]
            else:
                units = [self.characters.get(c, self.unknown_character) for c in token]
        row[1 : len(units) + 1] = units
        row[len(units) + 1] = self.end
        if self.words is not None:
            row.append(self.words.get(token, self.unknown_word))
        return row

    def batch_to_ids(self, sentences: Sequence[Sequence[str]]) -> np.ndarray:
        """``(batch, longest sentence, ids_per_token)`` int64, all-zero rows after a sentence."""
        longest = max((len(sentence) for sentence in sentences), default=0)
        ids = np.zeros((len(sentences), longest, self.ids_per_token), dtype=np.int64)
        for row, sentence in enumerate(sentences):
            for position, token in enumerate(sentence):
                ids[row, position] = self.token_to_ids(token)
        return ids


class ElmoOnnx:
    """
    An exported ELMo graph in an ONNX Runtime session.

    # Parameters

    directory : `str`
        What ``allennlp elmo-export ... --format onnx`` wrote (``elmo.onnx``,
        ``character_ids.json``).
    threads : `int`, optional
        ONNX Runtime's intra-op threads (its default: one per core).
    """

    def __init__(self, directory: str, threads: Optional[int] = None) -> None:
        options = onnxruntime.SessionOptions()
        if threads is not None:
            options.intra_op_num_threads = threads
        self.session = onnxruntime.InferenceSession(
            os.path.join(directory, MODEL_NAME), options, providers=["CPUExecutionProvider"]
        )
        self.character_ids = CharacterIds.from_directory(directory)
        self.input_name = self.session.get_inputs()[0].name
        self.output_names = [output.name for output in self.session.get_outputs()]

    def run(self, character_ids: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """The graph's two outputs (the layers or a mix of them, and the mask) for ids."""
        outputs, mask = self.session.run(self.output_names, {self.input_name: character_ids})
        return outputs, mask

    def embed_batch(self, sentences: Sequence[Sequence[str]]) -> List[np.ndarray]:
        """One array per sentence, in order, cut to its length (the token axis second to last)."""
        outputs, mask = self.run(self.character_ids.batch_to_ids(sentences))
        lengths = mask.sum(axis=1)
        if outputs.ndim == 4:  # (layers, batch, tokens, dim)
            return [outputs[:, row, :length].copy() for row, length in enumerate(lengths)]
        return [outputs[row, :length].copy() for row, length in enumerate(lengths)]


def length_sorted_batches(
    lengths: Sequence[int], batch_size: int, max_positions: Optional[int] = None
) -> List[List[int]]:
    """
    The sentences' indices in batches of at most ``batch_size``, longest first; with
    ``max_positions``, a batch also stops before its rows times its longest sentence's positions
    (tokens and the two boundaries) would pass that budget (one sentence at least), so that the
    few long sentences of a stream share their batches with few rows, instead of making a full
    batch compute their length.
    """
    order = sorted(range(len(lengths)), key=lambda index: -lengths[index])
    batches: List[List[int]] = []
    for index in order:
        if batches and len(batches[-1]) < batch_size and (
            max_positions is None
            or (len(batches[-1]) + 1) * (lengths[batches[-1][0]] + 2) <= max_positions
        ):
            batches[-1].append(index)
        else:
            batches.append([index])
    return batches


def padding_share(lengths: Sequence[int], batches: Sequence[Sequence[int]]) -> float:
    """Of the positions the graph computes for these batches (each row as long as its batch's
    longest sentence, plus the two boundaries), the share that is padding."""
    computed = sum(len(batch) * (max(lengths[i] for i in batch) + 2) for batch in batches)
    real = sum(lengths[i] + 2 for batch in batches for i in batch)
    return 1.0 - real / computed if computed else 0.0


def embed_sorted(
    model: ElmoOnnx,
    sentences: Sequence[Sequence[str]],
    batch_size: int = 32,
    max_positions: Optional[int] = DEFAULT_MAX_POSITIONS,
) -> List[np.ndarray]:
    """Every sentence's array, in input order, computed in batches of similar lengths
    (`length_sorted_batches`)."""
    lengths = [len(sentence) for sentence in sentences]
    results: List[Optional[np.ndarray]] = [None] * len(sentences)
    for batch in length_sorted_batches(lengths, batch_size, max_positions):
        for index, array in zip(batch, model.embed_batch([sentences[i] for i in batch])):
            results[index] = array
    return results  # type: ignore[return-value]


class ServeError(Exception):
    """A mistake in the arguments or the input, said in one line."""


def array_name(line_number: int) -> str:
    """The name of a sentence's array in the output: its line's number, from 1."""
    return f"line_{line_number}"


def check_model_directory(directory: str) -> None:
    """Raises `ServeError` unless ``directory`` holds what ``elmo-export --format onnx`` writes."""
    if not os.path.isdir(directory):
        raise ServeError(f"{directory}: no such directory (what allennlp elmo-export ... --format onnx wrote)")
    missing = [name for name in (MODEL_NAME, CHARACTER_IDS_NAME)
               if not os.path.isfile(os.path.join(directory, name))]
    if not missing:
        return
    if any(name.endswith(".hdf5") for name in os.listdir(directory)):
        raise ServeError(
            f"{directory} is a bilm-tf model (options.json and HDF5 weights), not an ONNX export: "
            f"export it first with allennlp elmo-export {directory} OUT --format onnx, then give OUT"
        )
    raise ServeError(f"{directory} holds no {' and no '.join(missing)}: give the directory that "
                     "allennlp elmo-export ... --format onnx wrote")


def read_sentences(path: str) -> List[List[str]]:
    """The tokens of every line of a UTF-8 file; `ServeError` for a missing file, bytes that are
    not UTF-8 (naming the line) and blank lines (naming them), as ``allennlp elmo`` says them."""
    if not os.path.isfile(path):
        raise ServeError(f"input file not found: {path}")
    sentences, blank = [], []
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ServeError(f"{path}:{number}: not valid UTF-8 ({error.reason} at byte "
                                 f"{error.start} of the line); the text must be UTF-8") from None
            if number == 1:
                text = text.lstrip("\ufeff")
            tokens = text.split()
            if not tokens:
                blank.append(number)
            sentences.append(tokens)
    if blank:
        shown = ", ".join(str(number) for number in blank[:20])
        if len(blank) > 20:
            shown += f", ... ({len(blank)} in all)"
        raise ServeError(f"{path}: {len(blank)} blank or whitespace-only line(s), at line(s) {shown} "
                         "(1-based). Every line must hold one tokenized sentence; please remove them.")
    if not sentences:
        raise ServeError(f"{path}: the file is empty; there are no sentences to read")
    return sentences


def write_arrays(path: str, arrays: Sequence[np.ndarray]) -> None:
    """The arrays into ``path`` (`array_name` of each line), under a temporary name first."""
    partial = path + ".partial"
    try:
        with open(partial, "wb") as handle:
            np.savez(handle, **{array_name(index + 1): array for index, array in enumerate(arrays)})
        os.replace(partial, path)
    except OSError as error:
        if os.path.exists(partial):
            os.remove(partial)
        raise ServeError(f"cannot write {path}: {error.strerror or error}") from None


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_directory", help="what allennlp elmo-export --format onnx wrote")
    parser.add_argument("input_file", help="one whitespace-tokenized sentence per line")
    parser.add_argument("output_file", help="an .npz with one array per line (line_1, line_2, ...)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-positions", type=int, default=DEFAULT_MAX_POSITIONS,
                        help="at most this many rows x positions in a batch (0: no limit)")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    try:
        check_model_directory(args.model_directory)
        sentences = read_sentences(args.input_file)
        try:
            model = ElmoOnnx(args.model_directory, args.threads)
        except Exception as error:  # ONNX Runtime's own errors, a broken character_ids.json
            first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise ServeError(f"{args.model_directory}: cannot load the exported graph: "
                             f"{first_line}") from None
        max_positions = args.max_positions or None
        arrays = embed_sorted(model, sentences, args.batch_size, max_positions)
        write_arrays(args.output_file, arrays)
    except ServeError as error:
        sys.exit(f"serve_onnx.py: error: {error}")
    lengths = [len(sentence) for sentence in sentences]
    in_order = [list(range(s, min(s + args.batch_size, len(lengths))))
                for s in range(0, len(lengths), args.batch_size)]
    print(
        f"{len(sentences)} sentences -> {args.output_file}; padding computed: "
        f"{padding_share(lengths, length_sorted_batches(lengths, args.batch_size, max_positions)):.1%} sorted "
        f"by length, {padding_share(lengths, in_order):.1%} in file order",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
