"""The core event writer: record framing, event files, summaries, the pipeline.

Knows nothing about epochs or batches and imports mxnet only lazily. Its layers are
folders (``_common`` < ``_format`` < ``_io`` / ``_summaries`` < this package; see
``docs/design.md``); everything a user needs is exported here.

Example::

    from gluon_tb.writer import RemoteOptions, SummaryWriter
    with SummaryWriter("s3://bucket/run1", remote=RemoteOptions(part_secs=30)) as sw:
        sw.add_scalar("loss", 0.5, global_step=1)
"""
from ._format.crc32c import IMPLEMENTATION as CRC32C_IMPLEMENTATION
from ._io.pipeline import DEFAULT_MAX_QUEUE_BYTES, WriterClosedError
from ._io.remote import RemoteWriteError
from ._io.remote_options import RemoteOptions
from ._summaries.grid import make_image_grid
from ._summary_writer import SummaryWriter

__all__ = ["SummaryWriter", "WriterClosedError", "RemoteOptions", "RemoteWriteError", "make_image_grid",
           "DEFAULT_MAX_QUEUE_BYTES", "CRC32C_IMPLEMENTATION"]
