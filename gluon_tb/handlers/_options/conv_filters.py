"""The ``conv_filters=`` option: a Conv2D's filters and feature maps, once per epoch.

Which layer: a Conv2D of the Gluon net named by ``conv_filters`` (its block name, with or
without the net's prefix), or the first one for ``conv_filters=True``; the Module callback
finds a 2-D ``Convolution`` of its symbol instead (:class:`ModuleFilters`). The first input of
the first training batch is kept (copied on MXNet's engine to the net's device) and used for
the feature maps of every epoch, so the maps of different epochs are comparable; a
:class:`~gluon_tb.handlers._mxnet.blocks.LayerProbe` reads the layer's output for it. The images
are built by :mod:`gluon_tb.handlers._options.conv_filter_images`; :func:`write_filters` hands them to the
writer, for both adapters.
"""
from __future__ import annotations

import logging
from typing import Any, Optional, Tuple, Union

from ...writer import SummaryWriter
from ...writer._common.checks import check_name
from .._common.run_writers import TRAIN, RunWriters
from .._mxnet.blocks import LayerProbe, context_of, find_block, first_of
from .._mxnet.symbols import SymbolProbe, conv_layer, layer_output
from .conv_filter_images import feature_map_images, filter_images
from .protocol import Batch, Epoch, Fit, Option, Part


def check_conv_filters(value: Any) -> Union[bool, str]:
    if isinstance(value, bool):
        return value
    return check_name(value, "conv_filters", "a bool or the name of a Conv2D layer")


def pick_conv(net: Any, layer: Optional[str] = None) -> Any:
    """The Conv2D of ``net`` named ``layer``, or its first Conv2D."""
    from mxnet.gluon import nn

    if layer is not None:
        conv = find_block(net, layer, "conv_filters")
        if not isinstance(conv, nn.Conv2D):
            raise ValueError(f"conv_filters={layer!r} must name a Conv2D, got a {type(conv).__name__}")
        return conv
    conv = first_of(net, nn.Conv2D)
    if conv is None:
        raise ValueError("conv_filters=True needs a Conv2D layer, and the network has none; pass "
                         "conv_filters=False (or the name of a Conv2D)")
    return conv


class ConvFilters(Part):
    """Logs ``conv_filters/<layer>`` and ``feature_maps/<layer>`` in run ``train`` at each epoch."""

    def __init__(self, value: Union[bool, str], out: RunWriters, max_filters: int = 64) -> None:
        self._layer: Optional[str] = value if isinstance(value, str) else None
        self._out, self._max = out, max_filters
        self._conv: Any = None
        self._net: Any = None
        self._probe: Optional[LayerProbe] = None
        self._sample: Any = None

    def begin(self, fit: Fit) -> None:
        net = fit.net
        if net is not self._net:
            self.close()
            self._net, self._conv = net, pick_conv(net, self._layer)  # ValueError names the layer

    def batch_end(self, batch: Batch) -> None:
        if batch.first_of_epoch:
            self._see_batch(batch.data)

    def _see_batch(self, batch: Any) -> None:
        """Keep the first input of the first ``[data, label]`` batch ever seen."""
        if self._sample is not None or not isinstance(batch, (list, tuple)) or not batch:
            return
        x = batch[0]
        if not hasattr(x, "shape") or len(x.shape) != 4:
            self._out.say_once("maps", f"gluon_tb: inputs of shape {getattr(x, 'shape', None)} are "
                               "not N×C×H×W; feature maps are not logged", logging.WARNING)
            self._sample = False
            return
        self._sample = x[:1].as_in_context(context_of(self._net)).copy()

    def epoch_end(self, epoch: Epoch) -> None:
        if self._conv is None:
            return
        self._out.call(TRAIN, self._log, epoch.epoch)

    def _log(self, w: SummaryWriter, epoch: int) -> None:
        maps = None
        if self._sample is not None and self._sample is not False:
            if self._probe is None:
                self._probe = LayerProbe(self._net, self._conv)
            maps, _ = self._probe(self._sample)
        write_filters(w, self._conv.name, self._conv.weight.data(), maps, epoch, self._max)

    def close(self) -> None:
        if self._probe is not None:
            self._probe.close()
            self._probe = None


