"""
A model in a ZIP archive as the NLPL vector repository distributes ELMo (``options.json`` and
``model.hdf5``), unpacked once into the cache, into a folder named by the ZIP's content, under a file
lock and through a temporary folder, so that no process reads a half-unpacked model.
"""
import contextlib
import glob
import hashlib
import json
import logging
import os
import shutil
import uuid
import zipfile
import zlib
from typing import Dict, List

from allennlp.common.checks import ConfigurationError
from filelock import FileLock

from elmo_plugin.common.write_errors import is_write_failure, write_failure
from elmo_plugin.model_files.bilm_tf.directory import OPTIONS_NAME, WEIGHTS_NAME
from elmo_plugin.model_files.download import KINDS, file_problem

logger = logging.getLogger(__name__)

# NLPL's names: the weights are model.hdf5; vocab.txt and meta.json are unpacked where present.
ZIP_WEIGHTS_NAME = "model.hdf5"
OPTIONAL_NAMES = ("vocab.txt", "meta.json")

# Under the cache directory: one folder per ZIP content.
CACHE_FOLDER = "elmo_zip_models"


def is_zip_model(path: str) -> bool:
    """Whether ``path`` is a ZIP file (or one cut short, named ``*.zip``), not a directory."""
    return os.path.isfile(path) and (zipfile.is_zipfile(path) or path.lower().endswith(".zip"))


def weights_name_in(directory: str) -> str:
    """The weight file's name in a bilm-tf model's folder: ``weights.hdf5``, else NLPL's ``model.hdf5``."""
    if os.path.isfile(os.path.join(directory, WEIGHTS_NAME)):
        return WEIGHTS_NAME
    return ZIP_WEIGHTS_NAME if os.path.isfile(os.path.join(directory, ZIP_WEIGHTS_NAME)) else WEIGHTS_NAME


def unpacked_zip_model(path: str, cache_dir: str) -> str:
    """
    The folder in ``cache_dir`` that holds the model of the ZIP at ``path``, unpacked on first use.

    # Raises

    `ConfigurationError`
        On one line naming ``path``: a damaged ZIP, missing or wrong files, or an unwritable cache.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            members = _model_members(path, archive)
            folder = os.path.join(cache_dir, CACHE_FOLDER, _content_key(members))
            if _complete(folder):
                return folder
            os.makedirs(os.path.dirname(folder), exist_ok=True)
            with FileLock(folder + ".lock"):
                # Another process may have unpacked it while this one waited.
                if not _complete(folder):
                    _unpack(path, archive, members, folder)
    except (zipfile.BadZipFile, zlib.error, EOFError) as error:
        raise ConfigurationError(
            f"{path}: the ZIP archive is damaged or incomplete ({error}); was it downloaded whole?"
        ) from None
    except OSError as error:
        if is_write_failure(error):
            raise write_failure(
                f"{os.path.join(cache_dir, CACHE_FOLDER)} (where {path} is unpacked)", error,
                "nothing else was touched",
            ) from None
        raise ConfigurationError(
            f"{path}: cannot be read or unpacked into {os.path.join(cache_dir, CACHE_FOLDER)} "
            f"({error.strerror or error})"
        ) from None
    return folder


def _model_members(path: str, archive: zipfile.ZipFile) -> Dict[str, zipfile.ZipInfo]:
    """The model's members by the name each is unpacked as; one line naming what is missing."""
    by_name = {info.filename: info for info in archive.infolist() if not info.is_dir()}
    # At the top, or in the archive's one folder (a zipped directory).
    roots = {name[: -len(OPTIONS_NAME)] for name in by_name if os.path.basename(name) == OPTIONS_NAME}
    root = "" if "" in roots else (roots.pop() if len(roots) == 1 else "")
    weights = next((name for name in (ZIP_WEIGHTS_NAME, WEIGHTS_NAME) if root + name in by_name), None)
    missing = [name for name, present in ((OPTIONS_NAME, root + OPTIONS_NAME in by_name),
                                          (ZIP_WEIGHTS_NAME, weights is not None)) if not present]
    if missing:
        held = ", ".join(sorted(by_name)[:6]) + (", ..." if len(by_name) > 6 else "")
        hint = f"an NLPL ELMo ZIP holds {OPTIONS_NAME} and {ZIP_WEIGHTS_NAME}"
        if any(os.path.basename(name) == "char.dic" for name in by_name):
            hint = "an ELMoForManyLangs model's ZIP: unpack it and name its model directory"
        raise ConfigurationError(
            f"{path} is not an ELMo model ZIP: it has no {' and no '.join(missing)} (it holds "
            f"{held or 'nothing'}); {hint}"
        )
    return {name: by_name[root + name] for name in (OPTIONS_NAME, weights, *OPTIONAL_NAMES) if root + name in by_name}


def _content_key(members: Dict[str, zipfile.ZipInfo]) -> str:
    recorded: List[List[object]] = [[name, info.CRC, info.file_size] for name, info in sorted(members.items())]
    return hashlib.sha256(json.dumps(recorded).encode("utf-8")).hexdigest()[:32]


def _complete(folder: str) -> bool:
    return all(os.path.isfile(os.path.join(folder, name)) for name in (OPTIONS_NAME, weights_name_in(folder)))


def _unpack(path: str, archive: zipfile.ZipFile, members: Dict[str, zipfile.ZipInfo], folder: str) -> None:
    """Unpacks and checks ``members`` into ``folder`` (under the caller's lock)."""
    # What an interrupted unpacking of this ZIP left behind; nobody else holds the lock.
    for stale in glob.glob(glob.escape(folder) + ".*.tmp"):
        shutil.rmtree(stale, ignore_errors=True)
    if os.path.isdir(folder):
        shutil.rmtree(folder)  # incomplete: files were removed by hand
    logger.info("Unpacking %s into %s (once)", path, folder)
    # Made with the umask's permissions, as the cache's other entries, under this process's own name.
    temporary = f"{folder}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    os.mkdir(temporary)
    try:
        for name, info in members.items():
            # zipfile checks each member's CRC-32 as it reads to the end.
            with archive.open(info) as source, open(os.path.join(temporary, name), "wb") as target:
                shutil.copyfileobj(source, target, length=1 << 20)
        for name, kind in ((OPTIONS_NAME, "options"), (weights_name_in(temporary), "weights")):
            problem = file_problem(os.path.join(temporary, name), kind)
            if problem is not None:
                raise ConfigurationError(f"{path}: its {name} is not {KINDS[kind]}: {problem}")
        os.rename(temporary, folder)
    except BaseException:
        with contextlib.suppress(OSError):
            shutil.rmtree(temporary)
        raise

