"""Hostile input to the loaders: anything JSON/TOML can hold either loads or raises a
StaticschedError with one line per problem — never another exception."""

from __future__ import annotations

import copy
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from staticsched.errors import StaticschedError
from staticsched.model.hardware_toml import hardware_from_dict
from staticsched.model.opgraph import opgraph_from_dict

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
)
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)

_GOOD_GRAPH = {
    "format": "staticsched.opgraph",
    "version": 1,
    "items": {"t0": {"space": "L1", "bytes": 1024}},
    "ops": [
        {"id": "a", "unit": "DMA", "duration": 3, "writes": ["t0"]},
        {"id": "b", "unit": "CUBE", "duration": 4, "reads": ["t0"], "deps": ["a"]},
    ],
}
_GOOD_HW = {
    "name": "h",
    "cores": 1,
    "units": {"DMA": {}, "CUBE": {}},
    "spaces": {"GM": {"unbounded": True}, "L1": {"capacity": 4096, "alignment": 32}},
    "sync": {"event_ids": 2},
}


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


def _replace(obj, path, value):
    if not path:
        return value
    obj = copy.deepcopy(obj)
    cur = obj
    for key in path[:-1]:
        cur = cur[key]
    cur[path[-1]] = value
    return obj


def _loads_or_clean_error(fn, data):
    try:
        fn(data, "fuzz.json")
    except StaticschedError as exc:
        assert exc.problems and all(isinstance(p, str) and p for p in exc.problems)
        assert all("\n" not in p for p in exc.problems)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), value=_json)
def test_opgraph_loader_never_crashes(data, value):
    paths = list(_paths(_GOOD_GRAPH))
    path = data.draw(st.sampled_from(paths), label="path")
    _loads_or_clean_error(opgraph_from_dict, _replace(_GOOD_GRAPH, path, value))


@settings(max_examples=300, deadline=None)
@given(data=st.data(), value=_json)
def test_hardware_loader_never_crashes(data, value):
    paths = list(_paths(_GOOD_HW))
    path = data.draw(st.sampled_from(paths), label="path")
    _loads_or_clean_error(hardware_from_dict, _replace(_GOOD_HW, path, value))


@settings(max_examples=100, deadline=None)
@given(value=_json)
def test_any_json_document(value):
    _loads_or_clean_error(opgraph_from_dict, value)
    _loads_or_clean_error(hardware_from_dict, value)


def test_good_documents_load():
    opgraph_from_dict(json.loads(json.dumps(_GOOD_GRAPH)))
    hardware_from_dict(copy.deepcopy(_GOOD_HW))
