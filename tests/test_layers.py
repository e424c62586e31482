"""The package's layers, as docs/design.md draws them, hold in the imports.

Every ``import`` of every module (at the top or inside a function) is read with ``ast`` and
resolved; a module may import only from the layers below its own:

    gluon_tb.handlers (root: the public names)  ->  every handler folder below
    _estimator, _module (the two adapters, never each other)  ->  _options, _mxnet, _common
    _options (one file per option)  ->  _mxnet, _common
    _mxnet (what reads MXNet's objects)  ->  _common
    _common (checks, schedules, the run writers)  ->  gluon_tb.writer (its public names), gluon_tb.writer._common
    (every handler folder may also use the writer's public names and gluon_tb.writer._common)
    gluon_tb.writer (root: SummaryWriter)  ->  _summaries, _io, _format, _common
    _summaries, _io (side by side, never each other)  ->  _format, _common
    _format  ->  _common
    _common  ->  nothing of gluon_tb

and the writer imports MXNet only inside functions (``import gluon_tb.writer`` works with numpy alone).
"""
from __future__ import annotations

import ast
import pathlib
from typing import Iterator, List, Optional, Tuple

import pytest

import gluon_tb

PKG = pathlib.Path(gluon_tb.__file__).parent
W = "gluon_tb.writer"
H = "gluon_tb.handlers"

# layer of a module -> the prefixes of gluon_tb modules it may import
ALLOWED = {
    f"{W}._common": (f"{W}._common",),
    f"{W}._format": (f"{W}._format", f"{W}._common"),
    f"{W}._io": (f"{W}._io", f"{W}._format", f"{W}._common"),
    f"{W}._summaries": (f"{W}._summaries", f"{W}._format", f"{W}._common"),
    W: (W,),
    "gluon_tb.handlers": ("gluon_tb.handlers", f"{W}._common"),
    f"{H}._estimator": (f"{H}._estimator", f"{H}._options", f"{H}._mxnet", f"{H}._common", f"{W}._common"),
    f"{H}._module": (f"{H}._module", f"{H}._options", f"{H}._mxnet", f"{H}._common", f"{W}._common"),
    f"{H}._options": (f"{H}._options", f"{H}._mxnet", f"{H}._common", f"{W}._common"),
    f"{H}._mxnet": (f"{H}._mxnet", f"{H}._common", f"{W}._common"),
    f"{H}._common": (f"{H}._common", f"{W}._common"),
    "gluon_tb": ("gluon_tb",),
}
# what handlers may take from the writer package itself (its public names)
WRITER_PUBLIC = {W}
# the one crossing allowed, and why
EXCEPTIONS = {
    ("gluon_tb.handlers._common.checks", f"{W}._summaries.hparams"):
        "hparams= is checked with the writer's own check when the handler is made, not at the end of training",
}


def module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str:
    """The longest prefix of ALLOWED that ``module`` is in."""
    best = ""
    for layer in ALLOWED:
        if (module == layer or module.startswith(layer + ".")) and len(layer) > len(best):
            best = layer
    return best


def imports_of(path: pathlib.Path, source: Optional[str] = None,
               module: Optional[str] = None) -> Iterator[Tuple[int, str, bool]]:
    """(line, absolute module imported, at module level?) for every import in ``path``
    (or in ``source``, read as the module ``module``)."""
    module = module or module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text() if source is None else source, str(path))
    top = set(map(id, tree.body))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name, id(node) in top
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # ``from pkg import mod`` imports the submodule when there is one
            for a in node.names:
                sub = f"{target}.{a.name}"
                is_mod = (PKG.parent / (sub.replace(".", "/") + ".py")).exists() or \
                    (PKG.parent / sub.replace(".", "/") / "__init__.py").exists()
                yield node.lineno, sub if is_mod else target, id(node) in top


def all_modules() -> List[pathlib.Path]:
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_module_has_a_layer():
    assert all(layer_of(module_name(p)) for p in all_modules())
    # the folders the design names exist, each a package
    for sub in ("_common", "_format", "_io", "_summaries"):
        assert (PKG / "writer" / sub / "__init__.py").exists()
    for sub in ("_common", "_mxnet", "_options", "_estimator", "_module"):
        assert (PKG / "handlers" / sub / "__init__.py").exists()
    # nothing of the handlers' but the package's front sits at the top of handlers/
    assert sorted(p.name for p in (PKG / "handlers").glob("*.py")) == ["__init__.py"]


@pytest.mark.parametrize("path", all_modules(), ids=lambda p: str(p.relative_to(PKG.parent)))
def test_imports_go_down_the_layers(path):
    module = module_name(path)
    allowed = ALLOWED[layer_of(module)]
    wrong = []
    for line, target, _ in imports_of(path):
        if not target.startswith("gluon_tb"):
            continue
        if layer_of(module).startswith(H) and target in WRITER_PUBLIC:
            continue
        if (module, target) in EXCEPTIONS:
            continue
        if not any(target == a or target.startswith(a + ".") for a in allowed):
            wrong.append(f"line {line}: {target}")
    assert not wrong, f"{module} imports across its layer: {wrong}"


