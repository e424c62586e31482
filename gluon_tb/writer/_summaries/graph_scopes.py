"""Name scopes for the graph: MXNet's flat node names turned into TensorBoard paths.

TensorBoard draws a node named ``a/b/c`` inside the group ``a/b`` inside ``a``; the
groups are all the structure a reader sees, so they should be the model's parts and
layers, never a merge of unrelated layers.

**A Gluon block** carries its structure: a node belongs to the deepest block whose
``prefix`` starts its name, so ``hybridsequential0_dense0_fwd`` becomes
``hybridsequential0/dense0/fwd``.

**A bare Symbol** carries only names, so the scopes are read from the structure of the
names present in the graph, in two steps:

1. *Layers.* Every operator is a layer, named as the operator, less a trailing ``_fwd``
   (Gluon names a block's output ``<prefix>fwd``). A variable that feeds an operator and
   whose name is that layer's name, ``_`` and more joins the layer: ``conv_1_weight``
   and ``conv_1_bias`` feeding ``conv_1``, ``bn_1_gamma`` .. ``bn_1_moving_var`` feeding
   ``bn_1``, ``softmax_label`` feeding ``softmax``, ``dense0_weight`` feeding
   ``dense0_fwd``. Any other variable (``data``) is a layer of its own. A layer with
   such a rest in it is a group: ``conv_1/weight``, ``conv_1/bias``, ``conv_1/conv_1``;
   ``dense0/weight``, ``dense0/fwd``. The rest is never cut again (``moving_mean``).
2. *Parts.* A prefix of layer names that ends before an ``_`` (the first of a doubled
   ``_``: ``stage1__plus0`` -> ``stage1/_plus0``) becomes a scope when at least two
   distinct layers are under it (the layers named ``<prefix>_...``, and the layer
   named ``<prefix>`` if there is one) and

   a. those layers hold at least two kinds of operator (a lone variable counts as
      one kind): a part of a model mixes operators (``stage1_unit1_`` holds
      BatchNorm, Activation, Convolution; ``block1_`` a conv, a relu and a pool),
      while a prefix over one kind only names that kind (Inception-BN's ``conv_``,
      ``bn_``, ``relu_``, ``ch_concat_``; VGG's ``conv1_`` of ``conv1_1``, ``conv1_2``), or
   b. at least two distinct words right after it, each starting with a letter, are
      groups or scopes themselves: Gluon's ``<prefix><block><index>_`` pattern, as in
      a stack of one kind ``mlp0_dense0_{fwd,weight}``, ``mlp0_dense1_{fwd,weight}``.
      A word that starts with a digit is an index (VGG's ``1`` in ``conv1_1``,
      Inception-BN's ``3a``) and does not count here.

   Scopes nest: ``stage1_unit1_conv1_weight`` becomes ``stage1/unit1/conv1/weight``.

So Inception-BN shows one top-level entry per layer (``conv_3a_1x1/{weight,bias,..}``,
``bn_3a_1x1/{gamma,..}``, ``relu_3a_1x1``, ``ch_concat_3a_chconcat``), VGG16 too
(``conv1_1``, ``conv1_2``), ResNet nests ``stage<i>/unit<j>/<layer>``, and a Symbol
exported from a Gluon block gets the names the block itself gets.

For both: a node whose name is also the scope of other nodes moves inside that scope
(``fc1`` -> ``fc1/fc1``), since TensorBoard cannot draw a node and a group under one
name, and a name that still occurs twice gets ``_1``, ``_2``.. appended.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Set, Tuple, cast

__all__ = ["scoped_names"]

_GLUON_OUTPUT = "_fwd"
_WORD = re.compile(r"[A-Za-z]")


def scoped_names(names: Sequence[str], ops: Sequence[str], inputs: Sequence[Sequence[int]],
                 blocks: Optional[Sequence[Tuple[str, str]]] = None) -> List[str]:
    """One unique TensorBoard node name per node.

    ``ops[j]`` is node ``j``'s operator (``"null"`` for a variable), ``inputs[j]`` the
    indices of the nodes it reads; ``blocks`` the ``(prefix, scope path)`` of a Gluon
    block tree, longest prefix first, or ``None`` for a bare Symbol.
    """
    if blocks is not None:
        scoped = [_by_block(n, blocks) for n in names]
    else:
        scoped = _by_structure(names, ops, inputs)
    return _unique(_out_of_scopes(scoped))


def _by_block(name: str, blocks: Sequence[Tuple[str, str]]) -> str:
    for prefix, path in blocks:  # longest prefix first
        if name.startswith(prefix) and len(name) > len(prefix):
            return f"{path}/{name[len(prefix):]}" if path else name[len(prefix):]
    return name


def _cuts(name: str) -> List[int]:
    """Positions of the ``_`` that may end a scope: not leading or trailing, and not the
    second of a doubled ``_`` (``unit1__plus0`` may cut before ``_plus0``)."""
    return [i for i in range(1, len(name) - 1) if name[i] == "_" and name[i - 1] != "_"]


def _layers(names: Sequence[str], ops: Sequence[str],
            inputs: Sequence[Sequence[int]]) -> Tuple[List[str], List[str]]:
    """Step 1: each node's layer and its rest inside the layer (``""`` for none)."""
    layer: List[Optional[str]] = [None] * len(names)
    rest = [""] * len(names)
    for j, name in enumerate(names):
        if ops[j] != "null":
            base = name[:-len(_GLUON_OUTPUT)] if name.endswith(_GLUON_OUTPUT) else name
            own = base if base and not base.endswith("_") else name
            layer[j] = own
            rest[j] = name[len(own) + 1:]
    for j, name in enumerate(names):
        if ops[j] == "null":
            continue
        own = cast(str, layer[j])  # set above for every node that is not "null"
        for i in inputs[j]:
            if ops[i] == "null" and layer[i] is None and names[i].startswith(own + "_"):
                layer[i] = own
                rest[i] = names[i][len(own) + 1:]
    return [n if lay is None else lay for n, lay in zip(names, layer)], rest