def write_filters(w: SummaryWriter, name: str, weight: Any, maps: Any, step: int, max_filters: int = 64, *,
                  zoom: Optional[int] = None) -> None:
    """``conv_filters/<name>`` from a convolution's ``weight`` (O, I, kh, kw) and, unless ``maps``
    is None, ``feature_maps/<name>`` from one sample's maps (1, C, H, W); NDArray ops only.
    Shared by :class:`ConvFilters` and the Module callback's :class:`ModuleFilters`; ``zoom``:
    see :mod:`~gluon_tb.handlers._options.conv_filter_images` (``None``: 24-pixel tiles)."""
    imgs, fmt = filter_images(weight, max_filters=max_filters, zoom=zoom)
    if fmt == "CHW":
        w.add_image(f"conv_filters/{name}", imgs, step, dataformats="CHW")
    else:
        w.add_images(f"conv_filters/{name}", imgs, step, dataformats="NCHW")
    if maps is not None:
        w.add_images(f"feature_maps/{name}", feature_map_images(maps, max_maps=max_filters, zoom=zoom), step,
                     dataformats="NCHW")


def _cpu_copy(x: Any, n: Optional[int] = None) -> Any:
    import mxnet as mx

    return (x if n is None else x[:n]).copyto(mx.cpu())  # a new array, copied on the engine


def _batch(data_batch: Any) -> Any:
    return data_batch[0] if isinstance(data_batch, (list, tuple)) and data_batch else data_batch


class ModuleFilters(Part):
    """``conv_filters`` for Module: ``conv_filters/<layer>`` and ``feature_maps/<layer>`` in run
    ``train`` at each epoch end.

    The weight of a 2-D ``Convolution`` of the symbol (from ``arg_params`` at epoch end) is the
    filter grid; its ``<name>_output`` for the first input of the first batch (kept as a host
    copy) gives the feature maps, computed by a :class:`SymbolProbe` on the module's parameters
    at epoch end, not on the training path.
    """

    def __init__(self, value: Union[bool, str], out: RunWriters, max_filters: int = 64) -> None:
        self._layer = value if isinstance(value, str) else None
        self._out, self._max = out, max_filters
        self._symbol: Any = None
        self._conv: Optional[Tuple[str, str]] = None
        self._probe: Optional[SymbolProbe] = None
        self._sample: Any = None  # {data name: 1-sample host copy}, or False: not images

    def batch_end(self, batch: Batch) -> None:
        """Find the layer (ValueError naming it) and keep the first input of the first batch."""
        module, data_batch = batch.module, batch.data
        if module.symbol is not self._symbol:
            self._symbol = module.symbol
            self._conv = conv_layer(self._symbol, self._layer)
            self._probe = SymbolProbe([layer_output(self._symbol, self._conv[0])])
        b = _batch(data_batch)
        if self._sample is not None or b is None or not getattr(b, "data", None):
            return
        if len(b.data[0].shape) != 4:
            self._out.say_once("maps", f"gluon_tb: inputs of shape {tuple(b.data[0].shape)} are not "
                               "N×C×H×W; feature maps are not logged", logging.WARNING)
            self._sample = False
            return
        self._sample = {n: _cpu_copy(x, 1) for n, x in zip(module.data_names, b.data)}

    def epoch_end(self, epoch: Epoch) -> None:
        if self._conv is not None and epoch.arg_params:
            self._out.call(TRAIN, self._log, self._conv, epoch.epoch, epoch.arg_params, epoch.aux_params)

    def _log(self, w: SummaryWriter, conv: Tuple[str, str], epoch: int, arg_params: Any,
             aux_params: Any) -> None:
        name, weight = conv
        maps = None
        probe = self._probe  # made with the layer, before any sample is kept
        if self._sample and probe is not None:
            maps = probe(self._sample, arg_params, aux_params)[0]
        write_filters(w, name, arg_params[weight], maps, epoch, self._max)


OPTION = Option("conv_filters", check_conv_filters, ConvFilters, ModuleFilters)
