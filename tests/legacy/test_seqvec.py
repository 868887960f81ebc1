"""
SeqVec (``seqvec`` 0.4.1, requirements/dev.txt, installed --no-deps: it pins AllenNLP 0.9, torch
< 2 and numpy < 2), unchanged, on the plugin: its embedder does ``from allennlp.commands.elmo
import ElmoEmbedder`` and ``ElmoEmbedder(weight_file=..., options_file=..., cuda_device=...)`` on
a model directory in SeqVec's published layout (``options.json`` + ``weights.hdf5`` of bilm-tf),
then ``embed_batch`` on proteins split into amino-acid tokens (``list(sequence)``), and gives the
vectors `elmo_plugin.ElmoEmbedder` gives.

The models are random weights of SeqVec's architecture: ELMo "Original" (2 LSTM layers of 4096
cells projected to 512, 2048 character filters, 2 highways: 93.6M parameters, (3, L, 1024)
vectors, as SeqVec's paper and seqvec's own docstrings say) with its training options of a
28-token amino-acid vocabulary. The default run uses the same layout at a small width; the full
size runs seqvec's command line in a fresh interpreter (slow).
"""
import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict

import h5py
import numpy as np
import pytest
import torch

from elmo_plugin.elmo_embedder import ElmoEmbedder
from elmo_plugin.legacy import finder
from elmo_plugin.model_files.bilm_tf.directory import write_bilm_tf_directory
from elmo_plugin.model_files.bilm_tf.options import BilmOptions
from elmo_plugin.modules.bilm import ElmoBiLm
from tests.helpers import REPO_ROOT, randomize_bilm_

pytestmark = pytest.mark.usefixtures("single_thread")

finder.install()  # the module seqvec imports (see test_allennlp_commands_elmo.py for the .pth)

SEQVEC_OPTIONS = {
    "bidirectional": True,
    "char_cnn": {
        "activation": "relu",
        "embedding": {"dim": 16},
        "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
        "max_characters_per_token": 50,
        "n_characters": 261,
        "n_highway": 2,
    },
    "dropout": 0.1,
    "lstm": {"cell_clip": 3, "dim": 4096, "n_layers": 2, "proj_clip": 3, "projection_dim": 512,
             "use_skip_connections": True},
    # Training options of SeqVec's paper: 28 tokens (amino acids, ambiguous and unknown ones,
    # <S>, </S> and padding), longer unrolls for proteins.
    "all_clip_norm_val": 10.0, "batch_size": 128, "n_epochs": 10, "n_tokens_vocab": 28,
    "unroll_steps": 100, "n_negative_samples_batch": 20,
}

# The same layout at a small width, for the default run.
SMALL_SEQVEC_OPTIONS = copy.deepcopy(SEQVEC_OPTIONS)
SMALL_SEQVEC_OPTIONS["char_cnn"].update(filters=[[1, 8], [2, 8], [3, 16]], embedding={"dim": 4})
SMALL_SEQVEC_OPTIONS["lstm"].update(dim=64, projection_dim=16)

# UniProt-style FASTA headers (seqvec takes the field after the first "|"), one sequence over
# several lines, lower case (seqvec upper-cases), and the rare or ambiguous letters X, U, B, Z.
FASTA = """>sp|P0A7|ribosomal
MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQAPILSRVGDGTQDNLSGAEKAVQVKVK
ALPDAQFEVVHSLAKWKRQTLGQHDFSAGEGLYTHMKALRPDEDRLSPLHSVYVDQWDWE
RVMGDGERQFSTLKSTVEAIWAGIKATEAAVSEEFGLAPFLPDQIHFVHSQELLSRYPDL
DAKGRERAIAKDLGAVFLVGIGGKLSDGHRHDVRAPDYDDWSTPSELGHAGLNGDILVWN
PVLEDAFELSSMGIRVDADTLKHQLALTGDEDRLELEWHQALLRGEMPQTIGGGIGQSRL
TMLLLQLPHIGQVQAGVWPAACRKQLHLPQISLM
>sp|Q9XY|short
mseqwence
>sp|X123|rare
MXUBZAGLKHHHHHH
>sp|P999|tiny
MA
"""
SEQUENCES = {
    "P0A7": "".join(FASTA.split(">")[1].splitlines()[1:]),
    "Q9XY": "MSEQWENCE",
    "X123": "MXUBZAGLKHHHHHH",
    "P999": "MA",
}


