"""
The ``allennlp elmo`` subcommand (AllenNLP 0.9, removed in 1.0): bulk ELMo embeddings of a file
of tokenized sentences, written to HDF5 (docs/embedding.md). Started by ``torchrun`` it runs
sharded and resumable (`elmo_plugin.embedding_output.sharded_run`); with ``--ray`` on a Ray
cluster, writing Parquet (`elmo_plugin.embedding_output.ray_engine`, which alone imports ray).
"""

import argparse
from typing import Any, Callable, Optional, TypeVar

from allennlp.commands.subcommand import Subcommand
from allennlp.common.checks import ConfigurationError

from elmo_plugin.commands.common import (
    EXIT_USAGE,
    add_file_friendly_logging,
    exit_with_error,
    gpu_memory_as_error,
    positive_int,
    run_reporting_errors,
    subcommand_parser,
    use_file_friendly_logging,
)
from elmo_plugin.common.threads import fix_threads
from elmo_plugin.common.torchrun import TorchrunProcess, torchrun_process
from elmo_plugin.elmo_embedder import ElmoEmbedder
from elmo_plugin.embedding_output.batch_loop import write_embeddings
from elmo_plugin.embedding_output.job import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_PIECE_TOKENS,
    EmbeddingJob,
    ExistingOutputError,
)
from elmo_plugin.embedding_output.layout import LAYOUTS, PER_SENTENCE
from elmo_plugin.embedding_output.plan import shards_directory
from elmo_plugin.embedding_output.ray_engine import run_ray
from elmo_plugin.embedding_output.sharded_run import ShardedResult, run_sharded
from elmo_plugin.model_files.catalogue import (
    DEFAULT_MODEL,
    MODELS_URL_VARIABLE,
    describe_published_models,
)
from elmo_plugin.model_files.resolve import ArgumentNames, IncompleteFilePairError, describe_model_forms
from elmo_plugin.modules.precision import PRECISIONS

_DESCRIPTION = """Embed a file of tokenized sentences with a pretrained ELMo biLM.

The input has one sentence per line, tokens separated by whitespace, UTF-8, no blank lines.
The output is an HDF5 file with one float32 dataset per line, keyed by the 0-based line number
(or by the sentence, with --use-sentence-keys):
  --all      (num_layers, num_tokens, dim): the token layer and every LSTM layer
  --top      (num_tokens, dim): the top LSTM layer
  --average  (num_tokens, dim): the mean of all layers
plus a dataset "sentence_to_index" with a JSON string that maps each sentence (tokens joined by
single spaces) to its key (not written with --forget-sentences or --use-sentence-keys);
--include-sentence-indices writes the same JSON under "sentence_indices" too (AllenNLP 0.8's
name, which its ELMo how-to shows). The file appears only when the run completed. An existing
OUTPUT_FILE is refused; --overwrite replaces it, once the new file is complete.

The model: with none named, the published English "Original" ELMo (AllenNLP 0.9's default),
downloaded on first use into AllenNLP's cache (ALLENNLP_CACHE_ROOT, default ~/.allennlp) and
read from there afterwards, also offline. --model names another published model (see
--list-models), or local files: a directory with options.json and weights.hdf5 (what
allennlp elmo-export writes), an NLPL model's ZIP or its folder (options.json, model.hdf5), an
elmo_bilm model.tar.gz or serialization directory, or an ELMoForManyLangs model directory
(config.json, char.dic, word.dic, *.pkl: 44 languages).
--options-file and --weight-file (paths or URLs) name bilm-tf files directly and win over
--model. ELMO_MODELS_URL replaces the address the published models are downloaded from.

By default every batch starts from a zero LSTM state, so a sentence always gets the same
vectors; --stateful reproduces AllenNLP 0.9 (state carried from batch to batch, results depend
on --batch-size and the order of the lines).

--layout flat writes, instead of one dataset per line, per output layer one (total_tokens, dim)
dataset ("layer_0".. with --all, "top" or "average"), "offsets" (line i is rows
offsets[i]:offsets[i+1]) and "sentences" (each line's text): much faster to write for large
corpora. --float16 stores half the bytes. elmo_plugin.EmbeddingsFile reads either layout.

--sentence-vectors writes one vector per sentence instead of one per token: the mean over its
tokens of the chosen output, (num_layers, dim) with --all and (dim,) otherwise (in the flat
layout one row per line).

Launched by torchrun, every process (rank) embeds its share of the lines (balanced by tokens) on
its own GPU (LOCAL_RANK, with --cuda-device 0) or CPU, into shard files in OUTPUT_FILE.shards/;
rank 0 then assembles OUTPUT_FILE from them with HDF5 virtual datasets (no copy; keep the
.shards directory beside it). Running the same command again after a crash or kill reuses the
finished shards (a killed run wrote no OUTPUT_FILE, so nothing is refused; a completed job runs
again with --overwrite, reusing its shards too). The output directory must be visible to every
node:
  torchrun --nproc-per-node 8 "$(command -v allennlp)" elmo IN OUT --top --layout flat --float16
"""

