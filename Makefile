# Two entry points (README.md): `make demo` runs the main job, `make test` runs the tests.
# Both create or reuse the virtual environment in $(VENV).
#
# AllenNLP 2.10.1 declares pins that cannot be met on Python 3.11 to 3.13, so everything is installed
# with --no-deps from a tested, fully pinned list (requirements/constraints.txt).

# The Python of the environment: 3.11, 3.12 or 3.13 (`make venv PYTHON=python3.12`;
# docs/getting_started.md, "Set up"). The pins of requirements/constraints.txt are the same on all three but torchvision's
# (environment markers there).
PYTHON ?= python3
VENV ?= .venv
# TORCH=cpu (default): torch 2.13.0's CPU build (2.13.0+cpu) where pip can find one: this
# project's machines keep the Python 3.11 wheel locally, and pip's configuration may name
# PyTorch's CPU index. PyPI has no CPU build of torch for Linux x86_64, so where pip finds none
# (Python 3.12 and 3.13 here) the Makefile says so and installs PyPI's torch 2.13.0 as TORCH=cuda
# does: a CUDA build with its CUDA libraries (about 4 GB more), which runs on the CPU as well.
# Beside the CPU build on Python 3.11, torchvision 0.15.2, which AllenNLP imports but never uses
# (scripts/quiet_environment.py says why that version). TORCH=cuda: torch 2.13.0 and its own
# torchvision 0.28.0 from PyPI, which are CUDA builds (requirements/torch-cuda.txt;
# docs/gpu.md), installed with their dependencies (the CUDA libraries).
TORCH ?= cpu
PY := $(VENV)/bin/python
# Exits with a message unless the Python running it is 3.11, 3.12 or 3.13.
SUPPORTED_PYTHON := import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] <= (3, 13) else 'make venv: %s is Python %d.%d; 3.11, 3.12 and 3.13 are supported: choose one with PYTHON= (docs/getting_started.md, Set up)' % (sys.executable, *sys.version_info[:2]))
STAMP := $(VENV)/.elmo_plugin-installed
DEMO_DIR ?= demo_output
SHARED ?= ../shared
SMALL_DIR ?= build/en_small
KO_DIR ?= build/ko
ALLENNLP := $(VENV)/bin/allennlp

.PHONY: venv check-python wheel demo test test-random test-all docs docs-serve figure-speed-ratios clean pretrain-small kn-baseline-small tasks-en tokenize-ko pretrain-ko kn-baseline-ko tasks-ko

venv: check-python $(STAMP)

# `make venv PYTHON=python3.12` beside a $(VENV) made with another Python: say so, instead of
# reusing it silently.
check-python:
ifeq ($(origin PYTHON),command line)
	@if [ -x $(PY) ]; then \
		have=$$($(PY) -c 'import sys; print("%d.%d" % sys.version_info[:2])'); \
		want=$$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])') || exit 2; \
		if [ "$$have" != "$$want" ]; then \
			echo "make: $(VENV) was made with Python $$have, not $(PYTHON) ($$want): remove it (rm -rf $(VENV)) or give the new one its own place (VENV=.venv-py$$(echo $$want | tr -d .))" >&2; \
			exit 2; \
		fi; \
	fi
endif

$(STAMP): requirements/constraints.txt requirements/dev.txt requirements/figures.txt requirements/korean.txt requirements/ray.txt requirements/torch-cuda.txt pyproject.toml \
		setup.py elmo_plugin/legacy/elmo_plugin_allennlp_commands_elmo.pth elmo_plugin/patches/elmo_plugin_startup_hook.pth
	@case "$(TORCH)" in cpu|cuda) ;; *) echo "TORCH must be cpu or cuda, got '$(TORCH)'" >&2; exit 2;; esac
	@test -x $(PY) || $(PYTHON) -c "$(SUPPORTED_PYTHON)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -c "$(SUPPORTED_PYTHON)"
	grep -v -E '^(torch|torchvision)==' requirements/constraints.txt > $(VENV)/constraints-without-torch.txt
