"""Load: memory stays bounded by the queue's byte limit, and everything is read back."""
import os

import numpy as np
import pytest
from tensorboard.backend.event_processing import event_file_loader

import readback
from gluon_tb import SummaryWriter


def _rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_soak_scalars_and_histograms_keep_memory_flat(tmp_path):
    n_scalars, n_hist = 1_000_000, 200
    limit = 16 << 20
    hist = np.random.RandomState(0).randn(1_000_000).astype(np.float32)  # 4 MB each
    w = SummaryWriter(tmp_path, max_queue_bytes=limit)
    for i in range(20_000):  # warm-up: caches, worker, first allocations
        w.add_scalar("s", float(i), i)
    w.flush()
    base = _rss_mb()
    peak = base
    for i in range(20_000, n_scalars):
        w.add_scalar("s", float(i), i)
        if i % 5000 == 0:
            peak = max(peak, _rss_mb())
            w.add_histogram("h", hist, i // 5000)
    for j in range(n_hist - (n_scalars - 20_000) // 5000):
        w.add_histogram("h", hist, 1000 + j)
        peak = max(peak, _rss_mb())
    w.close()
    # bounded by the queue (16 MiB) plus one batch in the worker's hands, not by what was logged
    # (1M scalars and 800 MB of histogram input)
    assert peak - base < 80, (base, peak)
    (path,) = readback.event_files(str(tmp_path))
    records = sum(1 for _ in event_file_loader.RawEventFileLoader(path).Load())
    assert records == 1 + n_scalars + n_hist
