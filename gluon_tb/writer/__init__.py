"""The core event writer: record framing, event files, summaries, the pipeline.

Knows nothing about epochs or batches and imports mxnet only lazily.
"""
from ._format.crc32c import IMPLEMENTATION as CRC32C_IMPLEMENTATION
from ._io.pipeline import DEFAULT_MAX_QUEUE_BYTES, WriterClosedError
from ._summary_writer import SummaryWriter

__all__ = ["SummaryWriter", "WriterClosedError", "DEFAULT_MAX_QUEUE_BYTES", "CRC32C_IMPLEMENTATION"]