def write_seqvec_model(directory: Path, options: Dict, seed: int = 0) -> Path:
    """A random biLM of ``options`` in SeqVec's layout: ``directory/options.json`` (the options
    as given, training keys included) and ``directory/weights.hdf5``."""
    bilm_options = BilmOptions.from_dict(options)
    torch.manual_seed(seed)
    bilm = randomize_bilm_(ElmoBiLm(bilm_options), seed=seed)
    write_bilm_tf_directory(str(directory), bilm_options, bilm.state_dict(), n_characters=261)
    return directory


def expected_vectors(model_directory: Path) -> Dict[str, np.ndarray]:
    """Our embedder's layers of each protein, as seqvec's ``--layer all`` stacks them
    (``(L, 3 * dim)``), from one batch of the four in seqvec's order (shortest first): the same
    batch seqvec makes, so that only the code between differs (alone, a 334-residue protein of
    this random model drifts by up to 3e-5 from its batched vectors)."""
    ours = ElmoEmbedder(model=str(model_directory))
    identifiers = sorted(SEQUENCES, key=lambda identifier: len(SEQUENCES[identifier]))
    batch = ours.embed_batch([list(SEQUENCES[identifier]) for identifier in identifiers])
    return {
        identifier: np.concatenate(list(layers), axis=1)
        for identifier, layers in zip(identifiers, batch)
    }


def test_seqvecs_embedder_gives_the_plugins_vectors(tmp_path):
    from seqvec.seqvec import get_embeddings

    model = write_seqvec_model(tmp_path / "model", SMALL_SEQVEC_OPTIONS)
    (tmp_path / "proteins.fasta").write_text(FASTA, encoding="utf-8")
    # cpu=True, "all" layers per residue: seqvec's own batching (all four in one embed_batch).
    embedded = dict(get_embeddings(tmp_path / "proteins.fasta", model, cpu=True, layer="all"))
    expected = expected_vectors(model)
    assert embedded.keys() == expected.keys()
    for identifier, vectors in embedded.items():
        assert vectors.shape == (len(SEQUENCES[identifier]), 3 * 32)
        np.testing.assert_allclose(vectors, expected[identifier], rtol=0, atol=1e-6)
    # Per protein: the mean over residues of the sum of the layers.
    per_protein = dict(
        get_embeddings(tmp_path / "proteins.fasta", model, cpu=True, per_protein=True)
    )
    for identifier, vector in per_protein.items():
        summed = expected[identifier].reshape(len(SEQUENCES[identifier]), 3, 32).sum(axis=1)
        np.testing.assert_allclose(vector, summed.mean(axis=0), rtol=0, atol=1e-5)


@pytest.mark.slow
def test_seqvecs_command_line_on_a_full_size_seqvec_model(tmp_path):
    # The 93.6M-parameter architecture (weights.hdf5 of about 375 MB), through seqvec's console
    # script: a fresh interpreter that finds allennlp.commands.elmo through the plugin's .pth.
    # One thread there as here: on a CPU whose kernels split the work by thread count, the
    # 334-residue protein of this random model drifts by up to 2e-3 between one and two threads.
    model = write_seqvec_model(tmp_path / "model", SEQVEC_OPTIONS)
    assert os.path.getsize(model / "weights.hdf5") > 350e6
    (tmp_path / "proteins.fasta").write_text(FASTA, encoding="utf-8")
    result = subprocess.run(
        [str(Path(sys.executable).parent / "seqvec"), "-i", "proteins.fasta", "-o", "out.h5",
         "--model", str(model), "--cpu", "--layer", "all", "--silent"],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_NUM_THREADS="1"),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    expected = expected_vectors(model)
    with h5py.File(tmp_path / "out.h5", "r") as output:
        assert set(output.keys()) == set(SEQUENCES)
        for identifier, sequence in SEQUENCES.items():
            vectors = output[identifier][...]
            assert vectors.shape == (len(sequence), 3 * 1024)
            np.testing.assert_allclose(vectors, expected[identifier], rtol=0, atol=1e-6)
