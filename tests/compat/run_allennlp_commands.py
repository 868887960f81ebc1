"""
Runs several ``allennlp`` command lines in one process, each exactly as the ``allennlp``
executable runs it (``allennlp.__main__.run`` with ``sys.argv`` set), so that the command line's
start-up (about ten seconds of imports on the test machine, and 3-5 s of plugin discovery per
command) is paid once, not per command: plugin discovery runs for the first command only.

    python run_allennlp_commands.py COMMANDS_JSON RESULT_JSON

COMMANDS_JSON holds a list of argument lists (without ``allennlp``). Run it from the repository
root: AllenNLP's plugin discovery reads the ``.allennlp_plugins`` file there and imports
elmo_plugin, as for a user who installed the plugin. RESULT_JSON gets each command's exit status
and which ``elmo_token_embedder`` and ``elmo_plugin`` the commands used.
"""
import json
import sys
import time


def main() -> None:
    commands_file, result_file = sys.argv[1:3]
    with open(commands_file, encoding="utf-8") as handle:
        commands = json.load(handle)
    started = time.perf_counter()
    import allennlp.commands as allennlp_commands
    from allennlp.__main__ import run

    seconds = {"imports": time.perf_counter() - started}
    exit_codes = []
    for arguments in commands:
        sys.argv = ["allennlp"] + arguments
        started = time.perf_counter()
        try:
            run()
            exit_codes.append(0)
        except SystemExit as exit:
            exit_codes.append(exit.code if isinstance(exit.code, int) else 1)
        seconds[" ".join(arguments[:2])] = time.perf_counter() - started
        # Plugin discovery imports every submodule of every plugin (allennlp_models: hundreds)
        # again on each call, 3-5 s; the first command did it, and a second time would find the
        # same plugins.
        allennlp_commands.import_plugins = lambda: None
    from allennlp.modules.token_embedders import TokenEmbedder

    embedder = TokenEmbedder.by_name("elmo_token_embedder")
    result = {
        "exit_codes": exit_codes,
        "seconds": seconds,
        "elmo_token_embedder": f"{embedder.__module__}.{embedder.__name__}",
        "elmo_plugin": getattr(sys.modules.get("elmo_plugin"), "__file__", None),
    }
    with open(result_file, "w", encoding="utf-8") as handle:
        json.dump(result, handle)


if __name__ == "__main__":
    main()
