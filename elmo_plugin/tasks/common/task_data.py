"""
Opening a task config's data file: the configs read it under ``data_root`` (by default
``../shared/data``, which a user does not have), so a missing file's error names the file,
``data_root``, the data set's public source and how to pass another ``data_root``.
"""
import re

from allennlp.common.checks import ConfigurationError
from allennlp.common.file_utils import cached_path

# The layout under data_root that the task configs expect: folder -> (task configs, source).
# ../shared/data/README.md has the recipes that built the files from these sources.
TASK_DATA_SOURCES = {
    "en/ner/wikiann": (
        "ner_wikiann",
        "WikiANN English, files WikiANN/en/{train,dev,test} of github.com/davidsbatista/NER-datasets "
        "(token<TAB>tag lines) as en/ner/wikiann/{train,dev,test}.txt",
    ),
    "en/ner/wnut17": (
        "ner_wnut17",
        "WNUT-17 Emerging and Rare Entities, files WNUT17/ of github.com/davidsbatista/NER-datasets "
        "(token<TAB>tag lines) as en/ner/wnut17/{train,dev,test}.txt",
    ),
    "en/pos": (
        "pos_ewt, genre_ewt",
        "Universal Dependencies English-EWT v2.16, github.com/UniversalDependencies/UD_English-EWT, "
        "as en/pos/en_ewt-ud-{train,dev,test}.conllu",
    ),
    "en/srl/up_ewt": (
        "srl_up_ewt",
        "Universal PropBank English-EWT, github.com/UniversalPropositions/UP-1.0 "
        "(UP_English-EWT/en_ewt-up-{dev,test}.conllu) as en/srl/up_ewt/",
    ),
    "ko/sentiment": (
        "nsmc_sentiment",
        "the Naver movie reviews of github.com/e9t/nsmc as id<TAB>text<TAB>label TSV files "
        "ko/sentiment/{train,test}.tsv (NSMC's own ratings_train.txt/ratings_test.txt work too: "
        "the same columns)",
    ),
    "ko/ner/klue": (
        "klue_ner",
        "KLUE-NER v1.1, github.com/KLUE-benchmark/KLUE (klue_benchmark/klue-ner-v1.1/), as "
        "ko/ner/klue/original/{train,test}.tsv",
    ),
}


def missing_task_data(path: str) -> ConfigurationError:
    """The error for a data file that does not exist (see the module documentation)."""
    for folder, (configs, source) in TASK_DATA_SOURCES.items():
        layout = re.match(rf"^(.*?)/{re.escape(folder)}(/|$)", path)
        if layout:
            return ConfigurationError(
                f"the data file {path} does not exist. The task configs ({configs}) read it under their "
                f"data_root argument (here {layout.group(1) or '/'}; by default ../shared/data beside the "
                f"repository, which only the project's machines have). The data is public: {source}. Put it "
                f"under a folder of yours and pass data_root in a config of your own, e.g. "
                f'(import "/path/to/elmo_plugin/training_configs/tasks/{configs.split(",")[0]}.libsonnet")'
                f'(use_elmo=false, data_root="/path/to/data"), or give the paths with -o '
                f"'{{\"train_data_path\": ..., \"validation_data_path\": ...}}'"
            )
    return ConfigurationError(f"the data file {path} does not exist")


def task_data_path(file_path: str) -> str:
    """``cached_path(file_path)``, with `missing_task_data` for a local file that is missing."""
    try:
        return cached_path(file_path)
    except FileNotFoundError:
        raise missing_task_data(str(file_path)) from None
