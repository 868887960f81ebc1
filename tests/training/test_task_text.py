"""
``allennlp elmo-task-text`` (`elmo_plugin.training.task_text`): a task config's text, as its reader
gives it to the task model, one sentence a line, against files written by hand.
"""
import json
from pathlib import Path

from allennlp.commands import ArgumentParserWithDefaults

from elmo_plugin.commands.elmo_task_text import ElmoTaskTextCommand
from elmo_plugin.training.task_text import write_task_text

TRAIN = "EU\tB-ORG\nrejects\tO\nGerman\tB-MISC\n\nPeter\tB-PER\nBlackburn\tI-PER\n\nPeter\tB-PER\nBlackburn\tI-PER\n\n"
DEV = "the\tO\nEU\tB-ORG\n\n"


def run_task_text(*arguments) -> int:
    parser = ArgumentParserWithDefaults(prog="allennlp")
    ElmoTaskTextCommand().add_subparser(parser.add_subparsers())
    args = parser.parse_args(["elmo-task-text", *(str(argument) for argument in arguments)])
    try:
        args.func(args)
    except SystemExit as exit:
        return int(exit.code or 0)
    return 0


def task_config(tmp_path: Path, train: str = TRAIN, dev: str = DEV) -> Path:
    (tmp_path / "train.conll").write_text(train, encoding="utf-8")
    (tmp_path / "dev.conll").write_text(dev, encoding="utf-8")
    config = tmp_path / "task.jsonnet"
    config.write_text(
        "local root = %s;\n{ dataset_reader: { type: 'token_tag_conll' }, train_data_path: root + '/train.conll', "
        "validation_data_path: root + '/dev.conll', model: { type: 'anything' } }\n" % json.dumps(str(tmp_path)),
        encoding="utf-8",
    )
    return config


def test_the_reader_s_tokens_one_sentence_a_line_a_repeat_once(tmp_path, capsys):
    assert run_task_text(task_config(tmp_path), tmp_path / "text", "--no-progress") == 0
    assert (tmp_path / "text" / "train.txt").read_text(encoding="utf-8") == "EU rejects German\nPeter Blackburn\n"
    assert (tmp_path / "text" / "validation.txt").read_text(encoding="utf-8") == "the EU\n"
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"wrote {tmp_path / 'text' / 'train.txt'}: 2 sentences, 5 tokens of train_data_path "
        "(1 repeated sentences written once)",
        f"wrote {tmp_path / 'text' / 'validation.txt'}: 1 sentences, 2 tokens of validation_data_path",
    ]


def test_overrides_and_a_token_with_a_space(tmp_path):
    config = task_config(tmp_path, train="New York\tB-LOC\nis\tO\n\n")
    (tmp_path / "other.conll").write_text("a\tO\nb\tO\n\n", encoding="utf-8")
    text = write_task_text(str(config), str(tmp_path / "text"), progress=False)
    assert (tmp_path / "text" / "train.txt").read_text(encoding="utf-8") == "New_York is\n"
    assert text.tokens_joined["train_data_path"] == 1
    overrides = json.dumps({"validation_data_path": str(tmp_path / "other.conll")})
    write_task_text(str(config), str(tmp_path / "text"), overrides, progress=False)
    assert (tmp_path / "text" / "validation.txt").read_text(encoding="utf-8") == "a b\n"


def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys):
    config = task_config(tmp_path)
    assert run_task_text(config, tmp_path / "text", "--field", "words", "--no-progress") == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        f"allennlp elmo-task-text: error: {config}, train_data_path {tmp_path / 'train.conll'}: the instances have "
        "no text field 'words'; their text fields: tokens"
    )
    assert list((tmp_path / "text").iterdir()) == []
    (tmp_path / "empty").mkdir()
    empty = task_config(tmp_path / "empty", train="\n\n")
    assert run_task_text(empty, tmp_path / "text2", "--no-progress") == 1
    # The reader's own error, naming its file.
    assert f"{tmp_path / 'empty' / 'train.conll'}: no sentences" in capsys.readouterr().err
    assert not (tmp_path / "text2" / "train.txt").exists()
    broken = tmp_path / "broken.jsonnet"
    broken.write_text("{ dataset_reader: { type: 'token_tag_conll' },\n  train_data_path: }\n", encoding="utf-8")
    assert run_task_text(broken, tmp_path / "text3") == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"allennlp elmo-task-text: error: {broken}:2:") and len(err.splitlines()) == 1
    assert run_task_text(tmp_path / "nowhere.jsonnet", tmp_path / "text4") == 1
    assert capsys.readouterr().err.strip().endswith("nowhere.jsonnet: no such config file")
