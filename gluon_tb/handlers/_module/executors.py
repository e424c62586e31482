"""What ``Module.fit``'s callbacks cannot be handed directly: the executors' gradients and weights.

A Module parameter is seen through :class:`_ParamView`, in the shape the options read a Gluon
``Parameter``, so gradient histograms and ``grad_health`` work the same on both adapters.
``grad_health`` at ``batch_end`` of a due batch reads each parameter's gradient in the module's
executors (summed over devices, unless the kvstore has already pulled the reduced gradient into
every device's buffer: ``update_on_kvstore=False``) and its weight. Module's callbacks run *after*
the optimizer's update, so ``weight_norm`` is the weight after the batch's update.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

from .._options.param_histograms import batch_gradient


class _ParamView:
    """A Module parameter in the shape ``HealthMonitor`` and ``batch_gradient`` read a Gluon one."""

    def __init__(self, grads: List[Any], weights: List[Any], lr_mult: float) -> None:
        self._g, self._w, self.lr_mult = grads, weights, lr_mult

    def list_grad(self) -> List[Any]:
        return self._g

    def list_data(self) -> List[Any]:
        return self._w


class _TrainerView:
    """What :meth:`~._health.HealthMonitor.finish` reads of a Gluon Trainer: the optimizer and its learning rate."""

    def __init__(self, optimizer: Any) -> None:
        self.optimizer = optimizer
        self.learning_rate = optimizer.learning_rate


def executor_module(module: Any) -> Any:
    """The ``Module`` whose executors train (a ``BucketingModule``'s current one), or None."""
    m = getattr(module, "_curr_module", None) or module
    return m if getattr(m, "_exec_group", None) is not None and hasattr(m, "_optimizer") else None


def module_gradients(module: Any, want: Callable[[str], bool]) -> Tuple[list, Dict[str, Any], Any]:
    """``(grads [(name, NDArray)], params {name: view}, trainer view)`` of the selected parameters
    from the module's executors, as they are after the batch's update."""
    g = module._exec_group  # Module has no public accessor for its gradients
    opt = module._optimizer
    reduced = module._kvstore is not None and not module._update_on_kvstore  # pulled sums in place
    mults = getattr(opt, "lr_mult", {}) or {}
    grads, params = [], {}
    for name, gs, ws in zip(g.param_names, g.grad_arrays, g.param_arrays):
        if not want(name) or not gs or any(x is None for x in gs):
            continue
        view = _ParamView(gs[:1] if reduced else gs, ws, float(mults.get(name, 1.0)))
        params[name] = view
        grads.append((name, batch_gradient(view)))
    return grads, params, _TrainerView(opt)
