"""Make mxboard 0.1.0 importable on protobuf >= 4 without touching site-packages.

mxboard 0.1.0 ships protoc-3.5-era ``*_pb2.py`` files. The C (upb) backend of protobuf >= 4
refuses them ("Descriptors cannot be created directly"), and on protobuf 7 the pure-Python
backend (PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python) fails too while loading them. So this
copies the mxboard package to ``<dest>/mxboard`` and rewrites each ``proto/*_pb2.py`` in the
modern generated form (serialized FileDescriptorProto + ``builder``), taking the descriptor
bytes from the old file. mxboard's own code is unchanged. Put ``<dest>`` first on PYTHONPATH.

    python regen_mxboard.py DEST
"""
import ast
import os
import re
import shutil
import sys

TEMPLATE = '''# Regenerated from mxboard 0.1.0's {name} (benchmarks/regen_mxboard.py).
from google.protobuf import descriptor_pool as _descriptor_pool
from google.protobuf.internal import builder as _builder
{imports}
DESCRIPTOR = _descriptor_pool.Default().AddSerializedFile({blob!r})
_globals = globals()
_builder.BuildMessageAndEnumDescriptors(DESCRIPTOR, _globals)
_builder.BuildTopDescriptorsAndMessages(DESCRIPTOR, 'mxboard.proto.{mod}', _globals)
'''


def regen(src_pkg: str, dest: str) -> str:
    out = os.path.join(dest, "mxboard")
    if os.path.isdir(out):
        shutil.rmtree(out)
    shutil.copytree(src_pkg, out, ignore=shutil.ignore_patterns("__pycache__"))
    proto = os.path.join(out, "proto")
    for name in sorted(os.listdir(proto)):
        if not name.endswith("_pb2.py"):
            continue
        path = os.path.join(proto, name)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        m = re.search(r"serialized_pb=_b\((.*?)\)\n", text, re.S)
        if m is None:
            raise SystemExit(f"no serialized descriptor in {path}")
        blob = ast.literal_eval(m.group(1)).encode("latin1")
        imports = "\n".join(re.findall(r"^from mxboard\.proto import \w+ as \w+$", text, re.M))
        with open(path, "w", encoding="utf-8") as f:
            f.write(TEMPLATE.format(name=name, imports=imports, blob=blob, mod=name[:-3]))
    return out


if __name__ == "__main__":
    import importlib.util

    spec = importlib.util.find_spec("mxboard")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("mxboard is not installed")
    print(regen(list(spec.submodule_search_locations)[0], sys.argv[1]))
