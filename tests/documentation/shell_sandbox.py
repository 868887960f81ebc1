"""
The folders the shell blocks of the documentation run in (`test_shell_blocks_run.py`): each block
gets a checkout of its own, so that what one block writes (``runs/``, ``build/ko``) cannot make
another pass or fail, laid out as a user's clone beside the project's shared data::

    ROOT/blockN/repo      the working directory: the repository's code linked in, its configs
                          copied, the inputs the pages assume (sentences.txt, corpus/, raw/, ...)
    ROOT/blockN/shared -> ROOT/shared, small samples of ../shared/data (when that is present)

``training_configs/`` is copied rather than linked: ``paths.libsonnet`` finds the repository from
its own path, so the configs' defaults (``build/en_small/bilm``, ``../shared/data/...``) are then
the sandbox's, and a block's ``make pretrain-small`` writes there and never into this checkout.
"""
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Dict

from tests.helpers import FIXTURES, REPO_ROOT, SHARED_DATA, make_random_bilm_files, train_elmo_tagger

# Linked into every sandbox: what the blocks run or read, never write.
LINKED = (
    "elmo_plugin", "tests", "scripts", "examples", "benchmarks", "requirements", "Makefile",
    "pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "mkdocs.yml", ".allennlp_plugins",
)
# Copied: see the module's docstring.
COPIED = ("training_configs",)

SENTENCES = "the boy hit the ball with a bat .\nI went to the bank .\n"
# Raw Korean text for the pages' `raw/` folder (docs/korean.md, "From raw text to embeddings"):
# reviews as a user has them, untokenized.
KOREAN_REVIEWS = [
    "이 영화는 정말 재미있었다.",
    "배우들의 연기가 너무 좋았어요",
    "스토리가 지루하고 결말이 허무했다.",
    "다시 보고 싶은 영화입니다!",
    "음악이 아름답고 화면이 멋있다.",
    "시간이 아까운 영화였다.",
    "주인공은 끝까지 멋있었다.",
    "나는 이 배우가 싫다.",
]

# The shared data's files that blocks read through the configs' defaults or the Makefile, and how
# many lines (LM text) or sentences/rows (task data) of each the sample keeps.
LM_SAMPLES = {
    "en/lm/train/shard_000.txt": 400,
    "en/lm/heldout.txt": 60,
    "ko/lm/train/shard_000.txt": 300,
    "ko/lm/heldout.txt": 40,
}
TASK_SAMPLES = {
    "en/ner/wikiann/train.txt": 24,
    "en/ner/wikiann/dev.txt": 12,
    "en/ner/wikiann/test.txt": 12,
    "ko/sentiment/train.tsv": 40,
    "ko/sentiment/test.tsv": 20,
    "ko/ner/klue/original/train.tsv": 24,
    "ko/ner/klue/original/test.tsv": 12,
}


def shared_data_samples(data: Path) -> None:
    """Small samples of ``../shared/data`` under ``data``, with the same names."""
    from tests.training_configs.test_task_configs import spread_sentences, spread_tsv_rows

    for relative, lines in LM_SAMPLES.items():
        target = data / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(SHARED_DATA / relative, encoding="utf-8") as source:
            kept = [line for _, line in zip(range(lines), source)]
        target.write_text("".join(kept), encoding="utf-8")
    for relative, count in TASK_SAMPLES.items():
        target = data / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        sample = spread_tsv_rows if "/sentiment/" in relative else spread_sentences
        target.write_text(sample(SHARED_DATA / relative, count), encoding="utf-8")


def elmoformanylangs_zip(path: Path) -> None:
    """What ``curl -LO http://vectors.nlpl.eu/repository/11/161.zip`` downloads: an
    ELMoForManyLangs model directory, zipped (here one the tests build, random weights)."""
    from tests.model_files.test_elmoformanylangs import make_model_directory

    directory = path.parent / "elmoformanylangs-model"
    make_model_directory(directory, word_dim=6)
    with zipfile.ZipFile(path, "w") as archive:
        for file in sorted(directory.rglob("*")):
            if file.is_file():
                archive.write(file, file.relative_to(directory))


def nlpl_zip(path: Path) -> None:
    """What ``curl -LO http://vectors.nlpl.eu/repository/20/212.zip`` downloads: an NLPL ELMo
    model's ZIP (here the golden fixture's files under NLPL's names)."""
    from tests.model_files.test_zip_model import write_zip

    write_zip(path)


def task_archive(directory: Path) -> Path:
    """A tagger trained with the fixture's biLM in its ``elmo_token_embedder`` (one scalar mix):
    what docs/serving.md's ``tagger/model.tar.gz`` stands for."""
    return train_elmo_tagger(directory)


