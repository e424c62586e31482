"""What every example does with its log directory: a re-run replaces the previous run's logs (as
``scripts/demo.sh`` does), and the last lines say how to open them with a TensorBoard that exists."""
import os
import shutil
import sys

# the files a TensorBoard log directory of gluon_tb holds: event files, the projector's files,
# and MXNet's profile (an XSpace); anything else in a log directory is not ours to delete
LOG_FILES = ("projector_config.pbtxt", "tensors.bytes", "tensors.tsv", "metadata.tsv", "sprite.png")


def _is_log_file(name: str) -> bool:
    return name.startswith("events.out.tfevents.") or name.endswith(".xplane.pb") or name in LOG_FILES


def fresh_logdir(logdir: str) -> None:
    """Remove what a previous run wrote into ``logdir``, so that a re-run replaces its curves.

    Without this, a second run draws its curves over the first one's from step 0 (``epoch_loss`` at
    steps 0, 1, 0, 1). Only a directory that holds nothing but TensorBoard logs is removed; any other
    file stops the example with its name, so a mistyped ``--logdir`` never deletes your files.
    """
    files = [os.path.join(root, name) for root, _dirs, names in os.walk(logdir) for name in names]
    if not files:
        return  # nothing there yet (or an empty directory made for this run)
    for path in files:
        if not _is_log_file(os.path.basename(path)):
            sys.exit(f"{logdir} holds {path}, which is not a TensorBoard log file: not replacing it. "
                     f"Give another --logdir, or remove it yourself.")
    print(f"replacing the previous run's logs in {logdir}")
    shutil.rmtree(logdir)


def tensorboard_command() -> str:
    """The ``tensorboard`` installed beside this Python (a venv's ``bin``), relative to the working
    directory when it is below it: the venv is not on ``PATH`` after ``scripts/demo.sh``."""
    exe = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    if not os.path.exists(exe):
        return "tensorboard"  # not beside this Python: the one on PATH, if any
    rel = os.path.relpath(exe)
    return rel if not rel.startswith("..") else exe


def print_how_to_open(logdir: str, what: str = "", url: str = "http://localhost:6006") -> None:
    """The last lines of an example: where its logs are, the command that opens them, and the page."""
    print(f"TensorBoard logs written to {os.path.abspath(logdir)}{f' ({what})' if what else ''}")
    print(f"View them with:\n    {tensorboard_command()} --logdir {logdir}")
    print(f"and open {url} in a browser.")
