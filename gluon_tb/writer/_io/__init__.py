"""Getting records to storage: the queue and its worker thread, event files, remote stores, process lifecycle.

Knows nothing of summary types: it runs the builders and actions that its items carry.
"""
