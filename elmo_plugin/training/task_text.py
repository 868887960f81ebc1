"""
A task's text for the paper's fine-tuning protocol (docs/adapting.md, "The paper's protocol for a
task"): the tokens of a task config's training and validation data, exactly as its dataset reader
gives them to the task model, one sentence a line, the corpus format of ``allennlp elmo-adapt``.
Any reader serves (CoNLL, CoNLL-U, SRL frames, Korean reviews through their tokenizer).
"""
import os
import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional

from allennlp.common import Params, Tqdm
from allennlp.common.checks import ConfigurationError
from allennlp.data.dataset_readers.dataset_reader import DatasetReader
from allennlp.data.fields import TextField
from allennlp.data.instance import Instance

from elmo_plugin.training.config_functions import jsonnet_error_line

# The config's data keys and the files they become.
TEXT_FILES = {"train_data_path": "train.txt", "validation_data_path": "validation.txt"}
# The field read when an instance has several text fields and none is chosen.
DEFAULT_TEXT_FIELD = "tokens"
_WHITESPACE = re.compile(r"\s+")


@dataclass
class TaskText:
    """What `write_task_text` wrote: per data key (``train_data_path``...), its file and counts."""

    field: str
    files: Dict[str, str] = field(default_factory=dict)
    sentences: Dict[str, int] = field(default_factory=dict)
    tokens: Dict[str, int] = field(default_factory=dict)
    # A sentence equal to the one before it: a reader's instance per predicate (SRL) or per
    # mention repeats the sentence, which fine-tuning should see once.
    repeats_dropped: Dict[str, int] = field(default_factory=dict)
    # Tokens with whitespace inside, written with "_" for it (the corpus splits at whitespace).
    tokens_joined: Dict[str, int] = field(default_factory=dict)


def text_field_name(instance: Instance, chosen: Optional[str], where: str) -> str:
    """The text field to read: ``chosen``, else ``tokens``, else the only text field there is."""
    names = [name for name, value in instance.fields.items() if isinstance(value, TextField)]
    if chosen is not None:
        if chosen not in names:
            raise ConfigurationError(
                f"{where}: the instances have no text field {chosen!r}; their text fields: {', '.join(names) or 'none'}"
            )
        return chosen
    if DEFAULT_TEXT_FIELD in names:
        return DEFAULT_TEXT_FIELD
    if len(names) == 1:
        return names[0]
    if not names:
        raise ConfigurationError(f"{where}: the reader's instances have no text field, so no text to adapt to")
    raise ConfigurationError(f"{where}: the instances have several text fields ({', '.join(names)}): choose one")


def _write_sentences(instances: Iterable[Instance], path: str, chosen: Optional[str], where: str, text: TaskText,
                     key: str) -> None:
    partial = path + ".partial"
    sentences = tokens = repeats = joined = 0
    previous: Optional[List[str]] = None
    name: Optional[str] = None
    try:
        with open(partial, "w", encoding="utf-8") as handle:
            for instance in instances:
                if name is None:
                    name = text.field = text_field_name(instance, chosen, where)
                words = []
                for token in instance.fields[name].tokens:  # type: ignore[attr-defined]
                    word = token.text.strip()
                    if _WHITESPACE.search(word):
                        word = _WHITESPACE.sub("_", word)
                        joined += 1
                    if word:
                        words.append(word)
                if not words:
                    continue
                if words == previous:
                    repeats += 1
                    continue
                previous = words
                handle.write(" ".join(words) + "\n")
                sentences += 1
                tokens += len(words)
        if sentences == 0:
            raise ConfigurationError(f"{where}: the reader gave no sentence with tokens")
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)
    text.files[key], text.sentences[key], text.tokens[key] = path, sentences, tokens
    text.repeats_dropped[key], text.tokens_joined[key] = repeats, joined


def write_task_text(
    config_file: str,
    output_directory: str,
    overrides: str = "",
    text_field: Optional[str] = None,
    progress: bool = True,
) -> TaskText:
    """
    Writes ``train.txt`` and ``validation.txt`` in ``output_directory``: the sentences of the task
    config's ``train_data_path`` and ``validation_data_path`` as its ``dataset_reader`` (and
    ``validation_dataset_reader``) reads them, one a line, tokens apart by single spaces. A file
    appears only when complete.

    # Parameters

    config_file : `str`
        The task's training config (jsonnet or JSON), as ``allennlp train`` takes it.
    output_directory : `str`
        Where the two files go (made if missing; files already there are replaced).
    overrides : `str`, optional
        JSON overrides of the config, as ``allennlp train -o`` takes them.
    text_field : `str`, optional
        The instances' text field to read; by default ``tokens``, or the only text field.
    progress : `bool`, optional (default = `True`)
        Show a progress bar per file.

    # Raises

    `ConfigurationError`: a config without ``train_data_path``, instances without the text field,
    data with no sentence.
    """
    if not os.path.isfile(config_file):
        raise ConfigurationError(f"{config_file}: no such config file")
    try:
        params = Params.from_file(config_file, overrides)
    except RuntimeError as error:  # jsonnet's: the file and line are in its message
        raise ConfigurationError(jsonnet_error_line(error)) from None
    reader_params = params.get("dataset_reader")
    if reader_params is None:
        raise ConfigurationError(f"{config_file}: the config has no dataset_reader")
    validation_reader_params = params.get("validation_dataset_reader") or reader_params
    if params.get("train_data_path") is None:
        raise ConfigurationError(f"{config_file}: the config has no train_data_path")
    os.makedirs(output_directory, exist_ok=True)
    text = TaskText(field=text_field or DEFAULT_TEXT_FIELD)
    for key, name in TEXT_FILES.items():
        data_path = params.get(key)
        if data_path is None:
            continue
        reader_of_key = validation_reader_params if key == "validation_data_path" else reader_params
        reader = DatasetReader.from_params(reader_of_key.duplicate())
        instances = Tqdm.tqdm(reader.read(data_path), desc=f"reading {key}", disable=not progress)
        _write_sentences(instances, os.path.join(output_directory, name), text_field,
                         f"{config_file}, {key} {data_path}", text, key)
    return text


__all__ = ["TEXT_FILES", "TaskText", "text_field_name", "write_task_text"]
