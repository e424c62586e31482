"""Keyword arguments the handlers do not take get an error that names what to pass instead.

Users coming from Keras's ``TensorBoard`` callback (or torch's and tensorboardX's writers) type
their names: ``log_dir=``, ``histogram_freq=``, ``update_freq=``... Python's own message is only
"unexpected keyword argument". :func:`known_names` wraps a constructor so that a name it does not
take raises a ``TypeError`` that says which argument of ours does that job, or the closest one
(the writer's ``known_keywords``, with these names).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, TypeVar

from ...writer._common.keywords import known_keywords

F = TypeVar("F", bound=Callable[..., Any])

#: other tools' names -> what to pass here instead
OTHER_NAMES: Dict[str, str] = {
    "log_dir": "logdir (the log directory, the first argument)",
    "logdir_path": "logdir (the log directory, the first argument)",
    "histogram_freq": "histogram_period (\"epoch\": every epoch, as histogram_freq=1; an int k: every k batches; "
                      "None: never)",
    "update_freq": "batch_period (an int k: batch points every k batches, as update_freq=k; None: none, as "
                   "update_freq=\"epoch\")",
    "write_graph": "graph (True or False)",
    "write_images": "conv_filters=True (the first Conv2D's filters as images); images= logs the input batch",
    "embeddings_freq": "embeddings= or word_vectors= (logged at the end of fit; Embeddings(every=k) or "
                       "WordVectors(every=k): also every k epochs, as embeddings_freq=k)",
    "write_steps_per_second": "nothing: epoch_samples_per_second is always logged",
    "flush_millis": "flush_secs (seconds)",
    "max_queue": "nothing: the queue is bounded by memory, not by a count",
}


#: the same for ``TensorBoardCallback`` (Module.fit): its layers are Convolution symbols, and the
#: Estimator handler's own arguments (not a typo of one of its: difflib would say ``params`` for ``hparams``)
MODULE_OTHER_NAMES: Dict[str, str] = dict(
    OTHER_NAMES,
    write_images="conv_filters=True (the first Convolution's filters and feature maps as images); the Module "
                 "callback logs no input images",
    hparams="nothing here: hparams= is TensorBoardHandler's (the Estimator); with Module.fit, log them with "
            "gluon_tb.SummaryWriter(logdir).add_hparams(hparams, metrics)",
    images="nothing here: images= is TensorBoardHandler's (the Estimator); with Module.fit, log a batch with "
           "gluon_tb.SummaryWriter(logdir).add_images(tag, batch)",
    max_images="nothing here: max_images= is TensorBoardHandler's (the Estimator), with its images=",
)


def known_names(init: F) -> F:
    """Wrap ``__init__`` so that an unknown keyword argument's ``TypeError`` says what to pass."""
    return known_keywords(OTHER_NAMES)(init)


def module_known_names(init: F) -> F:
    """:func:`known_names` for ``TensorBoardCallback``."""
    return known_keywords(MODULE_OTHER_NAMES)(init)
