"""
elmo_plugin: ELMo (Peters et al. 2018) as an AllenNLP plugin.

Importing the package registers its components with AllenNLP (``--include-package elmo_plugin``
or the ``.allennlp_plugins`` file does this for the ``allennlp`` command).
"""
from elmo_plugin.character_ids import ElmoCharacterIds, batch_to_ids
from elmo_plugin.options import BilmOptions
from elmo_plugin.bilm import ElmoBiLm
from elmo_plugin.elmo_characters_indexer import ElmoCharactersIndexer
from elmo_plugin.learning_rate_schedulers import ReduceOnPlateauLearningRateScheduler