ifeq ($(TORCH),cuda)
	$(PY) -m pip install --quiet --no-deps -r $(VENV)/constraints-without-torch.txt -r requirements/dev.txt -r requirements/figures.txt
	$(PY) -m pip install --quiet --no-warn-conflicts -c $(VENV)/constraints-without-torch.txt -r requirements/torch-cuda.txt
	$(PY) -c "import torch, sys; sys.exit(0 if torch.version.cuda else 'TORCH=cuda installed a CPU build of torch (' + torch.__version__ + '): a local CPU wheel in your pip configuration (find-links) won; see docs/gpu.md')"
else
	$(PY) -m pip install --quiet --no-deps -r $(VENV)/constraints-without-torch.txt -r requirements/dev.txt -r requirements/figures.txt
	@if $(PY) -m pip install --quiet --no-deps --only-binary :all: 'torch==2.13.0+cpu' > $(VENV)/torch-cpu.log 2>&1; then \
		echo "$(PY) -m pip install --quiet --no-deps -r requirements/constraints.txt"; \
		$(PY) -m pip install --quiet --no-deps -r requirements/constraints.txt; \
	else \
		echo "make venv: pip finds no CPU build of torch 2.13.0 for Python $$($(PY) -c 'import sys; print("%d.%d" % sys.version_info[:2])') (PyPI has none for Linux x86_64): installing PyPI's torch 2.13.0 and torchvision 0.28.0, CUDA builds with their CUDA libraries (about 4 GB more; they run on the CPU too). docs/getting_started.md, \"Set up\", says how to get the CPU build instead."; \
		echo "$(PY) -m pip install --quiet --no-warn-conflicts -c $(VENV)/constraints-without-torch.txt -r requirements/torch-cuda.txt"; \
		$(PY) -m pip install --quiet --no-warn-conflicts -c $(VENV)/constraints-without-torch.txt -r requirements/torch-cuda.txt; \
	fi
endif
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -r requirements/korean.txt
	$(PY) -m pip install --quiet --no-deps -r requirements/ray.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	$(PY) scripts/quiet_environment.py
	touch $(STAMP)

# The plugin as a wheel, to install into an environment of your own (docs/getting_started.md,
# "In your own environment"): dist/elmo_plugin-VERSION-py3-none-any.whl.
wheel: venv
	$(PY) -m pip wheel --quiet --no-deps --no-build-isolation --wheel-dir dist .

demo: venv
	$(PY) scripts/demo.py $(DEMO_DIR)

test: venv
	$(VENV)/bin/ruff check elmo_plugin tests benchmarks scripts examples
	$(PY) -m pytest -q -p no:cacheprovider

# The default tests in a random order (pytest-randomly; the seed is printed at the top, and
# `$(PY) -m pytest -p randomly --randomly-seed=N` repeats one), to find tests that depend on what
# ran before them.
test-random: venv
	$(PY) -m pytest -q -p no:cacheprovider -p randomly

# Everything, the slow tests too (the wheel in a fresh environment, ...): what CI runs.
test-all: venv
	$(VENV)/bin/ruff check elmo_plugin tests benchmarks scripts examples
	$(PY) -m pytest -q -p no:cacheprovider -m "slow or not slow"

# The documentation site (mkdocs.yml): MkDocs + Material, the API reference generated from the
# docstrings by mkdocstrings, in an environment of its own ($(DOCS_VENV): the docs tools' pins are
# apart from AllenNLP's, and nothing of the plugin is imported to document it). `make docs`
# builds build/site with every warning an error (broken links, missing references); CI runs it.
DOCS_VENV ?= .venv-docs
DOCS_STAMP := $(DOCS_VENV)/.docs-installed