T = TypeVar("T")

# How errors about the model spell its arguments.
COMMAND_ARGUMENTS = ArgumentNames("--options-file", "--weight-file", "--model", " ")


class _ListModelsAction(argparse.Action):
    """``--list-models``: prints the published models and exits, like ``--help``."""

    def __init__(self, option_strings, dest, help=None) -> None:  # noqa: A002 (argparse's name)
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        print(describe_published_models())
        parser.exit()


@Subcommand.register("elmo")
class ElmoCommand(Subcommand):
    """``allennlp elmo``: see the module documentation and ``allennlp elmo --help``."""

    def add_subparser(self, parser: argparse._SubParsersAction) -> argparse.ArgumentParser:
        subparser = subcommand_parser(
            parser, self.name, _DESCRIPTION,
            "Embed a file of tokenized sentences with a pretrained ELMo biLM (HDF5 output).",
        )
        subparser.add_argument("input_file", help="the sentences: one tokenized sentence per line, UTF-8")
        subparser.add_argument("output_file", help="the HDF5 file to write (refused if it exists)")
        subparser.add_argument(
            "--overwrite", action="store_true",
            help="replace OUTPUT_FILE if it exists, once the new file is complete (until then it stays as it was)",
        )

        layers = subparser.add_mutually_exclusive_group(required=True)
        layers.add_argument("--all", action="store_true", help="write every layer: (num_layers, num_tokens, dim)")
        layers.add_argument("--top", action="store_true", help="write the top layer only: (num_tokens, dim)")
        layers.add_argument("--average", action="store_true", help="write the mean of all layers: (num_tokens, dim)")

        subparser.add_argument(
            "--model", metavar="NAME_OR_PATH",
            help=f"the model: {describe_model_forms()} (published models are downloaded, "
            "ZIPs unpacked, once into AllenNLP's cache; a directory named like a published "
            f"model needs a slash: ./small). Default: {DEFAULT_MODEL}",
        )
        subparser.add_argument(
            "--list-models", action=_ListModelsAction,
            help=f"list the published models (sizes, URLs, whether cached; {MODELS_URL_VARIABLE} "
            "replaces their address) and exit",
        )
        # Not required=True for argparse: giving only one of the two gets its own explanation.
        subparser.add_argument(
            "--options-file", metavar="OPTIONS_JSON",
            help="the bilm-tf options.json of the model (path or URL); with --weight-file, instead of --model",
        )
        subparser.add_argument(
            "--weight-file", metavar="WEIGHTS_HDF5",
            help="the bilm-tf weights.hdf5 that goes with --options-file (path or URL)",
        )
        subparser.add_argument(
            "--batch-size", type=positive_int, default=DEFAULT_BATCH_SIZE, help="sentences per biLM call"
        )
        subparser.add_argument(
            "--cuda-device", type=int, default=-1,
            help="the GPU to run on; -1 runs on the CPU. Under torchrun any value >= 0 means "
            "each process's own GPU, LOCAL_RANK",
        )
        subparser.add_argument(
            "--forget-sentences", action="store_true",
            help='do not write the "sentence_to_index" dataset that maps each sentence to its '
            "line number (useful when the sentence file is kept anyway)",
        )
        subparser.add_argument(
            "--use-sentence-keys", action="store_true",
            help="key each embedding by its sentence instead of its line number; duplicate "
            "sentences and sentences containing '/' are then errors, and no "
            '"sentence_to_index" is written (it would map every sentence to itself)',
        )
        subparser.add_argument(
            "--include-sentence-indices", action="store_true",
            help='also write the JSON map of sentences to line numbers under "sentence_indices", '
            "as AllenNLP 0.8 did (the flag of AllenNLP's ELMo how-to; 0.9 renamed the dataset "
            '"sentence_to_index" and writes it by default); not with --use-sentence-keys',
        )
        subparser.add_argument(
            "--stateful", action="store_true",
            help="carry the LSTM state from each batch to the next, as AllenNLP 0.9 did (its "
            "exact results; they then depend on --batch-size and the line order)",
        )
        subparser.add_argument(
            "--precision", choices=PRECISIONS, default="float32",
            help="bfloat16: the biLM's matrix products in bfloat16 where the CPU or GPU has it "
            "natively (AVX512-BF16 or AMX; Ampere or newer), the cell state and the output "
            "float32; elsewhere one warning and float32 (docs/embedding.md, 'Precision')",
        )
        subparser.add_argument(
            "--layout", choices=LAYOUTS, default=PER_SENTENCE,
            help="per-sentence: one dataset per line (AllenNLP 0.9's layout); flat: per output "
            "layer one (total_tokens, dim) dataset with offsets and sentences, for large corpora",
        )
        subparser.add_argument(
            "--float16", action="store_true", help="store the vectors as float16 (half the bytes; computed as before)"
        )
        subparser.add_argument(
            "--sentence-vectors", action="store_true",
            help="write one vector per sentence, the mean over its tokens: (num_layers, dim) "
            "with --all, (dim,) otherwise",
        )
        subparser.add_argument(
            "--shard-tokens", type=positive_int, default=DEFAULT_PIECE_TOKENS, metavar="N",
            help="under torchrun: about this many tokens per shard file, the unit of work that "
            "a rerun after a crash reuses; an input with fewer tokens per process is cut into "
            "one shard per process",
        )
        subparser.add_argument(
            "--ray", metavar="local|auto|ADDRESS",
            help="run on Ray Data and write a Parquet folder, one row per sentence: local starts "
            "Ray here, auto joins RAY_ADDRESS's cluster (needs elmo_plugin[ray])",
        )
        subparser.add_argument(
            "--ray-workers", type=positive_int, default=1, metavar="N",
            help="with --ray: the number of workers, each holding the model (and a GPU with --cuda-device 0)",
        )
        subparser.add_argument(
            "--threads", type=positive_int, default=None, metavar="N",
            help="the CPU threads of the computation (by default one for batches under 8 "
            "sentences, else the cores that other work leaves idle, re-read as it runs; "
            "OMP_NUM_THREADS also fixes the number)",
        )
        add_file_friendly_logging(subparser)
        # The usage line without the options AllenNLP adds to every subcommand after this.
        subparser.set_defaults(func=elmo_command, elmo_usage=subparser.format_usage())
        return subparser


