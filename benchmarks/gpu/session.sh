#!/usr/bin/env bash
# The project's runs on a GPU machine (../shared/gpu/README.md), one stage per device call, each
# within the call's 10 minutes. First, here: `bash benchmarks/gpu/pack.sh` (makes .gpu/). Then,
# through the device tool, carrying .gpu (and build/en_small/bilm for `downstream` and `tasks`):
#
#   bash benchmarks/gpu/session.sh day          # the published recipe on one GPU, in 8 minutes:
#                                               # its step (384 x 20, 8,192 negatives of 793,471
#                                               # words) by path (AllenNLP core, eager, compiled,
#                                               # the step captured whole) in TF32 and
#                                               # bfloat16, where the step's time goes (GPU busy
#                                               # share, the host's waits), tokens/s sustained
#                                               # through allennlp train over a stream epoch, the
#                                               # data path alone, compiled against eager
#                                               # perplexity beside the noise floor; then
#                                               # $OUT/day.md: the table and the projection of
#                                               # 10 passes over the 1B Word Benchmark on 1 and 8
#                                               # GPUs (benchmarks/gpu/day_report.py).
#                                               # DAY_DRY=1 runs it on the CPU at tiny sizes in a
#                                               # minute or two (no .gpu needed; PYTHON=...): the
#                                               # check that it runs end to end (tests/benchmarks).
#   bash benchmarks/gpu/session.sh speed        # versions, the device tests, embedding and
#                                               # training speed against AllenNLP core, the host
#                                               # CPU's bfloat16, then the whole test suite
#   bash benchmarks/gpu/session.sh downstream   # with the small biLM of make pretrain-small
#                                               # (carried): the host CPU's bfloat16 speed, the
#                                               # downstream check, bfloat16 accuracy and clip use
#                                               # with the trained biLM
#   bash benchmarks/gpu/session.sh tasks        # only the downstream check (DOWNSTREAM_EPOCHS,
#                                               # DOWNSTREAM_SECONDS; 4 runs at once took 3.6
#                                               # min per epoch on an H200)
#   bash benchmarks/gpu/session.sh cpu          # the host CPU only (AMX or AVX512-BF16): each
#                                               # side's batch-1 step products (lstm_step_bytes.py),
#                                               # bfloat16 and batch-1 speed, and where bfloat16's
#                                               # time goes at batch 64 and float32's at batch 1
#   bash benchmarks/gpu/session.sh profile      # where a training step's time goes on the GPU,
#                                               # and bfloat16 embedding's on the host CPU; then
#                                               # the tests named in $TESTS (default: all)
#   bash benchmarks/gpu/session.sh compiled 1  # the compiled path, in three calls (each within
#   bash benchmarks/gpu/session.sh compiled 2  # 10 minutes): 1. its tests and the device tests
#   bash benchmarks/gpu/session.sh compiled 3  # with CUDA, Original training batch 128 x 20:
#                                               # eager / compiled / AllenNLP core in float32,
#                                               # TF32, bfloat16; 2. the same at batch 256, and
#                                               # compiled with CUDA graphs (reduce-overhead);
#                                               # 3. a profile of the compiled step, Original
#                                               # embedding at batch 64 and 256 of real lengths
#                                               # against core (eager: padded batches) and of one
#                                               # length (compiled and eager), perplexity after
#                                               # 150 steps eager vs compiled.
#                                               # Then the rest of the suite: `speed`.
#
# Logs go to $OUT/logs.tar.gz (the device tool's output folder; build/gpu elsewhere), each step's
# tail to stdout.
set -u
STAGE=${1:?usage: session.sh day|speed|downstream|tasks|cpu|profile|compiled 1|2|3}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
OUTDIR=${OUT:-build/gpu}
LOGS=$OUTDIR/logs
mkdir -p "$LOGS"
START=$(date +%s)
if [ "$STAGE" = day ] && [ -n "${DAY_DRY:-}" ]; then
  # The CPU smoke run of `day`: this checkout's environment as it is, nothing installed.
  PYTHON=${PYTHON:-python3}
  export PYTHONPATH=$PWD
