#!/usr/bin/env bash
# Packs what a GPU machine of this project lacks (../shared/gpu/README.md) into .gpu/ (git ignores
# it; a device run carries it): Python 3.12 builds of requirements/constraints.txt's packages
# except those the machine's image has (torch, torchvision, numpy, scipy, h5py and the common
# utilities below), and the shared data the GPU runs read (the English training corpus, 26 MB
# that xz packs to a few, and held-out text; EWT POS).
#
#   bash benchmarks/gpu/pack.sh        # here, on the development machine; about 5 minutes
#
# Why a tarball and not the wheels: the wheels come to 103 MB and a device run carries 64 MiB.
# Unpacked, with the debug symbols stripped from the compiled extensions (spacy's and thinc's
# came with them) and packed with xz, they are 42 MB. fairscale and word2number publish only
# source distributions: pip builds them here (both are pure Python).
set -euo pipefail
cd "$(dirname "$0")/../.."
SHARED=${SHARED:-../shared}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p .gpu "$WORK/wheels" "$WORK/site"
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
# On the machine already (its image, 'cuda'), at versions that work with allennlp 2.10.1.
PRESENT='torch|torchvision|numpy|scipy|h5py|scikit-learn|sympy|mpmath|networkx|pillow|setuptools|joblib|threadpoolctl|anyio|annotated-doc|certifi|charset-normalizer|click|cloudpickle|filelock|fsspec|h11|httpcore|httpx|idna|Jinja2|markdown-it-py|MarkupSafe|mdurl|packaging|protobuf|Pygments|python-dateutil|PyYAML|regex|requests|rich|safetensors|shellingham|six|tqdm|typer|typing_extensions|urllib3|wrapt|narwhals'
grep -v '^#' requirements/constraints.txt | grep -v -i -E "^($PRESENT)==" > "$WORK/requirements.txt"
echo 'elmoformanylangs==0.0.4.post2' >> "$WORK/requirements.txt"
PY=${PY:-.venv/bin/python}
for requirement in $(cat "$WORK/requirements.txt"); do
  case "$requirement" in
    fairscale==*|word2number==*)
      "$PY" -m pip wheel -q --no-deps --no-binary :all: -w "$WORK/wheels" "$requirement" ;;
    *)
      "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform manylinux1_x86_64 -d "$WORK/wheels" "$requirement" ;;
  esac
done
for wheel in "$WORK"/wheels/*.whl; do unzip -q -o "$wheel" -d "$WORK/site"; done
find "$WORK/site" -name '*.so' -exec strip --strip-debug {} +
find "$WORK/site" -name __pycache__ -prune -exec rm -rf {} +
rm -rf "$WORK/site/spacy/tests" "$WORK/site/thinc/tests"
tar -C "$WORK/site" -cf - . | xz -T0 -6 > .gpu/site312.tar.xz
tar -C "$SHARED" -cf - data/en/lm/heldout.txt data/en/lm/train data/en/pos | xz -T0 -6 > .gpu/data.tar.xz
ls -la .gpu
