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

.PHONY: venv demo test clean

venv: $(STAMP)

$(STAMP): requirements/constraints.txt requirements/dev.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --no-deps -r requirements/constraints.txt -r requirements/dev.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

demo: venv
	$(PY) -m elmo_plugin.demo $(DEMO_DIR)

test: venv
	$(PY) -m pytest -q -p no:cacheprovider

clean:
	rm -rf $(DEMO_DIR) build *.egg-info