else
  PYTHON=python3
  python3 - <<'PY' || exit 1
import pathlib, tarfile
if not pathlib.Path("/tmp/site/allennlp").is_dir():
    tarfile.open(".gpu/site312.tar.xz").extractall("/tmp/site")
if not pathlib.Path("../shared/data/en/lm/train").is_dir():
    tarfile.open(".gpu/data.tar.xz").extractall("../shared")
PY
  export PYTHONPATH=/tmp/site:$PWD
  # The same paths for the interpreters that tests start with an environment of their own (as a
  # virtual environment with the plugin installed would have them): first on sys.path, before the
  # image's newer transformers, tokenizers and huggingface-hub.
  echo "import sys; sys.path[:0] = ['/tmp/site', '$PWD']" \
    > "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/000-elmo-plugin-gpu.pth"
fi

step() {  # step NAME SECONDS COMMAND...: runs it with a time limit, its log in $LOGS
  local name=$1 limit=$2
  shift 2
  echo "=== $name (at $(( $(date +%s) - START )) s, limit $limit s): $*"
  timeout "$limit" "$@" > "$LOGS/$name.log" 2>&1
  local rc=$?
  grep -v -E '^\s*$|Warning|warn\(' "$LOGS/$name.log" | tail -n "${TAIL:-14}"
  echo "=== $name rc=$rc after $(( $(date +%s) - START )) s"
}
finish() { tar -C "$OUTDIR" -czf "$OUTDIR/logs.tar.gz" logs && rm -rf "$LOGS"; }
collect_task_runs() {  # the task runs' metrics and key log lines, into the logs
  mkdir -p "$LOGS/downstream_runs"
  for run in build/bfloat16_downstream/*/; do
    name=$(basename "$run")
    cp "$run/metrics.json" "$LOGS/downstream_runs/$name.metrics.json" 2>/dev/null
    cp "$run/test_bfloat16.json" "$LOGS/downstream_runs/$name.test_bfloat16.json" 2>/dev/null
  done
  grep -h -E "precision bfloat16|Epoch duration|training_duration" build/bfloat16_downstream/*.log \
    > "$LOGS/downstream_runs/log_lines.txt" 2>/dev/null
}
trap finish EXIT

case "$STAGE" in
day)
  # The standing plan's first item (../shared/gpu/README.md): one call, within 8 minutes on one
  # H100. Compiling the Original recurrence takes a minute or more per shape and precision; the
  # runs share Inductor's cache on disk where shapes repeat. Each run writes JSON into $DAY, and
  # day_report.py turns them into $OUTDIR/day.md whatever ran (a run that did not finish is "not
  # measured"). The captured side is the step captured whole as one CUDA graph (on the CPU the
  # same step function, eagerly); its first 3 steps are eager warm-ups and the 4th captures, all
  # untimed (training_compiled.py).
  DAY=$OUTDIR/day
  mkdir -p "$DAY"
  SIDES="allennlp eager compiled captured"
  if [ -n "${DAY_DRY:-}" ]; then
    # Tiny sizes and a few steps on the CPU, the built-in sample corpus, nothing compiled (the
    # compiled path's CPU check is compiled_against_eager.py's slow test).
    DEVICE=cpu; CUDA=-1; SIZE=tiny; ROWS=8; STEPS=5; NEGATIVES=64; WORDS=2000; BATCHES=4
    CORPUS=elmo_plugin/sample_corpus/train.txt; HELD_OUT=elmo_plugin/sample_corpus/heldout.txt
    SIDES="allennlp eager captured"; COMPILE=false
    PPL="--size tiny --steps 4 --batch-size 4 --eval-sentences 20 --runs eager floor"
    LIMIT=240; DRY=--dry
  else
    DEVICE=cuda; CUDA=0; SIZE=original; ROWS=384; STEPS=8; NEGATIVES=8192; WORDS=793471
    BATCHES=60; CORPUS=../shared/data/en/lm/train; HELD_OUT=../shared/data/en/lm/heldout.txt
    COMPILE=${DAY_COMPILE:-default}
    PPL="--size original --steps ${PPL_STEPS:-100} --batch-size 128 --eval-sentences 200"
    LIMIT=480; DRY=
  fi
  TAIL=12 step day_step 240 $PYTHON benchmarks/training_compiled.py --device $DEVICE \
    --sizes $SIZE --batch-size $ROWS --steps $STEPS --num-samples $NEGATIVES \
    --vocabulary-size $WORDS --precisions tf32 bfloat16 --sides $SIDES --corpus $CORPUS \
    --json "$DAY/step.json"
  if [ "$DEVICE" = cuda ]; then
    TAIL=30 step day_profile 90 $PYTHON benchmarks/gpu/training_step_profile.py --size original \
      --batch-size $ROWS --num-samples $NEGATIVES --vocabulary-size $WORDS --compile default \
      --tf32 --no-cudnn --corpus $CORPUS --json "$DAY/profile.json"
  fi
  TAIL=6 step day_epoch 120 $PYTHON benchmarks/training_epoch.py --cuda-device $CUDA \
    --size $SIZE --batch-size $ROWS --batches $BATCHES --num-samples $NEGATIVES \
    --vocabulary-size $WORDS --precision tf32 --compile $COMPILE --corpus $CORPUS \
    --json "$DAY/epoch.json"
  TAIL=6 step day_data 60 $PYTHON benchmarks/data_path.py --corpus $CORPUS --batch-size $ROWS \
    --batches 100 --loaders bilm_stream bilm_stream_parallel --json "$DAY/data.json"
  left=$(( LIMIT - 20 - ($(date +%s) - START) ))
  if [ $left -gt 30 ]; then
    TAIL=8 step day_perplexity $left $PYTHON benchmarks/compiled_against_eager.py \
      --cuda-device $CUDA $PPL --num-samples $NEGATIVES --precision tf32 --corpus $CORPUS \
      --held-out $HELD_OUT --json "$DAY/perplexity.json"
  fi
  TAIL=80 step day_report 30 $PYTHON benchmarks/gpu/day_report.py "$DAY" --out "$OUTDIR/day.md" $DRY
  ;;
speed)
  TAIL=40 step info 120 bash -c '
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    lscpu | grep -E "Model name|^CPU\(s\)"; grep -o -w -E "avx512f|avx512_bf16|amx_bf16|amx_tile|avx2" /proc/cpuinfo | sort | uniq -c
    python3 -c "import sys, torch; print(sys.version); print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, \"cudnn\", torch.backends.cudnn.version(), torch.cuda.get_device_name())"
    python3 -c "import allennlp.modules.elmo, allennlp_models, elmo_plugin, spacy, transformers, h5py, numpy, scipy; print(\"imports ok\")"
    python3 -m pip list 2>/dev/null | grep -i -E "^(torch|numpy|scipy|h5py|spacy|thinc|transformers|tokenizers|huggingface|pydantic|allennlp|nltk|cached|jsonnet|pytest) "'
  TAIL=30 step test_device 240 python3 -m pytest -q -p no:cacheprovider -rs tests/modules/test_device.py
  step embedding_gpu_cut20 200 python3 benchmarks/embedding_throughput.py --device cuda \
    --sizes small original --batch-sizes 1 64 256 --precision bfloat16 --repeats 5
  step embedding_gpu_natural 200 python3 benchmarks/embedding_throughput.py --device cuda \
    --sizes original --batch-sizes 64 256 --tokens-per-sentence 0 --precision bfloat16 --repeats 5
  step training_gpu_original 240 python3 benchmarks/training_throughput.py --device cuda \
    --sizes original --batch-size 128 --tokens-per-sentence 20 --steps 5 --amp
  step training_gpu_small 120 python3 benchmarks/training_throughput.py --device cuda \
    --sizes small --batch-size 64 --tokens-per-sentence 0 --steps 5 --amp
  if grep -q -w -E "avx512_bf16|amx_bf16" /proc/cpuinfo; then
    step embedding_cpu_bfloat16 240 taskset -c 0,1 python3 benchmarks/embedding_throughput.py \
      --device cpu --threads 2 --sizes small original --batch-sizes 1 64 --precision bfloat16
  fi
  left=$(( 560 - ($(date +%s) - START) ))
  TAIL=25 step tests $(( left > 60 ? left : 60 )) python3 -m pytest -q -p no:cacheprovider -n 12 \
    -rfEs tests
  ;;
downstream)
  # The small biLM trained here (make pretrain-small; carry build/en_small/bilm): pretraining it
  # on the GPU gains little (docs/gpu.md). The task runs use
  # the GPU and cores 4-15 while the CPU timings run on cores 0-1 (side by side in one process,
  # so their ratios hold; their absolute times are no figure).
  BILM=${BILM:-build/en_small/bilm}
  ( trap - EXIT; TAIL=12 step downstream ${DOWNSTREAM_SECONDS:-420} taskset -c 4-15 python3 \
      benchmarks/bfloat16_downstream.py --bilm "$BILM" --runs build/bfloat16_downstream \
      --cuda-device 0 --jobs 4 --threads 2 --seeds 1 2 --num-epochs ${DOWNSTREAM_EPOCHS:-2} \
    ) > "$LOGS/downstream.out" 2>&1 &
  DOWNSTREAM=$!
  if grep -q -w -E "avx512_bf16|amx_bf16" /proc/cpuinfo; then
    step embedding_cpu_bfloat16 150 taskset -c 0,1 python3 benchmarks/embedding_throughput.py \
      --device cpu --threads 2 --sizes small original --batch-sizes 1 64 --precision bfloat16
    step embedding_cpu_batch1 150 bash -c "cd benchmarks && taskset -c 0 python3 \
      embedding_batch1.py --sizes small original --rounds 15 --threads 1"
  fi
  wait $DOWNSTREAM
  cat "$LOGS/downstream.out"
  collect_task_runs
  TAIL=20 step accuracy 90 python3 benchmarks/bfloat16_accuracy.py --device cuda \
    --sizes golden small original "$BILM"
  step clips 60 python3 benchmarks/clip_binding.py "$BILM" tests/fixtures/elmo_allennlp \
    --device cuda
  left=$(( 560 - ($(date +%s) - START) ))
  TAIL=8 step tests_again $(( left > 30 ? left : 30 )) python3 -m pytest -q -p no:cacheprovider \
    -n 4 -rfEs ${TESTS:-tests/model_files/test_elmoformanylangs.py tests/commands/test_elmo.py}
  ;;
tasks)
  # Only the downstream check (what `downstream` runs first), for a call of its own.
  TAIL=12 step downstream ${DOWNSTREAM_SECONDS:-420} python3 benchmarks/bfloat16_downstream.py \
    --bilm "${BILM:-build/en_small/bilm}" --runs build/bfloat16_downstream --cuda-device 0 \
    --jobs 4 --threads 3 --seeds 1 2 --num-epochs ${DOWNSTREAM_EPOCHS:-2}
  collect_task_runs
  ;;
cpu)
  # The CPU measurements, on 2 cores of the host (1 for the batch-1 ones), as on the machines
  # this project is developed on. Nothing here uses the GPU.
  grep -q -w -E "avx512_bf16|amx_bf16" /proc/cpuinfo || { echo "no native bfloat16 on this CPU"; exit 0; }
  TAIL=45 step cpu_step_bytes 90 bash -c "cd benchmarks && taskset -c 0 python3 \
    lstm_step_bytes.py --bfloat16 --rounds 40"
  step cpu_embedding_bfloat16 150 taskset -c 0,1 python3 benchmarks/embedding_throughput.py \
    --device cpu --threads 2 --sizes small original --batch-sizes 1 64 --precision bfloat16
  step cpu_embedding_batch1 120 bash -c "cd benchmarks && taskset -c 0 python3 \
    embedding_batch1.py --sizes small original --rounds 10 --threads 1"
  TAIL=30 step cpu_profile_bfloat16_64 100 taskset -c 0,1 python3 benchmarks/embedding_profile.py \
    --size original --batch-size 64 --precision bfloat16 --threads 2
  TAIL=30 step cpu_profile_float32_1 60 taskset -c 0 python3 benchmarks/embedding_profile.py \
    --size original --batch-size 1 --threads 1
  ;;
profile)
  TAIL=45 step profile_gpu_training 150 python3 benchmarks/gpu/training_step_profile.py \
    --size original --batch-size 128
  TAIL=30 step profile_gpu_training_amp 150 python3 benchmarks/gpu/training_step_profile.py \
    --size original --batch-size 128 --amp
  if grep -q -w -E "avx512_bf16|amx_bf16" /proc/cpuinfo; then
    TAIL=30 step profile_cpu_bfloat16 200 taskset -c 0,1 python3 benchmarks/embedding_profile.py \
      --size original --batch-size 64 --precision bfloat16 --threads 2
  fi
  left=$(( 560 - ($(date +%s) - START) ))
  TAIL=25 step tests_again $(( left > 60 ? left : 60 )) python3 -m pytest -q -p no:cacheprovider \
    -n 8 -rfEs ${TESTS:-tests}
  ;;
compiled)
  # Compiling the Original recurrence takes a minute or more per shape and precision (forward
  # and backward graphs), so each part stays well inside the call's 10 minutes.
  TRAIN="python3 benchmarks/training_compiled.py --device cuda --sizes original --steps 5"
  case "${2:?usage: session.sh compiled 1|2|3}" in
  1)
    # The compiled path's CUDA tests (not slow) and the device tests; the CPU-compiling slow
    # ones and the rest of the suite: `speed`, or TESTS=... with `profile`.
    TAIL=30 step test_compiled_cuda 200 python3 -m pytest -q -p no:cacheprovider -rs \
      tests/modules/test_compiled_step.py tests/modules/test_device.py
    TAIL=8 step training_compiled_128 330 $TRAIN --batch-size 128 \
      --precisions float32 tf32 bfloat16
    ;;
  2)
    TAIL=8 step training_compiled_256 360 $TRAIN --batch-size 256 \
      --precisions float32 tf32 bfloat16
    TAIL=8 step training_cudagraphs_128 180 $TRAIN --batch-size 128 --precisions tf32 bfloat16 \
      --mode reduce-overhead --no-allennlp
    ;;
  3)
    TAIL=45 step profile_compiled 150 python3 benchmarks/gpu/training_step_profile.py \
      --size original --batch-size 128 --compile default --tf32 --no-cudnn
    step embedding_natural 100 python3 benchmarks/embedding_throughput.py --device cuda \
      --sizes original --batch-sizes 64 256 --tokens-per-sentence 0 --precision bfloat16 \
      --repeats 5
    step embedding_one_length_compiled 120 python3 benchmarks/embedding_throughput.py \
      --device cuda --sizes original --batch-sizes 64 256 --tokens-per-sentence 20 \
      --repeats 5 --compile default
    TAIL=8 step perplexity_compiled 180 python3 benchmarks/gpu/compiled_perplexity.py \
      --device cuda --size original --steps 150 --batch-size 128 --tf32
    ;;
  *) echo "compiled takes a part: 1, 2 or 3" >&2; exit 2 ;;
  esac
  ;;
*) echo "unknown stage $STAGE" >&2; exit 2 ;;
esac