def _by_structure(names: Sequence[str], ops: Sequence[str],
                  inputs: Sequence[Sequence[int]]) -> List[str]:
    layer, rest = _layers(names, ops, inputs)
    kinds: Dict[str, Set[str]] = {}  # layer -> its operators ("null" for a lone variable)
    for j, lay in enumerate(layer):
        kinds.setdefault(lay, set())
        if ops[j] != "null" or lay == names[j]:
            kinds[lay].add(ops[j])
    # the layers drawn as a group: those with a node named by a rest inside the layer
    groups = {lay for lay, r in zip(layer, rest) if r}

    under: Dict[str, Set[str]] = {}  # candidate prefix -> the distinct layers that share it
    for lay in kinds:
        for i in _cuts(lay):
            under.setdefault(lay[:i], set()).add(lay)
    for prefix, lays in under.items():
        if prefix in kinds:
            lays.add(prefix)
    scopes: Set[str] = set()
    for prefix in sorted(under, key=len, reverse=True):  # a part's children are decided first
        lays = under[prefix]
        if len(lays) < 2:
            continue
        mixed = len(set().union(*(kinds[lay] for lay in lays))) >= 2
        words = {lay[len(prefix) + 1:].split("_", 1)[0] for lay in lays if lay != prefix}
        named = [w for w in words if _WORD.match(w)
                 and (f"{prefix}_{w}" in scopes or f"{prefix}_{w}" in groups)]
        if mixed or len(named) >= 2:
            scopes.add(prefix)

    out = []
    for lay, r in zip(layer, rest):
        parts, start = [], 0
        for i in _cuts(lay):
            if lay[:i] in scopes:
                parts.append(lay[start:i])
                start = i + 1
        parts.append(lay[start:])
        out.append("/".join(parts + ([r] if r else [])))
    return out


def _out_of_scopes(names: List[str]) -> List[str]:
    """Move a node named like a scope of other nodes into it: ``fc1`` -> ``fc1/fc1``."""
    scopes = {n[:i] for n in names for i in range(len(n)) if n[i] == "/"}
    return [f"{n}/{n.rsplit('/', 1)[-1]}" if n in scopes else n for n in names]


def _unique(names: List[str]) -> List[str]:
    seen: Dict[str, int] = {}
    out = []
    taken = set(names)
    for n in names:
        if n in seen:
            k = seen[n]
            while f"{n}_{k}" in taken:
                k += 1
            seen[n] = k + 1
            n = f"{n}_{k}"
            taken.add(n)
        else:
            seen[n] = 1
        out.append(n)
    return out
