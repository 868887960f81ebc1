from elmo_plugin.tasks.common.sharded_task_reader import ShardedTaskReader

__all__ = ["ShardedTaskReader"]