def korean_bilm(directory: Path) -> None:
    """A biLM with 30 bytes per token (random weights) in ``directory``, as ``make pretrain-ko``
    exports one to ``build/ko/bilm``."""
    files = make_random_bilm_files(directory.parent / "random", max_characters_per_token=30)
    directory.mkdir(parents=True)
    shutil.copy(files.options_file, directory / "options.json")
    shutil.copy(files.weight_file, directory / "weights.hdf5")


class Sandboxes:
    """
    Makes the per-block checkouts under ``root``. What no block makes is in every one (the inputs
    below); what one block makes and another uses (`extras`) is put in only where it is used and
    not made, so that a block that makes it starts without it.
    """

    def __init__(self, root: Path, with_shared_data: bool) -> None:
        self.root = root
        self.count = 0
        self.shared = root / "shared"
        if with_shared_data:
            shared_data_samples(self.shared / "data")
        self.downloads = root / "downloads"
        self.downloads.mkdir()
        elmoformanylangs_zip(self.downloads / "161.zip")
        nlpl_zip(self.downloads / "212.zip")
        self._tagger = None

    def tagger(self) -> Path:
        if self._tagger is None:
            self._tagger = task_archive(self.root / "tagger")
        return self._tagger

    def make(self, text: str) -> Path:
        """A fresh checkout for the block whose text is ``text``."""
        self.count += 1
        repo = self.root / f"block{self.count}" / "repo"
        repo.mkdir(parents=True)
        (repo.parent / "shared").symlink_to(self.shared, target_is_directory=True)
        for name in LINKED:
            if (REPO_ROOT / name).exists():
                (repo / name).symlink_to(REPO_ROOT / name)
        for name in COPIED:
            shutil.copytree(REPO_ROOT / name, repo / name)
        # The environment running the tests, where the pages' `.venv` is.
        (repo / ".venv").symlink_to(sys.prefix, target_is_directory=True)
        (repo / "docs").mkdir()  # the figures' targets write here
        self._inputs(repo)
        for made, (uses, makers, put) in self.extras().items():
            if any(use in text for use in uses) and not any(maker in text for maker in makers):
                put(repo / made)
        return repo

    def extras(self) -> Dict[str, tuple]:
        """path -> (fragments of a block that uses it, fragments of one that makes it, maker)."""
        return {
            "demo_output/run/bilm": (["demo_output/run/bilm"], ["make demo"], self._demo_bilm),
            "build/ko/bilm": (["klue_ner_elmo", "nsmc_sentiment_elmo"], ["make pretrain-ko"], korean_bilm),
            "tagger/model.tar.gz": (["tagger/model.tar.gz"], [], self._copy_tagger),
        }

    @staticmethod
    def _demo_bilm(directory: Path) -> None:
        # `make demo` exports the demo's biLM here; the golden fixture's tiny model stands in.
        directory.mkdir(parents=True)
        shutil.copy(FIXTURES / "options.json", directory / "options.json")
        shutil.copy(FIXTURES / "lm_weights.hdf5", directory / "weights.hdf5")

    def _copy_tagger(self, path: Path) -> None:
        path.parent.mkdir(parents=True)
        shutil.copy(self.tagger(), path)

    @staticmethod
    def _inputs(repo: Path) -> None:
        """The files the pages' commands take as given: sentences to embed, an English corpus
        (`corpus/`, from the built-in sample corpus), raw Korean reviews (`raw/`)."""
        (repo / "sentences.txt").write_text(SENTENCES, encoding="utf-8")
        sample = REPO_ROOT / "elmo_plugin" / "sample_corpus"
        train = (sample / "train.txt").read_text(encoding="utf-8").splitlines(keepends=True)
        heldout = (sample / "heldout.txt").read_text(encoding="utf-8").splitlines(keepends=True)
        (repo / "corpus.txt").write_text("".join(train[:40]), encoding="utf-8")
        (repo / "corpus" / "train").mkdir(parents=True)
        (repo / "corpus" / "train" / "part-000.txt").write_text("".join(train[:600]), encoding="utf-8")
        (repo / "corpus" / "train" / "part-001.txt").write_text("".join(train[600:1000]), encoding="utf-8")
        (repo / "corpus" / "heldout.txt").write_text("".join(heldout[:80]), encoding="utf-8")
        (repo / "raw" / "train").mkdir(parents=True)
        reviews = "".join(f"{review}\n" for review in KOREAN_REVIEWS * 6)
        (repo / "raw" / "train" / "reviews.txt").write_text(reviews, encoding="utf-8")
        (repo / "raw" / "heldout.txt").write_text(
            "".join(f"{review}\n" for review in KOREAN_REVIEWS), encoding="utf-8"
        )
