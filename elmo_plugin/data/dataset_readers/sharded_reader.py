"""`ShardedDatasetReader`: the base of the plugin's dataset readers, which shard their data themselves."""
from typing import Tuple

import torch.distributed as dist
from allennlp.common import util as common_util
from allennlp.data.dataset_readers.dataset_reader import DatasetReader, DistributedInfo


class ShardedDatasetReader(DatasetReader):
    """
    A `DatasetReader` with AllenNLP's manual sharding always on (not registered itself): a
    ``manual_*_sharding`` given in a config is dropped rather than passed twice.

    # Parameters

    **kwargs
        `DatasetReader`'s ``max_instances`` and ``serialization_dir``.
    """

    def __init__(self, **kwargs) -> None:
        kwargs.pop("manual_distributed_sharding", None)
        kwargs.pop("manual_multiprocess_sharding", None)
        super().__init__(manual_distributed_sharding=True, manual_multiprocess_sharding=True, **kwargs)

    def shard(self) -> Tuple[int, int]:
        """``(shard id, number of shards)`` of this process: the (distributed rank, data-loader
        worker) pairs, numbered ``rank * num_workers + worker``."""
        shard, num_shards = 0, 1
        info = self.get_distributed_info()
        if info is None and common_util.is_distributed():
            info = DistributedInfo(dist.get_world_size(), dist.get_rank())
        if info is not None:
            shard, num_shards = info.global_rank, info.world_size
        worker = self.get_worker_info()
        if worker is not None:
            shard = shard * worker.num_workers + worker.id
            num_shards *= worker.num_workers
        return shard, num_shards
