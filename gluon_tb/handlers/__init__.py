"""Training-loop adapters: one line in ``fit`` logs the whole training to TensorBoard.

* :class:`TensorBoardHandler` for Gluon's ``Estimator.fit`` (an estimator event handler);
* :class:`TensorBoardCallback` for the legacy ``Module.fit`` callbacks.

Both write the Keras layout: runs ``<logdir>/train`` and ``<logdir>/validation`` with
``batch_*`` and ``epoch_*`` tags, so train and validation curves of one tag share a chart.
They only call :class:`gluon_tb.writer.SummaryWriter`.
"""
from ._estimator.handler import TensorBoardHandler
from ._options.grad_health import GradHealth
from ._module.callback import TensorBoardCallback
from ._options.embeddings import Embeddings
from ._options.word_vectors import WordVectors

__all__ = ["TensorBoardHandler", "TensorBoardCallback", "Embeddings", "GradHealth", "WordVectors"]
