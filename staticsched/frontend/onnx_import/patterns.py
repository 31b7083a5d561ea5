"""Exporters' decompositions, recovered: LayerNorm, GELU (erf and tanh forms), attention.

``torch.onnx.export`` and friends write LayerNorm as ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/
Div/Mul/Add, GELU as Div/Erf/Add/Mul/Mul or its tanh polynomial, and multi-head attention as
MatMul -> Div|Mul -> [Add mask] -> Softmax -> MatMul through the heads' Reshape/Transpose.
:func:`recover` finds each and replaces its nodes with one node the translator maps onto a
task kind (``LayerNormalization``, ``Gelu``, and the importer's own ``Attention``) when every
value inside the match is used only inside it. The constants are checked, not assumed: a GELU
whose constant is not ``sqrt(2/pi)`` to float32 precision is left as it is (and imported node
by node).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import attrs
import numpy as np

from staticsched.frontend.onnx_import.load import Net, Node

#: the importer's fused attention node (no ONNX op of that name in the default domain)
ATTENTION = "staticsched.Attention"


@attrs.define
class _Graph:
    net: Net
    nodes: list[Node | None]
    producer: dict[str, int]
    consumers: dict[str, list[int]]
    outputs: set[str]

    @classmethod
    def of(cls, net: Net) -> _Graph:
        nodes: list[Node | None] = list(net.nodes)
        producer = {o: i for i, n in enumerate(net.nodes) for o in n.outputs if o}
        consumers: dict[str, list[int]] = {}
        for i, n in enumerate(net.nodes):
            for x in n.inputs:
                if x:
                    consumers.setdefault(x, []).append(i)
        return cls(net, nodes, producer, consumers, set(net.outputs))

    def node(self, i: int | None) -> Node | None:
        return None if i is None else self.nodes[i]

    def prod(self, name: str, op: str | tuple[str, ...]) -> tuple[int, Node] | None:
        """The live node of type ``op`` producing ``name``."""
        i = self.producer.get(name)
        n = self.node(i)
        ops = (op,) if isinstance(op, str) else op
        if n is None or n.op not in ops or i is None:
            return None
        return i, n

    def users(self, name: str) -> list[tuple[int, Node]]:
        return [(i, n) for i in self.consumers.get(name, []) if (n := self.nodes[i]) is not None]

    def only(self, name: str, op: str | tuple[str, ...]) -> tuple[int, Node] | None:
        """The single live consumer of ``name``, if it is of type ``op``."""
        us = self.users(name)
        ops = (op,) if isinstance(op, str) else op
        if len(us) != 1 or us[0][1].op not in ops:
            return None
        return us[0]

    def scalar(self, name: str) -> float | None:
        v = self.net.consts.get(name)
        if v is None or np.asarray(v).size != 1:
            return None
        return float(np.asarray(v).reshape(-1)[0])

    def other(self, node: Node, name: str) -> str:
        """The operand of binary ``node`` that is not ``name``."""
        a, b = node.inputs[:2]
        return b if a == name else a

    def internal_ok(self, matched: list[int], keep: set[str]) -> bool:
        """Every value the matched nodes produce, but ``keep``, is used only inside them."""
        inside = set(matched)
        for i in matched:
            n = self.nodes[i]
            assert n is not None
            for o in n.outputs:
                if not o or o in keep:
                    continue
                if o in self.outputs or any(j not in inside for j in self.consumers.get(o, [])):
                    return False
        return True

    def replace(self, matched: list[int], node: Node) -> None:
        last = max(matched)
        for i in matched:
            self.nodes[i] = None
        self.nodes[last] = node
        for o in node.outputs:
            self.producer[o] = last
        for x in node.inputs:
            if x:
                self.consumers.setdefault(x, []).append(last)


def _near(x: float | None, want: float, rel: float = 1e-5) -> bool:
    return x is not None and abs(x - want) <= rel * abs(want)


def _reduce_mean_last(g: _Graph, n: Node) -> bool:
    if n.op != "ReduceMean" or not n.attrs.get("keepdims", 1):
        return False
    axes = n.attrs.get("axes")
    ins = list(n.inputs)
    if axes is None and len(ins) > 1 and ins[1] in g.net.consts:
        axes = [int(a) for a in np.asarray(g.net.consts[ins[1]]).reshape(-1)]
    rank = len(g.net.shapes.get(ins[0], ()))
    return axes is not None and len(axes) == 1 and rank > 0 and int(axes[0]) % rank == rank - 1


def _layernorm(g: _Graph, i: int, n: Node) -> bool:
    """ReduceMean(x) -> Sub(x, mean) -> Pow(d, 2) -> ReduceMean -> Add eps -> Sqrt -> Div(d, s)
    [-> Mul gamma [-> Add beta]]."""
    if not _reduce_mean_last(g, n):
        return False
    x, mean = n.inputs[0], n.outputs[0]
    sub = g.only(mean, "Sub")
    if sub is None or sub[1].inputs[:2] != (x, mean):
        return False
    d = sub[1].outputs[0]
    users = g.users(d)
    pw = next(((j, u) for j, u in users if u.op == "Pow" and g.scalar(u.inputs[1]) == 2.0), None)
    pw = pw or next(((j, u) for j, u in users if u.op == "Mul" and u.inputs[:2] == (d, d)), None)
    div = next(((j, u) for j, u in users if u.op == "Div" and u.inputs[0] == d), None)
    if pw is None or div is None or len(users) != 2:
        return False
    rm2 = g.only(pw[1].outputs[0], "ReduceMean")
    if rm2 is None or not _reduce_mean_last(g, rm2[1]):
        return False
    add = g.only(rm2[1].outputs[0], "Add")
    eps = g.scalar(g.other(add[1], rm2[1].outputs[0])) if add else None
    if add is None or eps is None:
        return False
    sq = g.only(add[1].outputs[0], "Sqrt")
    if sq is None or div[1].inputs[1] != sq[1].outputs[0] or len(g.users(sq[1].outputs[0])) != 1:
        return False
    matched = [i, sub[0], pw[0], rm2[0], add[0], sq[0], div[0]]
    out = div[1].outputs[0]
    gamma = beta = ""
    n_cols = g.net.shapes[x][-1]
    mul = g.only(out, "Mul")
    if mul is not None and _is_col(g, g.other(mul[1], out), n_cols):
        gamma = g.other(mul[1], out)
        matched.append(mul[0])
        out = mul[1].outputs[0]
        add2 = g.only(out, "Add")
        if add2 is not None and _is_col(g, g.other(add2[1], out), n_cols):
            beta = g.other(add2[1], out)
            matched.append(add2[0])
            out = add2[1].outputs[0]
    if not g.internal_ok(matched, {out}):
        return False
    g.replace(matched, Node(f"{n.name.rsplit('/', 1)[0]}/LayerNormalization", "LayerNormalization",
                            [x, gamma, beta], [out], {"axis": -1, "epsilon": eps}))
    return True


def _is_col(g: _Graph, name: str, n: int) -> bool:
    """A constant of ``n`` values, one per column."""
    v = g.net.consts.get(name)
    return v is not None and np.asarray(v).size == n and np.asarray(v).shape[-1:] == (n,)


def _mul_by(g: _Graph, name: str, value: float) -> tuple[int, Node] | None:
    m = g.only(name, "Mul")
    if m is None or not _near(g.scalar(g.other(m[1], name)), value):
        return None
    return m


def _gelu_erf(g: _Graph, i: int, n: Node) -> bool:
    """Div(x, sqrt 2) | Mul(x, 1/sqrt 2) -> Erf -> Add 1 -> Mul x -> Mul 0.5 (any operand order)."""
    if n.op == "Div" and _near(g.scalar(n.inputs[1]), math.sqrt(2.0)):
        x = n.inputs[0]
    elif n.op == "Mul" and _near(g.scalar(g.other(n, n.inputs[0])), 1 / math.sqrt(2.0)):
        x = n.inputs[0] if g.scalar(n.inputs[0]) is None else n.inputs[1]
    else:
        return False
    erf = g.only(n.outputs[0], "Erf")
    add = g.only(erf[1].outputs[0], "Add") if erf else None
    if erf is None or add is None or not _near(g.scalar(g.other(add[1], erf[1].outputs[0])), 1.0):
        return False
    return _gelu_tail(g, n, x, add[1].outputs[0], [i, erf[0], add[0]], "none")


def _gelu_tail(g: _Graph, n: Node, x: str, one_plus: str, matched: list[int], approx: str) -> bool:
    """Both GELU forms end ``Mul x`` then ``Mul 0.5`` on ``one_plus`` (``1 + erf`` or
    ``1 + tanh``): match them and replace the whole of ``matched`` with one ``Gelu``."""
    mul = g.only(one_plus, "Mul")
    if mul is None or g.other(mul[1], one_plus) != x:
        return False
    half = _mul_by(g, mul[1].outputs[0], 0.5)
    if half is None:
        return False
    matched = [*matched, mul[0], half[0]]
    out = half[1].outputs[0]
    if not g.internal_ok(matched, {out}):
        return False
    g.replace(matched, Node(f"{n.name.rsplit('/', 1)[0]}/Gelu", "Gelu", [x], [out], {"approximate": approx}))
    return True


def _cube(g: _Graph, i: int, n: Node) -> tuple[str, str, list[int]] | None:
    """``x^3`` as Pow(x, 3) or Mul(x, Mul(x, x)): (x, result, nodes)."""
    if n.op == "Pow" and g.scalar(n.inputs[1]) == 3.0:
        return n.inputs[0], n.outputs[0], [i]
    if n.op == "Mul" and n.inputs[0] == n.inputs[1]:
        x = n.inputs[0]
        m2 = g.only(n.outputs[0], "Mul")
        if m2 is not None and g.other(m2[1], n.outputs[0]) == x:
            return x, m2[1].outputs[0], [i, m2[0]]
    return None


def _gelu_tanh(g: _Graph, i: int, n: Node) -> bool:
    """x^3 -> Mul 0.044715 -> Add x -> Mul sqrt(2/pi) -> Tanh -> Add 1 -> Mul x -> Mul 0.5."""
    cube = _cube(g, i, n)
    if cube is None:
        return False
    x, c3, matched = cube
    k = _mul_by(g, c3, 0.044715)
    add = g.only(k[1].outputs[0], "Add") if k else None
    if k is None or add is None or g.other(add[1], k[1].outputs[0]) != x:
        return False
    s = _mul_by(g, add[1].outputs[0], math.sqrt(2.0 / math.pi))
    th = g.only(s[1].outputs[0], "Tanh") if s else None
    one = g.only(th[1].outputs[0], "Add") if th else None
    if s is None or th is None or one is None or not _near(g.scalar(g.other(one[1], th[1].outputs[0])), 1.0):
        return False
    return _gelu_tail(g, n, x, one[1].outputs[0], [*matched, k[0], add[0], s[0], th[0], one[0]], "tanh")


def _heads(g: _Graph, name: str, key: bool) -> tuple[str, int, list[int]] | None:
    """The projection output ``[..., S, H*d]`` behind a head split ``name`` (``[..., H, S, d]``,
    or ``[..., H, d, S]`` for a key read transposed), as (source, H, nodes); H = 1 when
    ``name`` is the operand itself."""
    tp = g.prod(name, "Transpose")
    if tp is None:
        return (name, 1, []) if not key else None
    t_i, t = tp
    rs = g.prod(t.inputs[0], "Reshape")
    shape = g.net.shapes.get(t.inputs[0], ())
    rank = len(shape)
    perm = list(t.attrs.get("perm", []))
    if rs is not None and rank >= 3:
        lead = rank - 3
        want = [*range(lead), lead + 1, lead + 2, lead] if key else [*range(lead), lead + 1, lead, lead + 2]
        src = rs[1].inputs[0]
        src_shape = g.net.shapes.get(src, ())
        if perm == want and tuple(src_shape) == (*shape[:-2], shape[-2] * shape[-1]):
            return src, shape[-2], [t_i, rs[0]]
    if key and rank >= 2 and perm == [*range(rank - 2), rank - 1, rank - 2]:
        inner = _heads(g, t.inputs[0], False)
        if inner is not None:
            return inner[0], inner[1], [t_i, *inner[2]]
    return None


def _merge_heads(g: _Graph, name: str, heads: int) -> tuple[str, list[int]] | None:
    """The ``[..., S, H*dv]`` value the heads' output ``name`` (``[..., H, S, dv]``) is merged
    into by Transpose and Reshape, as (result, nodes)."""
    if heads == 1:
        return name, []
    tp = g.only(name, "Transpose")
    shape = g.net.shapes.get(name, ())
    if tp is None or len(shape) < 3:
        return None
    lead = len(shape) - 3
    if list(tp[1].attrs.get("perm", [])) != [*range(lead), lead + 1, lead, lead + 2]:
        return None
    rs = g.only(tp[1].outputs[0], "Reshape")
    merged = (*shape[:-3], shape[-2], heads * shape[-1])
    if rs is None or tuple(g.net.shapes.get(rs[1].outputs[0], ())) != merged:
        return None
    return rs[1].outputs[0], [tp[0], rs[0]]


def _mask_kind(g: _Graph, name: str, sq: int, sk: int) -> str:
    """``"causal"`` for a constant 0-below, very-negative-above mask, ``"keys"`` for one value
    per key (per batch element), ``""`` otherwise."""
    shape = g.net.shapes.get(name, ())
    v = g.net.consts.get(name)
    if v is not None and tuple(np.shape(v))[-2:] == (sq, sk) and all(d == 1 for d in np.shape(v)[:-2]):
        m = np.asarray(v, dtype=np.float64).reshape(sq, sk)
        above = np.triu(np.ones((sq, sk), dtype=bool), 1)
        if sq == sk and (m[~above] == 0).all() and (m[above] <= -1e4).all():
            return "causal"
        return ""
    # one row of keys per batch element, broadcast over the heads and the queries
    if len(shape) >= 2 and shape[-1] == sk and shape[-2] == 1 and (len(shape) < 3 or shape[-3] == 1):
        return "keys"
    return ""


def _attention(g: _Graph, i: int, n: Node) -> bool:
    """[heads split] MatMul(Q, Kᵀ) -> Div|Mul scale -> [Add mask] -> Softmax -> MatMul(P, V)
    [heads merged]."""
    if n.op != "Softmax":
        return False
    rank = len(g.net.shapes.get(n.inputs[0], ()))
    if rank < 2 or int(n.attrs.get("axis", -1)) % rank != rank - 1:
        return False
    matched = [i]
    scores = n.inputs[0]
    mask, causal = "", False
    add = g.prod(scores, "Add")
    if add is not None:
        a, b = add[1].inputs[:2]
        scaled, m = (a, b) if g.prod(a, ("Div", "Mul", "MatMul")) else (b, a)
        sq, sk = g.net.shapes[scores][-2:]
        kind = _mask_kind(g, m, sq, sk)
        if not kind:
            return False
        causal, mask = kind == "causal", ("" if kind == "causal" else m)
        matched.append(add[0])
        scores = scaled
    scale: float | None = None
    sc = g.prod(scores, ("Div", "Mul"))
    if sc is not None:
        c_name = sc[1].inputs[1] if g.scalar(sc[1].inputs[1]) is not None else sc[1].inputs[0]
        c = g.scalar(c_name)
        if c is None or c == 0:
            return False
        scale = 1.0 / c if sc[1].op == "Div" else c
        matched.append(sc[0])
        scores = g.other(sc[1], c_name)
    mm1 = g.prod(scores, "MatMul")
    if mm1 is None:
        return False
    matched.append(mm1[0])
    q = _heads(g, mm1[1].inputs[0], False)
    k = _heads(g, mm1[1].inputs[1], True)
    mm2 = g.only(n.outputs[0], "MatMul")
    if q is None or k is None or mm2 is None or mm2[1].inputs[0] != n.outputs[0] or q[1] != k[1]:
        return False
    v = _heads(g, mm2[1].inputs[1], False)
    if v is None or v[1] != q[1]:
        return False
    merged = _merge_heads(g, mm2[1].outputs[0], q[1])
    if merged is None:
        return False
    out, tail = merged
    matched += [mm2[0], *q[2], *k[2], *v[2], *tail]
    if scale is None:
        scale = 1.0
    if not g.internal_ok(sorted(set(matched)), {out}):
        return False
    g.replace(sorted(set(matched)), Node(f"{n.name.rsplit('/', 1)[0]}/Attention", ATTENTION,
                                         [q[0], k[0], v[0], mask], [out],
                                         {"heads": q[1], "scale": scale, "causal": int(causal)}))
    return True


PATTERNS: tuple[Callable[[_Graph, int, Node], bool], ...] = (_layernorm, _gelu_erf, _gelu_tanh, _attention)


def recover(net: Net, patterns: tuple[Callable[[_Graph, int, Node], bool], ...] = PATTERNS) -> Net:
    """``net`` with every match of ``patterns`` replaced by its one node (see the module
    docstring); nodes keep their order (a replacement takes its last node's place)."""
    g = _Graph.of(net)
    for pattern in patterns:
        for i in range(len(g.nodes)):
            n = g.nodes[i]
            if n is not None:
                pattern(g, i, n)
    nodes = tuple(n for n in g.nodes if n is not None)
    consumers: dict[str, list[int]] = {}
    for i, n in enumerate(nodes):
        for x in n.inputs:
            if x:
                consumers.setdefault(x, []).append(i)
    return attrs.evolve(net, nodes=nodes, consumers=consumers)
