"""
Code written for AllenNLP 0.9 keeps running: ``from allennlp.commands.elmo import ElmoEmbedder``
(the module AllenNLP 1.0 removed) works with the plugin installed, which is how flair's
``ELMoEmbeddings`` and SeqVec reach ELMo.

How the module path exists without touching AllenNLP's files: the plugin's wheel (and its
editable install, see ``setup.py``) puts one file at the top of site-packages,
``elmo_plugin_allennlp_commands_elmo.pth``. Python runs its one line at start-up; the line only
appends a finder to ``sys.meta_path`` (no import of torch, AllenNLP or this package, so start-up
costs nothing measurable). The finder answers for exactly ``allennlp.commands.elmo``, only after
AllenNLP's own files had no such module, and only while ``elmo_plugin`` can be found: then
`finder.find_spec` loads ``allennlp_commands_elmo.py`` of this package under that name. Why not a
file in ``allennlp/commands/``: no package would own it, so a reinstall of AllenNLP would delete
it and uninstalling the plugin would leave it behind. The ``.pth`` file is in the plugin's
``RECORD``, so ``pip uninstall elmo_plugin`` removes it and the import then fails as it did
before (``No module named 'allennlp.commands.elmo'``). ``python -S`` (no site-packages
processing) does not run ``.pth`` files; there ``import elmo_plugin.legacy.finder`` and call
`finder.install`.

- `allennlp_09`: the module's public names as 0.9 had them (``ElmoEmbedder``,
  ``DEFAULT_OPTIONS_FILE`` ...), on `elmo_plugin.ElmoEmbedder`.
- `allennlp_commands_elmo`: the file loaded as ``allennlp.commands.elmo`` (it re-exports them).
- `finder`: the part of the finder that runs once the module is asked for.
"""
