"""``torch.sagemaker.distributed.checkpoint.filesystem``: DCP's file-system storage under SMP's names."""
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter

# SMP's writer/reader write each rank's shards to a shared file system, as DCP's do.
DistributedFileSystemWriter = FileSystemWriter
DistributedFileSystemReader = FileSystemReader

__all__ = ["DistributedFileSystemReader", "DistributedFileSystemWriter", "FileSystemReader", "FileSystemWriter"]
