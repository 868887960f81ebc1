"""
The embedding job (``allennlp elmo``, ``ElmoEmbedder.embed_file``), what it writes, and its
sharded, resumable runs under ``torchrun``:

- `job`: `EmbeddingJob`, the run's options spelled once, and its checks; `batching`: the batches
  (sorted by length within chunks); `batch_loop`: the one loop that embeds and writes, taking
  the embedder as a value (this package never imports `elmo_plugin.elmo_embedder`).
- `layout`: the per-sentence (AllenNLP 0.9) and flat layouts; `per_sentence_writer` and
  `flat_writer` write them; `reader` (`EmbeddingsFile`) reads either.
- `plan`: the input cut into pieces (whole batches of a single run) and the pieces
  shared among ranks; `shard_file`: one piece written as a shard file that only appears under
  its name when complete; `fingerprint`: what a shard's reuse is keyed by; `heartbeats`: how
  ranks notice that another one stopped; `assembly`: the output assembled from the shards with
  HDF5 virtual datasets; `sharded_run`: one rank's part of it all.
- `sentence_vectors`: one vector per sentence, the mean over its tokens.
- `ray_engine`: the job on a Ray cluster (Ray Data, `ElmoRayEmbedder`), writing Parquet, which
  `parquet_reader` (`ParquetEmbeddings`) reads; ray is imported only when a job runs there.
"""
from elmo_plugin.embedding_output.parquet_reader import ParquetEmbeddings
from elmo_plugin.embedding_output.reader import EmbeddingsFile, MissingShardError, read_embeddings

__all__ = ["EmbeddingsFile", "MissingShardError", "ParquetEmbeddings", "read_embeddings"]
