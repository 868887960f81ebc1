"""
Everything the plugin changes in AllenNLP, tensorboardX and the console, rather than adding
registered components (docs/architecture.md). Nothing in the library imports this folder; only
``elmo_plugin``'s ``__init__`` (`install`, and `quiet_import` first of all) and the start-up
hook's ``.pth`` line (`startup_hook`) apply it.
"""


def install() -> None:
    """Applies every patch of the folder, in this order (each once; each module says how)."""
    from elmo_plugin.patches import console, jsonnet_natives, plugin_lines, tensorboard_shutdown, train_command

    # allennlp.common.params.evaluate_file / evaluate_snippet: configs may call
    # std.native("elmo_output_dim"), the ELMo width read from the model.
    jsonnet_natives.install()
    # allennlp.common.logging.prepare_global_logging and Tqdm.tqdm: allennlp train's console is a
    # report (ELMO_PLUGIN_VERBOSE=1 shows AllenNLP's), out.log keeps everything.
    console.install()
    # allennlp.commands.train.train_model_from_file / train_model_from_args / dist: checks before
    # the run directory is made, one-line errors and interruptions, no silent wait across nodes.
    train_command.install()
    # A filter on the allennlp.common.plugins logger: no "Plugin ... available" lines unless
    # ELMO_PLUGIN_VERBOSE=1.
    plugin_lines.install()
    # tensorboardX's EventFileWriter.close: no traceback at exit on Python 3.12+ for a writer
    # never written to.
    tensorboard_shutdown.install()
