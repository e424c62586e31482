"""Training-loop adapters: one line in ``fit`` logs the whole training to TensorBoard.

* :class:`TensorBoardHandler` for Gluon's ``Estimator.fit`` (an estimator event handler);
* :class:`TensorBoardCallback` for the legacy ``Module.fit`` callbacks.

Both write the Keras layout: runs ``<logdir>/train`` and ``<logdir>/validation`` with
``batch_*`` and ``epoch_*`` tags, so train and validation curves of one tag share a chart.
They only call :class:`gluon_tb.writer.SummaryWriter`.
"""
from ._estimator import TensorBoardHandler
from ._health import GradHealth
from ._module import TensorBoardCallback
from ._projector import Embeddings
from ._word_vectors import WordVectors

__all__ = ["TensorBoardHandler", "TensorBoardCallback", "Embeddings", "GradHealth", "WordVectors"]