def embedding_job(args: argparse.Namespace) -> EmbeddingJob:
    """The `EmbeddingJob` that ``allennlp elmo``'s arguments describe (not checked yet)."""
    return EmbeddingJob(
        input_path=args.input_file,
        output_path=args.output_file,
        output_format="all" if args.all else "top" if args.top else "average",
        batch_size=args.batch_size,
        forget_sentences=args.forget_sentences,
        use_sentence_keys=args.use_sentence_keys,
        include_sentence_indices=args.include_sentence_indices,
        layout=args.layout,
        float16=args.float16,
        sentence_vectors=args.sentence_vectors,
        overwrite=args.overwrite,
        piece_tokens=args.shard_tokens,
        # Empty strings count as not given (an unset shell variable in a script).
        model=args.model or None,
        options_file=args.options_file or None,
        weight_file=args.weight_file or None,
        cuda_device=args.cuda_device,
        stateful=args.stateful,
        precision=args.precision,
        argument_names=COMMAND_ARGUMENTS,
        ray_address=args.ray or None,
        ray_workers=args.ray_workers,
    )


def elmo_command(args: argparse.Namespace) -> None:
    """
    Runs ``allennlp elmo`` for parsed arguments: the job (`embedding_job`) in this process, on Ray
    or, started by torchrun, as one rank of a sharded run. The cheap checks
    (`EmbeddingJob.checked`) come before the GPU and the model.
    """
    job = embedding_job(args)
    usage = args.elmo_usage
    if job.include_sentence_indices and job.use_sentence_keys:
        exit_with_error(
            "elmo",
            "--include-sentence-indices maps sentences to line numbers; with --use-sentence-keys "
            "the keys are the sentences themselves: use one of the two",
            EXIT_USAGE,
            usage,
        )
    use_file_friendly_logging(args)
    fix_threads(args.threads)
    process = torchrun_process()
    wrote = f"Wrote ELMo embeddings ({job.output_format}) of {job.input_path} to {job.output_path}"
    not_written = f"interrupted; {job.output_path} was not written."
    if job.ray_address is not None:
        if process is not None:
            exit_with_error("elmo", "--ray runs its own workers; start it without torchrun", EXIT_USAGE)
        count = _run(lambda: _on_ray(job), not_written, usage)
        print(f"{wrote}: {count} sentences, Parquet, by {job.ray_workers} Ray workers")
    elif process is None:
        _run(lambda: _single_process(job), not_written, usage)
        print(wrote)
    else:
        shards = shards_directory(job.output_path)
        result = _run(
            lambda: _sharded(job, process, shards),
            f"rank {process.rank} interrupted; {job.output_path} was not written. The "
            f"finished shards in {shards} are kept: run the same command again to resume.",
            usage if process.is_first else "",
        )
        if result is not None:
            reused = f"; {result.reused_sentences} of them reused from an earlier run"
            print(
                f"{wrote}: {result.num_sentences} sentences by {result.num_ranks} processes"
                f"{reused if result.reused_sentences else ''} (vectors in {result.shards_directory}, keep it "
                "beside the file)"
            )


