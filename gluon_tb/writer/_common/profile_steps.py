"""The names by which ``profile_batch`` marks its steps in MXNet's profiler trace, shared by the
handlers, which make the marks, and the XSpace builder (``_summaries/profile.py``), which reads them.

Each profiled global batch ``k`` is an ``mx.profiler.Task`` named ``train <k>`` (:data:`STEP_EVENT`)
in the profiler domain :data:`STEP_DOMAIN` (the trace's ``cat``), and its wait for the batch, where
the loop shows it, a task ``input <k>`` (:data:`WAIT_EVENT`) that starts with it.
"""

__all__ = ["STEP_DOMAIN", "STEP_EVENT", "WAIT_EVENT"]

STEP_DOMAIN = "gluon_tb.step"
STEP_EVENT = "train"
WAIT_EVENT = "input"
