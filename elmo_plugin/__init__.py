"""
elmo_plugin: ELMo (Peters et al. 2018) as an AllenNLP plugin. Importing it registers its components
and subcommands (the task models' too where allennlp-models can be imported) and applies the
patches that `elmo_plugin.patches.install` lists (docs/architecture.md says what exactly). The
public Python API is re-exported here; the task classes come from `elmo_plugin.tasks` on first use.
"""
# First: AllenNLP without the tested environment's torchvision warnings (see the module).
import elmo_plugin.patches.quiet_import  # noqa: F401, I001
from elmo_plugin.model_files.bilm_tf.options import BilmOptions
from elmo_plugin.commands import (
    ElmoAdaptCommand,
    ElmoCommand,
    ElmoExportCommand,
    ElmoScoreCommand,
    ElmoTaskTextCommand,
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
from elmo_plugin.embedding_output import EmbeddingsFile, MissingShardError, ParquetEmbeddings, read_embeddings
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
from elmo_plugin.training import KeepFreedMemoryCallback, ReduceOnPlateauLearningRateScheduler
from elmo_plugin import patches

try:
    import allennlp_models  # noqa: F401  (the task models build on it)
except ImportError:
    TASKS_REGISTERED = False
else:
    import elmo_plugin.tasks  # noqa: F401  (registers them: archives of task models load)

    TASKS_REGISTERED = True

patches.install()

# The task classes, from `elmo_plugin.tasks` on first use (it needs allennlp-models).
TASK_NAMES = (
    "CharacterSpanCrfTagger", "ConlluSentenceGenreReader", "ConlluTaggingReader", "KlueNerF1", "KlueNerReader",
    "SentimentTsvReader", "TokenTagConllReader", "UniversalPropBankSrlReader",
)


def __getattr__(name: str) -> object:
    if name in TASK_NAMES:
        from elmo_plugin import tasks

        return getattr(tasks, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BilmOptions", "ElmoAdaptCommand", "ElmoCommand", "ElmoExportCommand", "ElmoScoreCommand", "ElmoTaskTextCommand",
    "ElmoTokenizeCommand", "ElmoVocabCommand",
    "ElmoCharacterIds", "batch_to_ids", "BilmCorpusReader", "BilmStreamDataLoader", "ElmoCharactersIndexer",
    "KiwiTokenizer", "MecabKoTokenizer", "BilmTfVocabulary", "build_lm_vocabulary", "ElmoEmbedder", "EmbeddingsFile",
    "MissingShardError", "ParquetEmbeddings", "read_embeddings", "ElmoLanguageModel", "LanguageModelScorer", "ElmoBiLm",
    "ElmoAtOutputSeq2Seq", "ElmoAtOutputSeq2Vec", "ElmoInputOutputEmbedder", "Elmo", "ScalarMix", "SingleLayerMix",
    "ElmoTokenEmbedder", "KeepFreedMemoryCallback", "ReduceOnPlateauLearningRateScheduler",
] + (list(TASK_NAMES) if TASKS_REGISTERED else [])
