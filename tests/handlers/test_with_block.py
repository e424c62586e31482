"""``with TensorBoardHandler(...)`` / ``with TensorBoardCallback(...)``: leaving the block closes the writers.
An error on its way out (the writer's own with ``on_error="raise"``, a full disk, or the script's) is not
replaced by the same error met again while closing: that one is logged and the first goes on."""
import errno
import logging

import pytest

from gluon_tb import TensorBoardCallback, TensorBoardHandler


def _failing_close():
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("cls", [TensorBoardHandler, TensorBoardCallback])
def test_an_error_leaving_the_block_is_not_masked_by_a_close_that_fails(tmp_path, cls, caplog, monkeypatch):
    with caplog.at_level(logging.WARNING, logger="gluon_tb.handlers"):
        with pytest.raises(ValueError, match="the script's own") as exc:
            with cls(str(tmp_path / "run")) as h:
                monkeypatch.setattr(h._out, "close", _failing_close)
                raise ValueError("the script's own")
    assert exc.value.__context__ is None  # no "During handling of the above exception" chain
    said = [r.getMessage() for r in caplog.records if "also failed" in r.getMessage()]
    assert len(said) == 1 and "after ValueError" in said[0] and "No space left" in said[0], said


@pytest.mark.parametrize("cls", [TensorBoardHandler, TensorBoardCallback])
def test_a_block_that_ends_normally_raises_what_closing_met(tmp_path, cls, monkeypatch):
    with pytest.raises(OSError, match="No space left"):
        with cls(str(tmp_path / "run")) as h:
            monkeypatch.setattr(h._out, "close", _failing_close)
