"""
elmo_plugin: ELMo (Peters et al. 2018) as an AllenNLP plugin.

Importing the package registers its components with AllenNLP (``--include-package elmo_plugin``
or the ``.allennlp_plugins`` file does this for the ``allennlp`` command):

- token indexer ``elmo_characters`` (replaces AllenNLP's; configurable characters per token)
- model ``elmo_bilm``, dataset reader ``bilm_corpus``, vocabulary ``from_bilm_tf_file``
- token embedder ``elmo_token_embedder`` (replaces AllenNLP's) and scalar mixes ``softmax``,
  ``single_layer``
- task dataset readers ``token_tag_conll``, ``conllu_tagging``, ``conllu_sentence_genre``,
  ``universal_propbank_srl``, ``sentiment_tsv``
- Korean tokenizers ``korean`` / ``mecab_ko`` and ``kiwi``
- learning rate scheduler ``reduce_on_plateau`` (replaces AllenNLP's, broken on torch 2.x)
- trainer callback ``keep_freed_memory`` (faster CPU training steps; see `memory_allocator`)
- subcommands ``allennlp elmo``, ``allennlp elmo-vocab``, ``allennlp elmo-export``,
  ``allennlp elmo-tokenize``

It also fills in defaults for the ``ELMO_*`` environment variables that the training configs
read (see `elmo_plugin.config_defaults`).
"""
import warnings

# torchvision (imported by transformers, imported by allennlp) warns on every start because it
# has no image extension on CPU-only machines; the warning is irrelevant to ELMo.
warnings.filterwarnings("ignore", message=".*image Python extension.*")
warnings.filterwarnings("ignore", message=".*torchvision.datapoints.*")

from elmo_plugin.config_defaults import set_environment_defaults  # noqa: E402

set_environment_defaults()

from elmo_plugin.data.character_ids import ElmoCharacterIds, batch_to_ids  # noqa: E402
from elmo_plugin.bilm_tf.options import BilmOptions  # noqa: E402
from elmo_plugin.modules.bilm import ElmoBiLm  # noqa: E402
from elmo_plugin.data.token_indexers.elmo_characters_indexer import ElmoCharactersIndexer  # noqa: E402
from elmo_plugin.training.learning_rate_schedulers import ReduceOnPlateauLearningRateScheduler  # noqa: E402
from elmo_plugin.training.callbacks import KeepFreedMemoryCallback  # noqa: E402
from elmo_plugin.embedding.elmo_embedder import ElmoEmbedder  # noqa: E402
from elmo_plugin.data.vocabulary import BilmTfVocabulary, build_lm_vocabulary  # noqa: E402
from elmo_plugin.data.dataset_readers.bilm_corpus import BilmCorpusReader  # noqa: E402
from elmo_plugin.data.dataset_readers.token_tag_conll import TokenTagConllReader  # noqa: E402
from elmo_plugin.data.dataset_readers.conllu import ConlluSentenceGenreReader, ConlluTaggingReader  # noqa: E402
from elmo_plugin.data.dataset_readers.universal_propbank_srl import UniversalPropBankSrlReader  # noqa: E402
from elmo_plugin.data.dataset_readers.sentiment_tsv import SentimentTsvReader  # noqa: E402
from elmo_plugin.models.elmo_bilm import ElmoBilmModel  # noqa: E402
from elmo_plugin.commands import (  # noqa: E402
    ElmoCommand,
    ElmoExportCommand,
    ElmoTokenizeCommand,
    ElmoVocabCommand,
)
from elmo_plugin.modules.scalar_mix import ScalarMix, SingleLayerMix  # noqa: E402
from elmo_plugin.modules.elmo import Elmo  # noqa: E402
from elmo_plugin.modules.token_embedders.elmo_token_embedder import ElmoTokenEmbedder  # noqa: E402
