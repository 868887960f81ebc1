"""
elmo_plugin: ELMo (Peters et al. 2018) as an AllenNLP plugin.

Importing the package registers its components with AllenNLP (the ``allennlp`` command of an
environment the plugin is installed in does this by itself, `elmo_plugin.common.startup_hook`;
``--include-package elmo_plugin`` and the ``.allennlp_plugins`` file do it too) and sets up how
``allennlp train`` reads configs and reports (the last item), and does nothing else:

- token indexers ``elmo_characters`` (replaces AllenNLP's; configurable characters per token) and
  ``elmoformanylangs_characters`` (an ELMoForManyLangs model's own character and word ids)
- data loader ``bilm_stream`` (stream batching's tensors straight from the windows)
- dataset readers ``bilm_corpus`` (pretraining), ``token_tag_conll``, ``conllu_tagging``,
  ``conllu_sentence_genre``, ``universal_propbank_srl``, ``sentiment_tsv``, ``klue_ner``
- vocabulary ``from_bilm_tf_file``; Korean tokenizers ``korean`` / ``mecab_ko`` and ``kiwi``
- model ``elmo_bilm`` (the language model that pretraining trains) and
  ``character_span_crf_tagger`` (a CRF tagger scored on characters, for KLUE-NER)
- token embedder ``elmo_token_embedder`` (replaces AllenNLP's) and scalar mixes ``softmax``,
  ``single_layer``; ELMo at the input and output of a task encoder: text field embedder
  ``elmo_input_output`` with the seq2seq / seq2vec encoder wrapper ``elmo_at_output``
- learning rate schedulers ``reduce_on_plateau`` (replaces AllenNLP's, broken on torch 2.x) and
  ``linear_decay_over_corpus``; the optimizer ``dense_sparse_adagrad`` (Adagrad row by row for
  the softmax's sparse gradients); trainer callbacks ``keep_freed_memory``,
  ``check_training_settings``, ``count_batches_per_epoch``; the trainer ``gradient_descent``
  (replaces AllenNLP's default trainer by the same one with a GPU check that works on torch 2.x,
  reading the loss and metrics from the device at an interval, not every batch);
  the checkpointer ``default`` (replaces AllenNLP's by the same one made right for several nodes);
  metric ``klue_ner_f1``
- subcommands ``allennlp elmo``, ``elmo-vocab``, ``elmo-export``, ``elmo-tokenize``, ``elmo-score``
- for ``allennlp train`` (wrapping five AllenNLP functions, see each module): the configs'
  native function ``elmo_output_dim`` (`elmo_plugin.training.config_functions`), the console
  report (`elmo_plugin.training.console`; ``ELMO_PLUGIN_VERBOSE=1`` for AllenNLP's console) and
  the checks before training with one-line errors (`elmo_plugin.commands.train_command`)
- against console noise: AllenNLP's "Plugin ... available" lines only with
  ``ELMO_PLUGIN_VERBOSE=1`` (`elmo_plugin.common.plugin_lines`), and no tensorboardX traceback at
  exit on Python 3.12+ (`elmo_plugin.common.tensorboard_shutdown`)

The public Python API is re-exported here: `ElmoEmbedder`, `EmbeddingsFile` (reads what
``allennlp elmo`` writes, either layout, sharded or not), `Elmo`, `ElmoBiLm`, `BilmOptions`,
`batch_to_ids`, `LanguageModelScorer` (sentence scores and lexical substitutes), ...
"""
# First: AllenNLP without the tested environment's torchvision warnings (see the module).
import elmo_plugin.common.quiet_import  # noqa: F401, I001
from elmo_plugin.model_files.bilm_tf.options import BilmOptions
from elmo_plugin.commands import (
    ElmoCommand,
    ElmoExportCommand,
    ElmoScoreCommand,
    ElmoTokenizeCommand,
    ElmoVocabCommand,
)
from elmo_plugin.data.character_ids import ElmoCharacterIds, batch_to_ids
from elmo_plugin.data.dataset_readers import BilmCorpusReader
from elmo_plugin.data.stream_batches import BilmStreamDataLoader
from elmo_plugin.data.token_indexers import ElmoCharactersIndexer
from elmo_plugin.korean import KiwiTokenizer, MecabKoTokenizer
from elmo_plugin.data.vocabulary import BilmTfVocabulary, build_lm_vocabulary
from elmo_plugin.elmo_embedder import ElmoEmbedder
from elmo_plugin.embedding_output import EmbeddingsFile, MissingShardError, read_embeddings
from elmo_plugin.models import ElmoLanguageModel, LanguageModelScorer
from elmo_plugin.modules import (
    Elmo,
    ElmoAtOutputSeq2Seq,
    ElmoAtOutputSeq2Vec,
    ElmoBiLm,
    ElmoInputOutputEmbedder,
    ScalarMix,
    SingleLayerMix,
)
from elmo_plugin.modules.token_embedders import ElmoTokenEmbedder
from elmo_plugin.tasks import (
    CharacterSpanCrfTagger,
    ConlluSentenceGenreReader,
    ConlluTaggingReader,
    KlueNerF1,
    KlueNerReader,
    SentimentTsvReader,
    TokenTagConllReader,
    UniversalPropBankSrlReader,
)
from elmo_plugin.training import KeepFreedMemoryCallback, ReduceOnPlateauLearningRateScheduler
from elmo_plugin.commands import train_command
from elmo_plugin.common import plugin_lines, tensorboard_shutdown
from elmo_plugin.training import config_functions, console

# `allennlp train` with the plugin: configs that read the ELMo width from the model, a console
# that reads as a report (ELMO_PLUGIN_VERBOSE=1 shows AllenNLP's), one line for a mistake in
# the input, checked before the run directory is made (see each module).
config_functions.install()
console.install()
train_command.install()

# AllenNLP's "Plugin ... available" lines only with ELMO_PLUGIN_VERBOSE=1, and no tensorboardX
# traceback at exit on Python 3.12+ (see each module).
plugin_lines.install()
tensorboard_shutdown.install()

__all__ = [
    "BilmOptions",
    "ElmoCommand",
    "ElmoExportCommand",
    "ElmoScoreCommand",
    "ElmoTokenizeCommand",
    "ElmoVocabCommand",
    "ElmoCharacterIds",
    "batch_to_ids",
    "BilmCorpusReader",
    "BilmStreamDataLoader",
    "ConlluSentenceGenreReader",
    "ConlluTaggingReader",
    "SentimentTsvReader",
    "TokenTagConllReader",
    "UniversalPropBankSrlReader",
    "KlueNerReader",
    "ElmoCharactersIndexer",
    "KiwiTokenizer",
    "MecabKoTokenizer",
    "BilmTfVocabulary",
    "build_lm_vocabulary",
    "ElmoEmbedder",
    "EmbeddingsFile",
    "MissingShardError",
    "read_embeddings",
    "ElmoLanguageModel",
    "LanguageModelScorer",
    "CharacterSpanCrfTagger",
    "ElmoBiLm",
    "ElmoAtOutputSeq2Seq",
    "ElmoAtOutputSeq2Vec",
    "ElmoInputOutputEmbedder",
    "Elmo",
    "ScalarMix",
    "SingleLayerMix",
    "ElmoTokenEmbedder",
    "KeepFreedMemoryCallback",
    "KlueNerF1",
    "ReduceOnPlateauLearningRateScheduler",
]
