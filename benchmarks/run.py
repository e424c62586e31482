"""Run every benchmark in fresh processes, alternating writers; check outputs; print medians.

Run through ``benchmarks/run.sh`` (it builds the venv). Each (benchmark, writer, repetition)
is one new process (``_worker.py``); repetitions go round-robin over the writers, the
order rotating each round. After each process, its log directory is read back with
TensorBoard's own reader and checked against what the writer was given. The at-scale sections
(typical, alloptions, sweep, backtoback: :func:`scale_sections`) measure ``Estimator.fit`` in
paired rounds inside a process (``_fit.py``) and back-to-back histograms.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from typing import Callable, Dict, List

import _verify

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "out")
REGEN = os.path.join(HERE, ".venv", "mxboard-regen")
PEERS = ["tensorboardX", "torch", "mxboard"]
ALL = ["gluon_tb"] + PEERS


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


GLUON_TB_PATH = ""  # --gluon-tb-path: another checkout of gluon_tb, ahead of the installed one


def env_for(writer: str, mxboard_pb: str) -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = HERE if not GLUON_TB_PATH else GLUON_TB_PATH + os.pathsep + HERE
    if writer == "mxboard":
        env["PYTHONPATH"] = REGEN + os.pathsep + HERE
        if mxboard_pb == "python":
            env["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] = "python"
    return env


def run_one(bench: str, writer: str, logdir: str, args: List[str], mxboard_pb: str, timeout: int = 600) -> dict:
    shutil.rmtree(logdir, ignore_errors=True)
    cmd = [sys.executable, os.path.join(HERE, "_worker.py"), bench, writer, logdir] + args
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env_for(writer, mxboard_pb), capture_output=True, text=True, timeout=timeout)
    lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        raise RuntimeError(f"{bench}/{writer} failed (rc {p.returncode}):\n{p.stderr[-3000:]}")
    res = json.loads(lines[-1][7:])
    res["proc_s"] = time.perf_counter() - t
    return res


def rounds(bench: str, writers: List[str], reps: Dict[str, int], args: Dict[str, List[str]],
           check: Callable[[str, str, dict], dict], mxboard_pb: str, label: str = "") -> Dict[str, List[dict]]:
    """Round-robin over writers (order rotated each round), fresh process each; check each output."""
    results: Dict[str, List[dict]] = {w: [] for w in writers}
    n_rounds = max(reps[w] for w in writers)
    for r in range(n_rounds):
        order = writers[r % len(writers):] + writers[:r % len(writers)]
        for w in order:
            if len(results[w]) >= reps[w]:
                continue
            logdir = os.path.join(OUT, label or bench, f"{w}-{r}")
            try:
                res = run_one(bench, w, logdir, args.get(w, []), mxboard_pb)
            except Exception as e:  # reported in the table, the other writers go on
                log(f"  {bench} {w} round {r}: {e}")
                results[w].append({"check": {"ok": False, "summary": f"FAIL process: {str(e)[:200]}"},
                                   "failed": True, "disk_bytes": 0, "proc_s": 0.0})
                continue
            res["check"] = check(w, logdir, res)
            res["disk_bytes"] = _verify.dir_bytes(logdir)
            results[w].append(res)
            log(f"  {bench:8s} {w:12s} round {r}: " + ", ".join(
                f"{k}={v:.4g}" for k, v in res.items() if isinstance(v, float) and k != "proc_s")
                + f"  [{res['check']['summary']}]  ({res['proc_s']:.1f}s)")
    return results


def med(results: List[dict], key: str) -> float:
    return statistics.median(r[key] for r in results)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="scalar,hist,hist_nd,images,mlp,memory,first_call,"
                                      "typical,alloptions,sweep,backtoback,gil")
    ap.add_argument("--quick", action="store_true", default=os.environ.get("QUICK", "") not in ("", "0"))
    ap.add_argument("--mxboard-protobuf", choices=["python", "upb"],
                    default=os.environ.get("MXBOARD_PROTOBUF", "python"))
    ap.add_argument("--json", default=os.path.join(OUT, "results.json"))
    ap.add_argument("--sweep-vocab", default=",".join(map(str, SWEEP_VOCAB)),
                    help="the sweep's embedding rows V (parameters: 128 V + 5130)")
    ap.add_argument("--gluon-tb-path", default="",
                    help="a directory holding another gluon_tb package, used instead of the installed one")
    a = ap.parse_args()
    global GLUON_TB_PATH
    GLUON_TB_PATH = os.path.abspath(a.gluon_tb_path) if a.gluon_tb_path else ""
    if GLUON_TB_PATH:
        log(f"gluon_tb from {GLUON_TB_PATH}")
    only = set(a.only.split(","))
    q = a.quick
    os.makedirs(OUT, exist_ok=True)
    # mxboard 0.1.0's generated protobuf code is regenerated into .venv/mxboard-regen (see regen_mxboard.py)
    subprocess.run([sys.executable, os.path.join(HERE, "regen_mxboard.py"), REGEN], check=True,
                   stdout=subprocess.DEVNULL)
    log("mxboard runs with regenerated protobuf code and "
        + ("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python" if a.mxboard_protobuf == "python"
           else "protobuf's default (upb) backend"))
    t_all = time.perf_counter()
    R: Dict[str, Dict[str, List[dict]]] = {}
    cfg: Dict[str, str] = {"mxboard_protobuf": a.mxboard_protobuf, "quick": str(q),
                           "load average at start (1/5/15 min)": "%.2f %.2f %.2f" % os.getloadavg()}

    n_sc = 20_000 if q else 200_000
    if "scalar" in only:
        reps = {"gluon_tb": 3 if q else 5, **{p: 1 if q else 3 for p in PEERS}}
        cfg["scalar"] = f"{n_sc} add_scalar calls per process; reps {reps}"
        log(f"== scalar: {cfg['scalar']}")
        R["scalar"] = rounds("scalar", ALL, reps, {w: [f"n={n_sc}", f"warm={n_sc // 20}"] for w in ALL},
                             lambda w, d, r: _verify.check_scalars(d, n_sc), a.mxboard_protobuf)
    n_h = 1_000_000 if q else 10_000_000
    k_h = 3
    if "hist" in only:
        reps = {w: 1 if q else 3 for w in ALL}
        cfg["hist"] = f"{n_h} float32 numpy, default bins, {k_h} calls per process; reps {reps}"
        log(f"== hist: {cfg['hist']}")
        R["hist"] = rounds("hist", ALL, reps, {w: [f"n={n_h}", f"k={k_h}"] for w in ALL},
                           lambda w, d, r: _verify.check_hist(d, n_h, k_h, exact=(w == "gluon_tb")),
                           a.mxboard_protobuf)
    if "hist_nd" in only:
        ws = ["gluon_tb", "tensorboardX", "mxboard"]
        reps = {w: 1 if q else 3 for w in ws}
        cfg["hist_nd"] = f"{n_h} float32 MXNet NDArray, bins=1000, {k_h} calls per process; reps {reps}"
        log(f"== hist_nd: {cfg['hist_nd']}")
        R["hist_nd"] = rounds("hist", ws, reps, {w: [f"n={n_h}", f"k={k_h}", "nd=1", "bins=1000"] for w in ws},
                              lambda w, d, r: _verify.check_hist(d, n_h, k_h, exact=(w == "gluon_tb"), nbins=1000),
                              a.mxboard_protobuf, label="hist_nd")
    if "images" in only:
        reps = {w: 1 if q else 3 for w in ALL}
        k_i = 10
        cfg["images"] = f"64x3x32x32 float32 grid, {k_i} calls per process; reps {reps}"
        log(f"== images: {cfg['images']}")
        R["images"] = rounds("images", ALL, reps, {w: [f"k={k_i}"] for w in ALL},
                             lambda w, d, r: _verify.check_images(d, k_i), a.mxboard_protobuf)
    if "mlp" in only:
        # blocks with and without logging alternated inside each process, compared round by
        # round: the +5% target is a smaller difference than the drift between fresh processes
        n_b, n_r, warm = (40, 2, 10) if q else (100, 8, 10)
        reps = {w: 1 if q else (5 if w == "gluon_tb" else 3) for w in ALL}
        cfg["mlp"] = (f"paired: {n_r} rounds per process of one block without and one with logging "
                      f"({n_b} timed batches after {warm} warm-up each, order alternating); reps {reps}")
        log(f"== mlp: {cfg['mlp']}")
        R["mlp"] = rounds("mlp", ALL, reps, {w: [f"batches={n_b}", f"rounds={n_r}", f"warm={warm}"] for w in ALL},
                          lambda w, d, r: _verify.check_mlp(d, w, n_b + warm, r), a.mxboard_protobuf)
    if "memory" in only:
        n_m = 1_000_000 if q else 5_000_000
        cfg["memory"] = f"gluon_tb: {n_m} scalars, RSS sampled every 250k after {n_m // 25} warm-up; 1 process"
        log(f"== memory: {cfg['memory']}")
        R["memory"] = rounds("memory", ["gluon_tb"], {"gluon_tb": 1},
                             {"gluon_tb": [f"n={n_m}", f"warm={n_m // 25}"]},
                             lambda w, d, r: _verify.check_scalars(d, n_m, values=False), a.mxboard_protobuf)
    if only & {"typical", "alloptions", "sweep", "backtoback"}:
        R.update(scale_sections(only, q, [int(v) for v in a.sweep_vocab.split(",") if v], cfg, a.mxboard_protobuf))
    fc_md = ""
    if "first_call" in only:  # its own table (bench_first_call.py): first add_* of each kind
        import bench_first_call as fc

        reps = 2 if q else 5
        cfg["first_call"] = (f"the first add_* of each kind with numpy input in a fresh process, caller time; "
                             f"{reps} processes per writer and kind")
        log(f"== first_call: {cfg['first_call']}")
        fc_writers = [w for w in ALL if fc.available(w)]
        R_fc = fc.run_all(fc_writers, fc.KINDS, reps, mxboard_pb=a.mxboard_protobuf, progress=log)
        fc_md = "## First calls (fresh process, numpy input, caller time)\n\n" + fc.table(R_fc)
    gil_md = ""
    if "gil" in only:  # its own table (bench_gil.py): what each payload costs the training thread
        import bench_gil

        # 15: a round's off-CPU difference spreads over several ms on this VM; with 7 a row's median
        # moved by more than the targets' 0.3-0.5 ms between runs of the same code (session 16)
        gil_rounds = 3 if q else 15
        cfg["gil"] = (f"one fresh process per payload kind; {gil_rounds} alternating rounds of a pure-Python loop "
                      "with and without the payload queued (quiet, then with a spinning process per core for the "
                      "stalls); tensorboardX's caller time beside")
        log(f"== gil: {cfg['gil']}")
        R_gil = bench_gil.run_all(bench_gil.KINDS, gil_rounds, progress=log, gluon_tb_path=GLUON_TB_PATH)
        gil_md = "## GIL budget: what the writer's work costs the training thread\n\n" + bench_gil.table(R_gil)
    wall = time.perf_counter() - t_all
    cfg["load average at end (1/5/15 min)"] = "%.2f %.2f %.2f" % os.getloadavg()
    os.makedirs(os.path.dirname(a.json), exist_ok=True)
    with open(a.json, "w") as f:
        json.dump({"results": R, "config": cfg, "wall_s": wall, "machine": machine(),
                   **({"first_call": R_fc} if fc_md else {})}, f, indent=1)
    import _report

    print(_report.table(R, cfg, wall) if R else "")
    if fc_md:
        print("\n" + fc_md)
    if gil_md:
        print("\n" + gil_md)
    full = not q and a.only == ap.get_default("only")
    if R.get("sweep"):  # the plot: out/sweep.png, and benchmarks/sweep.png after a full run
        import _report_scale

        for png in [os.path.join(OUT, "sweep.png")] + ([os.path.join(HERE, "sweep.png")] if full else []):
            try:
                _report_scale.plot_sweep(R, png)
                log(f"wrote {png}")
            except ImportError as e:
                log(f"no plot ({e}): pip install matplotlib")
    if full:  # a full run: keep it as the latest results
        notes = os.path.join(HERE, "RESULTS-notes.md")
        with open(os.path.join(HERE, "RESULTS.md"), "w") as f:
            f.write(_report.results_md({"results": R, "config": cfg, "wall_s": wall, "machine": machine()},
                                       fc_md + "\n\n" + gil_md + "\n\n" +
                                       (open(notes).read() if os.path.exists(notes) else "")))
        log(f"wrote {os.path.join(HERE, 'RESULTS.md')}")


SWEEP_VOCAB = [7_800, 78_000, 200_000, 390_000]  # 1.0M, 10.0M, 25.6M, 49.9M parameters
FIT_WRITERS = ["gluon_tb", "tensorboardX"]


def scale_sections(only: set, q: bool, vocab: List[int], cfg: Dict[str, str], pb: str) -> Dict[str, dict]:
    """typical, alloptions, sweep, backtoback (issue 15): Estimator configurations users run,
    a model-size sweep and back-to-back histograms; each output read back (``_verify``)."""
    from _fit import sweep_params

    R: Dict[str, dict] = {}
    for config, (n_r, n_e, reps_g, r_peer) in (("typical", (4, 3, 1, 2) if q else (10, 5, 3, 6)),
                                              ("alloptions", (2, 2, 1, 1) if q else (6, 3, 5, 3))):
        if config not in only:
            continue
        reps = {"gluon_tb": reps_g, "tensorboardX": 1}
        args = {w: [f"config={config}", f"epochs={n_e}", f"rounds={n_r if w == 'gluon_tb' else r_peer}"]
                for w in FIT_WRITERS}
        cfg[config] = (f"paired: per process a warm-up pair (1 epoch each), then rounds of one fit without and "
                       f"one with logging ({n_e} epochs of 10 batches + 2 validation batches each, order "
                       f"alternating); rounds {n_r} (tensorboardX {r_peer}); processes {reps}")
        log(f"== {config}: {cfg[config]}")
        R[config] = rounds("fit", FIT_WRITERS, reps, args,
                           lambda w, d, r, c=config: _verify.check_fit(d, w, c, r), pb, label=config)
    if "sweep" in only:
        n_r, r_peer, n_e = (2, 1, 2) if q else (6, 2, 2)
        cfg["sweep"] = (f"Embedding(V, 128) + Dense(10), V = {vocab} ({[sweep_params(v) for v in vocab]} "
                        f"parameters); paired: {n_r} rounds (30 below 5M parameters; tensorboardX {r_peer}) of "
                        f"{n_e} epochs a block; gluon_tb 3 processes at 1.0M and 25.6M; "
                        f"peak RSS: one fit of {n_e + 1} epochs in fresh processes, with and without logging")
        log(f"== sweep: {cfg['sweep']}")
        R["sweep"] = {w: [] for w in FIT_WRITERS}
        R["sweep_rss"] = {w: [] for w in FIT_WRITERS}
        for i, v in enumerate(vocab):
            log(f"-- sweep: V = {v}, {sweep_params(v):,} parameters")
            ws = FIT_WRITERS[i % 2:] + FIT_WRITERS[:i % 2]
            # a 1.0M fit takes 0.2 s: 30 rounds there (one process of 6 has read -5% to +21% on the same code)
            n_rv = n_r if q or sweep_params(v) > 5_000_000 else 30
            args = {w: ["config=sweep", f"vocab={v}", f"epochs={n_e}", f"rounds={n_rv if w == 'gluon_tb' else r_peer}"]
                    for w in ws}
            # gluon_tb: three processes at the sizes with targets (issue 24: one process has read
            # +3.7% to +16% at 1.0M on the same code)
            procs = {w: 3 if w == "gluon_tb" and not q and sweep_params(v) in (1_003_530, 25_605_130) else 1
                     for w in ws}
            got = rounds("fit", ws, procs, args,
                         lambda w, d, r: _verify.check_fit(d, w, "sweep", r), pb, label=f"sweep/{v}")
            for w in ws:
                R["sweep"][w] += got[w]
            for w in ws:
                for on in (0, 1):
                    got = rounds("fit_rss", [w], {w: 1}, {w: ["config=sweep", f"vocab={v}", f"epochs={n_e + 1}",
                                                              f"logging_on={on}"]},
                                 lambda w, d, r: _verify.check_fit(d, w, "sweep", r), pb,
                                 label=f"sweep_rss/{v}-{on}")
                    R["sweep_rss"][w] += got[w]
    if "backtoback" in only:
        n, k = (1_000_000 if q else 10_000_000), 5
        for key, ws, nd in (("b2b", ALL, 0), ("b2b_nd", ["gluon_tb", "tensorboardX", "mxboard"], 1)):
            reps = {w: 1 if q else 3 for w in ws}
            cfg[key] = (f"{k} add_histogram calls back to back of {n} float32 "
                        f"{'MXNet NDArray' if nd else 'numpy'}, default bins, in a fresh process (its first "
                        f"call included), then flush() and close(); reps {reps}")
            log(f"== {key}: {cfg[key]}")
            R[key] = rounds("b2b", ws, reps, {w: [f"n={n}", f"k={k}", f"nd={nd}"] for w in ws},
                            lambda w, d, r: _verify.check_hist(d, n, k, exact=(w == "gluon_tb")), pb, label=key)
    return R


def machine() -> Dict[str, str]:
    model = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    from importlib.metadata import version

    vers = {}
    for pkg in ["gluon-tb", "tensorboardX", "torch", "mxboard", "mxnet", "tensorboard", "protobuf", "numpy",
                "crc32c", "Pillow"]:
        try:
            vers[pkg] = version(pkg)
        except Exception:
            vers[pkg] = "-"
    try:
        from gluon_tb.writer._summaries import _fasthist  # noqa: F401

        vers["gluon_tb histogram kernel"] = "C (_fasthist)"
    except ImportError:
        vers["gluon_tb histogram kernel"] = "numpy (the C kernel is not built)"
    return {"nproc": str(os.cpu_count()), "cpu": model, "python": platform.python_version(),
            "platform": platform.platform(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            **vers}


if __name__ == "__main__":
    main()
