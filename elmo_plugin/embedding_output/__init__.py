"""
The embedding job (``allennlp elmo``, ``ElmoEmbedder.embed_file``), what it writes, its sharded
runs and its readers (docs/architecture.md). It never imports `elmo_plugin.elmo_embedder`.
"""
from elmo_plugin.embedding_output.parquet_reader import ParquetEmbeddings
from elmo_plugin.embedding_output.reader import EmbeddingsFile, MissingShardError, read_embeddings

__all__ = ["EmbeddingsFile", "MissingShardError", "ParquetEmbeddings", "read_embeddings"]
