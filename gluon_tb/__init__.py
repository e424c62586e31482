"""gluon_tb: TensorBoard for Apache MXNet Gluon.

One line in ``Estimator.fit`` logs the whole training::

    from gluon_tb import TensorBoardHandler
    est.fit(train_data, val_data, epochs=5, event_handlers=[TensorBoardHandler("logs")])

``autolog("logs")`` does it for every ``Estimator.fit`` and ``Module.fit`` of a script you do
not edit further, and :class:`SummaryWriter` is a drop-in for mxboard's, usable with numpy alone.
For code that imports mxboard itself and is not yours to edit, :func:`install_as_mxboard` (or
``python -m gluon_tb.as_mxboard script.py``) serves ``import mxboard`` from gluon_tb.
The handlers need MXNet and are imported on first use, so ``import gluon_tb``
works without it.
"""
from typing import Any

from ._autolog import autolog
from ._mxboard_alias import install_as_mxboard
from .writer import RemoteOptions, RemoteWriteError, SummaryWriter, WriterClosedError, make_image_grid

__version__ = "0.1.0"

_HANDLERS = ("TensorBoardHandler", "TensorBoardCallback", "WordVectors", "Embeddings", "GradHealth")

__all__ = [
    "SummaryWriter",
    "WriterClosedError",
    "make_image_grid",
    "install_as_mxboard",
    "TensorBoardHandler",
    "TensorBoardCallback",
    "WordVectors",
    "Embeddings",
    "GradHealth",
    "autolog",
    "RemoteOptions",
    "RemoteWriteError",
    "__version__",
]


def __getattr__(name: str) -> Any:
    if name in _HANDLERS:
        from . import handlers

        return getattr(handlers, name)
    raise AttributeError(f"module 'gluon_tb' has no attribute {name!r}")


def __dir__() -> list:
    return sorted(set(globals()) | set(__all__))