$(DOCS_STAMP): requirements/docs.txt
	test -x $(DOCS_VENV)/bin/python || $(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install --quiet --no-deps -r requirements/docs.txt
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict --quiet

docs-serve: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs serve

# The performance page's chart, docs/speed_ratios.png, drawn from benchmarks/results/speed_ratios.json
# (the table "Speed against AllenNLP core" of BENCHMARKS.md, which a test keeps equal to it):
# run after changing that table and the JSON. matplotlib comes from requirements/figures.txt,
# installed for the figures only.
figure-speed-ratios: venv
	$(PY) -m pip install --quiet --no-deps -r requirements/figures.txt
	$(PY) scripts/plot_speed_ratios.py --input benchmarks/results/speed_ratios.json --output docs/speed_ratios.png

clean:
	rm -rf $(DEMO_DIR) build dist *.egg-info

# The English biLM that BENCHMARKS.md reports and the downstream configs use (about an hour on
# 2 CPU cores): vocabulary, training (resumed with -r if interrupted), export, held-out metrics.
pretrain-small: venv
	mkdir -p $(SMALL_DIR)
	test -f $(SMALL_DIR)/vocabulary.txt || $(ALLENNLP) elmo-vocab "$(SHARED)/data/en/lm/train/*.txt" \
		$(SMALL_DIR)/vocabulary.txt --min-count 3 --no-progress
	$(ALLENNLP) train training_configs/bilm_small.jsonnet --include-package elmo_plugin \
		-s $(SMALL_DIR)/run --file-friendly-logging $$(test -d $(SMALL_DIR)/run && echo --recover) \
		-o '{"train_data_path": "$(SHARED)/data/en/lm/train/*.txt", "validation_data_path": "$(SHARED)/data/en/lm/heldout.txt", "vocabulary.vocabulary_file": "$(SMALL_DIR)/vocabulary.txt"}'
	$(ALLENNLP) elmo-export $(SMALL_DIR)/run $(SMALL_DIR)/bilm
	$(ALLENNLP) evaluate $(SMALL_DIR)/run/model.tar.gz $(SHARED)/data/en/lm/heldout.txt \
		--include-package elmo_plugin --output-file $(SMALL_DIR)/heldout_metrics.json

# The count-based anchor for the small biLM: an interpolated modified Kneser-Ney trigram model on
# the same split with the same vocabulary (run pretrain-small first, for the vocabulary).
kn-baseline-small: venv
	$(PY) benchmarks/kneser_ney_trigram.py --train "$(SHARED)/data/en/lm/train/*.txt" \
		--heldout $(SHARED)/data/en/lm/heldout.txt --vocabulary $(SMALL_DIR)/vocabulary.txt \
		--check --json $(SMALL_DIR)/kn_trigram.json

# The Korean corpus: all 642,072 raw reviews of ../shared/data/ko/lm/train and the held-out
# reviews, tokenized into Mecab morphemes (one review per line). Resumable: a rerun skips the output
# files that are complete.
tokenize-ko: venv
	$(ALLENNLP) elmo-tokenize "$(SHARED)/data/ko/lm/train/*.txt" $(KO_DIR)/tokens/train \
		--tokenizer mecab_ko --no-progress
	$(ALLENNLP) elmo-tokenize $(SHARED)/data/ko/lm/heldout.txt $(KO_DIR)/tokens/heldout \
		--tokenizer mecab_ko --no-progress

# The Korean biLM the nsmc_sentiment_elmo and klue_ner_elmo configs use (bilm_ko_small.jsonnet,
# CPU-sized): vocabulary (100,000 lines: <S> </S> <UNK> and the most frequent morphemes), then
# training in one-epoch stages, each its own run in $(KO_DIR)/stageK, so that a stage (45
# to 85 minutes on 2 cores, by CPU) fits in a working session: stage 1 from random weights (Adam 0.002,
# linear decay to 0 over the epoch), stage K > 1 warm-restarted from all of stage K-1's weights
# (the config's continue_from: a fresh Adam at 0.001 and a new decay). A finished stage is kept,
# an interrupted one resumes (--recover) when this is run again. KO_STAGES stages (default 2, the
# run in BENCHMARKS.md); the last is exported to $(KO_DIR)/bilm with its held-out metrics.
KO_STAGES ?= 2
pretrain-ko: tokenize-ko
	test -f $(KO_DIR)/vocabulary.txt || $(ALLENNLP) elmo-vocab "$(KO_DIR)/tokens/train/*.txt" \
		$(KO_DIR)/vocabulary.txt --max-size 100000 --no-progress
	set -e; ko=$$(realpath $(KO_DIR)); previous=null; learning_rate=0.002; \
	for stage in $$(seq 1 $(KO_STAGES)); do \
		run=$$ko/stage$$stage; \
		if [ ! -f $$run/model.tar.gz ]; then \
			printf '%s\n' "(import \"$(CURDIR)/training_configs/bilm_ko_small.jsonnet\")(" \
				"  train_data_path=\"$$ko/tokens/train/*.txt\"," \
				"  validation_data_path=\"$$ko/tokens/heldout/heldout.txt\"," \
				"  vocabulary_file=\"$$ko/vocabulary.txt\", num_epochs=1," \
				"  learning_rate=$$learning_rate, continue_from=$$previous)" > $$run.jsonnet; \
			$(ALLENNLP) train $$run.jsonnet --include-package elmo_plugin -s $$run \
				--file-friendly-logging $$(test -d $$run && echo --recover); \
		fi; \
		previous="\"$$run\""; learning_rate=0.001; \
	done; \
	$(ALLENNLP) elmo-export $$ko/stage$(KO_STAGES) $(KO_DIR)/bilm; \
	$(ALLENNLP) evaluate $$ko/stage$(KO_STAGES)/model.tar.gz $(KO_DIR)/tokens/heldout/heldout.txt \
		--include-package elmo_plugin --output-file $(KO_DIR)/heldout_metrics.json

# The count-based anchor for the Korean biLM, on the same split and vocabulary.
kn-baseline-ko: venv
	$(PY) benchmarks/kneser_ney_trigram.py --train "$(KO_DIR)/tokens/train/*.txt" \
		--heldout $(KO_DIR)/tokens/heldout/heldout.txt --vocabulary $(KO_DIR)/vocabulary.txt \
		--check --json $(KO_DIR)/kn_trigram.json

# Issue 4's table: every English task config as baseline and +ELMo (loads the biLM that
# pretrain-small exported), then the table of gains and docs/layer_weights.png (matplotlib is
# installed from requirements/figures.txt for this target only).
tasks-en: venv
	$(PY) -m pip install --quiet --no-deps -r requirements/figures.txt
	$(PY) benchmarks/task_gains.py --train --tasks ner_wikiann pos_ewt srl_up_ewt genre_ewt \
		--threads 2 --figure docs/layer_weights.png

# The Korean rows of BENCHMARKS.md: NSMC sentiment and KLUE-NER, baseline and +ELMo (the biLM
# that pretrain-ko exported to $(KO_DIR)/bilm), three seeds each, then mean ± std. A finished run
# is kept, so an interrupted queue goes on where it stopped. KO_VARIANTS="baseline elmo elmo_io"
# adds ELMo at the encoder's output too. Two runs at a time, one torch thread each (small LSTMs
# use a second thread poorly: benchmarks/log.md, "Korean downstream over three seeds"); +ELMo runs
# first. Per run, with the other core busy: NSMC +ELMo about 32 minutes on an AVX2 EPYC and 18 on
# an AVX512 one, KLUE-NER +ELMo about 7 / 4, NSMC baseline about 12 / 7, KLUE-NER baseline about
# 3: about 1.4 hours in all on the AVX2 machine (summed from those, not run as one queue).
KO_VARIANTS ?= baseline elmo
tasks-ko: venv
	$(PY) benchmarks/task_gains.py --train --keep-finished --threads 1 --jobs 2 --seeds 1 2 3 \
		--tasks nsmc_sentiment klue_ner --variants $(KO_VARIANTS) --bilm $(KO_DIR)/bilm
