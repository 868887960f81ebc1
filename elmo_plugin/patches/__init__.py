"""
Everything the plugin changes in AllenNLP, tensorboardX and the console (docs/architecture.md),
applied only by ``elmo_plugin``'s ``__init__`` (`install`, and `quiet_import` first of all) and
the start-up hook's ``.pth`` line (`startup_hook`).
"""


def install() -> None:
    """Applies every patch of the folder, in this order (each once; each module says how)."""
    from elmo_plugin.patches import console, jsonnet_natives, plugin_lines, tensorboard_shutdown, train_command

    jsonnet_natives.install()  # allennlp.common.params.evaluate_file / evaluate_snippet
    console.install()  # allennlp.common.logging.prepare_global_logging and Tqdm.tqdm
    train_command.install()  # allennlp.commands.train.train_model_from_file / _from_args / dist
    plugin_lines.install()  # a filter on the allennlp.common.plugins logger
    tensorboard_shutdown.install()  # tensorboardX's EventFileWriter.close
