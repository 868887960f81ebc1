# Two entry points (README.md): `make demo` runs the main job, `make test` runs the tests.
# Both create or reuse the virtual environment in $(VENV).
#
# AllenNLP 2.10.1 declares pins that cannot be met on Python 3.11, so everything is installed
# with --no-deps from a tested, fully pinned list (requirements/constraints.txt).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.elmo_plugin-installed
DEMO_DIR ?= demo_output
SHARED ?= ../shared
SMALL_DIR ?= build/en_small
KO_SMALL_DIR ?= build/ko_small
ALLENNLP := $(VENV)/bin/allennlp

.PHONY: venv demo test clean pretrain-small kn-baseline-small tasks-en tokenize-ko-small pretrain-ko-small

venv: $(STAMP)

$(STAMP): requirements/constraints.txt requirements/dev.txt requirements/korean.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --no-deps -r requirements/constraints.txt -r requirements/dev.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -r requirements/korean.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

demo: venv
	$(PY) -m elmo_plugin.demo $(DEMO_DIR)

test: venv
	$(PY) -m pytest -q -p no:cacheprovider

clean:
	rm -rf $(DEMO_DIR) build *.egg-info

# The English biLM that BENCHMARKS.md reports and the downstream configs use (about an hour on
# 2 CPU cores): vocabulary, training (resumed with -r if interrupted), export, held-out metrics.
pretrain-small: venv
	mkdir -p $(SMALL_DIR)
	test -f $(SMALL_DIR)/vocabulary.txt || $(ALLENNLP) elmo-vocab "$(SHARED)/data/en/lm/train/*.txt" \
		$(SMALL_DIR)/vocabulary.txt --min-count 3 --no-progress
	ELMO_TRAIN_DATA="$(SHARED)/data/en/lm/train/*.txt" ELMO_VALIDATION_DATA=$(SHARED)/data/en/lm/heldout.txt \
		ELMO_VOCABULARY=$(SMALL_DIR)/vocabulary.txt \
		$(ALLENNLP) train training_configs/bilm_small.jsonnet --include-package elmo_plugin \
		-s $(SMALL_DIR)/run --file-friendly-logging $$(test -d $(SMALL_DIR)/run && echo --recover)
	$(ALLENNLP) elmo-export $(SMALL_DIR)/run $(SMALL_DIR)/bilm
	$(ALLENNLP) evaluate $(SMALL_DIR)/run/model.tar.gz $(SHARED)/data/en/lm/heldout.txt \
		--include-package elmo_plugin --output-file $(SMALL_DIR)/heldout_metrics.json

# The count-based anchor for the small biLM: an interpolated modified Kneser-Ney trigram model on
# the same split with the same vocabulary (run pretrain-small first, for the vocabulary).
kn-baseline-small: venv
	$(PY) benchmarks/kneser_ney_trigram.py --train "$(SHARED)/data/en/lm/train/*.txt" \
		--heldout $(SHARED)/data/en/lm/heldout.txt --vocabulary $(SMALL_DIR)/vocabulary.txt \
		--check --json $(SMALL_DIR)/kn_trigram.json

# The Korean corpus of bilm_ko_small: 200,000 raw reviews of ../shared/data/ko/lm (shards 000 and
# 001) and the held-out reviews, tokenized into Mecab morphemes (one review per line). The command
# is resumable: a rerun skips the output files that are complete.
tokenize-ko-small: venv
	$(ALLENNLP) elmo-tokenize "$(SHARED)/data/ko/lm/train/shard_00[01].txt" $(KO_SMALL_DIR)/tokens/train \
		--tokenizer mecab_ko --no-progress
	$(ALLENNLP) elmo-tokenize $(SHARED)/data/ko/lm/heldout.txt $(KO_SMALL_DIR)/tokens/heldout \
		--tokenizer mecab_ko --no-progress

# The Korean biLM the nsmc_sentiment_elmo config uses (bilm_ko_small.jsonnet, CPU-sized), as
# pretrain-small: vocabulary (100,000 lines: <S> </S> <UNK> and the most frequent morphemes),
# training (resumed with -r if interrupted), export, held-out metrics.
pretrain-ko-small: tokenize-ko-small
	mkdir -p $(KO_SMALL_DIR)
	test -f $(KO_SMALL_DIR)/vocabulary.txt || $(ALLENNLP) elmo-vocab "$(KO_SMALL_DIR)/tokens/train/*.txt" \
		$(KO_SMALL_DIR)/vocabulary.txt --max-size 100000 --no-progress
	ELMO_TRAIN_DATA="$(KO_SMALL_DIR)/tokens/train/*.txt" ELMO_VALIDATION_DATA=$(KO_SMALL_DIR)/tokens/heldout/heldout.txt \
		ELMO_VOCABULARY=$(KO_SMALL_DIR)/vocabulary.txt \
		$(ALLENNLP) train training_configs/bilm_ko_small.jsonnet --include-package elmo_plugin \
		-s $(KO_SMALL_DIR)/run --file-friendly-logging $$(test -d $(KO_SMALL_DIR)/run && echo --recover)
	$(ALLENNLP) elmo-export $(KO_SMALL_DIR)/run $(KO_SMALL_DIR)/bilm
	$(ALLENNLP) evaluate $(KO_SMALL_DIR)/run/model.tar.gz $(KO_SMALL_DIR)/tokens/heldout/heldout.txt \
		--include-package elmo_plugin --output-file $(KO_SMALL_DIR)/heldout_metrics.json

# Issue 4's table: every English task config as baseline and +ELMo (loads the biLM that
# pretrain-small exported), then the table of gains and docs/layer_weights.png (matplotlib is
# installed from requirements/figures.txt for this target only).
tasks-en: venv
	$(PY) -m pip install --quiet --no-deps -r requirements/figures.txt
	$(PY) benchmarks/task_gains.py --train --tasks ner_wikiann pos_ewt srl_up_ewt genre_ewt \
		--threads 2 --figure docs/layer_weights.png
