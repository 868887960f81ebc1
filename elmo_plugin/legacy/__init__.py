"""
``allennlp.commands.elmo``, AllenNLP 0.9's module, for code written for it (flair, SeqVec;
docs/legacy.md): `allennlp_09` defines its names, `allennlp_commands_elmo` is the file loaded
under its name by the finder of the plugin's ``.pth`` file (or `finder.install`).
"""
