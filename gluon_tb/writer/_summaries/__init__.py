"""One module per summary type: ``capture_<kind>`` on the caller's thread, ``build_<kind>`` on the worker.

Builds on ``_format``; never touches the queue or files.
"""
