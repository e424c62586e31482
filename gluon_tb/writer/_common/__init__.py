"""Argument checks and array conversions that every layer of the writer shares (imports nothing of gluon_tb)."""