@pytest.mark.parametrize("path", [p for p in all_modules() if "writer" in p.parts],
                         ids=lambda p: str(p.relative_to(PKG.parent)))
def test_writer_imports_mxnet_only_inside_functions(path):
    top_level = [(line, t) for line, t, top in imports_of(path)
                 if top and (t == "mxnet" or t.startswith("mxnet."))]
    assert not top_level


def test_the_rule_catches_a_wrong_import():
    """The checker itself: an _io module importing a summary type and the writer is reported,
    a function-local ``import mxnet`` is seen as not at module level."""
    module = f"{W}._io.probe"
    source = ("import mxnet\nfrom .._summaries import histogram\nfrom .._summary_writer import SummaryWriter\n"
              "def f():\n    from mxnet import nd\n")
    found = list(imports_of(PKG / "writer" / "_io" / "probe.py", source, module))
    assert found == [(1, "mxnet", True), (2, f"{W}._summaries.histogram", True),
                     (3, f"{W}._summary_writer", True), (5, "mxnet", False)]
    allowed = ALLOWED[layer_of(module)]
    assert [t for _, t, _ in found[1:3] if not any(t.startswith(a + ".") for a in allowed)] == \
        [f"{W}._summaries.histogram", f"{W}._summary_writer"]


@pytest.mark.parametrize("name", ["gluon_tb", "gluon_tb.writer", "gluon_tb.handlers"])
def test_public_names_are_exported_and_documented(name):
    """``__all__`` is exactly the public names of each public package (httpx's rule), each one
    importable and documented; a user never needs a private module."""
    import importlib
    import types

    mod = importlib.import_module(name)
    public = sorted(n for n, v in vars(mod).items()
                    if not n.startswith("_") and not isinstance(v, types.ModuleType)
                    and str(getattr(v, "__module__", "gluon_tb")).startswith("gluon_tb"))
    lazy = [n for n in mod.__all__ if n not in vars(mod)]  # gluon_tb's handlers: imported on first use
    assert sorted(set(mod.__all__) - set(lazy) - {"__version__"}) == public
    for n in mod.__all__:
        obj = getattr(mod, n)
        if callable(obj):
            assert (obj.__doc__ or "").strip(), f"{name}.{n} has no docstring"


def test_remote_options_in_the_writer_signature_are_public():
    import inspect

    import gluon_tb
    from gluon_tb.writer import RemoteOptions, RemoteWriteError, SummaryWriter

    assert gluon_tb.RemoteOptions is RemoteOptions and gluon_tb.RemoteWriteError is RemoteWriteError
    assert issubclass(RemoteWriteError, OSError)
    assert "remote" in inspect.signature(SummaryWriter).parameters
    assert "gluon_tb.writer.RemoteOptions" in SummaryWriter.__doc__


def test_every_argument_of_the_writer_is_documented():
    """help(SummaryWriter) lists each constructor argument in its Args section."""
    import inspect
    import re

    from gluon_tb import SummaryWriter

    args = SummaryWriter.__doc__.split("Args:", 1)[1]
    params = list(inspect.signature(SummaryWriter).parameters)
    assert len(params) == 11
    assert [p for p in params if not re.search(rf"^\s+{p}: \S", args, re.M)] == []


@pytest.mark.parametrize("name", ["TensorBoardHandler", "TensorBoardCallback"])
def test_every_argument_of_both_adapters_is_documented(name):
    """help() of each adapter lists every constructor argument in its Args section."""
    import inspect
    import re

    import gluon_tb.handlers

    cls = getattr(gluon_tb.handlers, name)
    args = cls.__doc__.split("Args:", 1)[1]
    params = [p for p in inspect.signature(cls).parameters if p != "self"]
    assert len(params) >= 18
    assert [p for p in params if not re.search(rf"^\s+{p}: \S", args, re.M)] == []


def test_each_option_is_the_file_named_after_it():
    """A see-inside option is ``handlers/_options/<its argument name>.py``, which holds its check and
    both adapters' parts; the registry lists it, and both adapters take it as an argument."""
    import inspect

    from gluon_tb.handlers import TensorBoardCallback, TensorBoardHandler
    from gluon_tb.handlers._options.protocol import Part
    from gluon_tb.handlers._options.registry import OPTIONS

    assert [o.name for o in OPTIONS] == ["conv_filters", "embeddings", "grad_health", "word_vectors", "profile_batch"]
    for o in OPTIONS:
        assert (PKG / "handlers" / "_options" / f"{o.name}.py").exists(), o.name
        for part in (o.gluon, o.module):
            assert issubclass(part, Part) and part.__module__ == f"gluon_tb.handlers._options.{o.name}", part
        for adapter in (TensorBoardHandler, TensorBoardCallback):
            assert o.name in inspect.signature(adapter).parameters
