"""
Code written for AllenNLP 0.9 keeps running: ``from allennlp.commands.elmo import ElmoEmbedder``
(the module AllenNLP 1.0 removed) works with the plugin installed, as flair's ``ELMoEmbeddings``
and SeqVec need. The plugin's ``.pth`` file appends a finder to ``sys.meta_path`` that answers for
exactly ``allennlp.commands.elmo`` while ``elmo_plugin`` can be found (a file in AllenNLP's folder
would be owned by no package); `finder.install` does it by hand under ``python -S``.
`allennlp_09` defines the module's names, `allennlp_commands_elmo` is the file loaded under its name.
"""
