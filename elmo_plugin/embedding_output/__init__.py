"""
The embedding job (``allennlp elmo``, ``ElmoEmbedder.embed_file``), what it writes, and its
sharded, resumable runs under ``torchrun`` (docs/architecture.md lists the modules). This package
never imports `elmo_plugin.elmo_embedder`: the batch loop takes the embedder as a value.
"""
from elmo_plugin.embedding_output.parquet_reader import ParquetEmbeddings
from elmo_plugin.embedding_output.reader import EmbeddingsFile, MissingShardError, read_embeddings

__all__ = ["EmbeddingsFile", "MissingShardError", "ParquetEmbeddings", "read_embeddings"]