def _run(work: Callable[[], T], interrupted: str, usage: str) -> T:
    """`run_reporting_errors` for ``allennlp elmo``; an existing output (without --overwrite) is a
    usage error without the usage line."""

    def refusing() -> T:
        try:
            return work()
        except ExistingOutputError as error:
            exit_with_error("elmo", str(error), EXIT_USAGE)

    return run_reporting_errors(
        "elmo", refusing, interrupted=interrupted, usage_errors=(IncompleteFilePairError,), usage=usage
    )


def _single_process(job: EmbeddingJob) -> None:
    checked = job.checked()
    embedder = ElmoEmbedder.for_job(checked)
    with gpu_memory_as_error(job.batch_size, after=f". {job.output_path} was not written."):
        write_embeddings(checked, embedder)


def _on_ray(job: EmbeddingJob) -> int:
    """The job checked here (input, output, options) before Ray starts, then `run_ray`."""
    checked = job.checked()
    try:
        import ray  # noqa: F401 (only to say what is missing)
    except ImportError:
        raise ConfigurationError(
            "--ray needs Ray Data: pip install 'elmo_plugin[ray]' (or requirements/ray.txt)"
        ) from None
    return run_ray(checked, ElmoEmbedder.for_job)


def _sharded(job: EmbeddingJob, process: TorchrunProcess, shards: str) -> Optional[ShardedResult]:
    """One rank of a torchrun job (`run_sharded`); rank 0 checks the job and returns the result."""
    with gpu_memory_as_error(
        job.batch_size, before=f"rank {process.rank}: ",
        after=f". The finished shards in {shards} are kept: run the command again to resume",
    ):
        return run_sharded(process, job, ElmoEmbedder.for_job)
