"""Hardware key paths: change one value of a hardware model by a dotted path.

A path walks the hardware file's tables: ``cores``, ``sync.event_ids``,
``spaces.L1.capacity``, ``vector.passes.gelu``. The arrays of tables are addressed by what
names an entry: ``links.HBM.bytes_per_cycle`` (a link by its name) and
``paths.GM->L1.bytes_per_cycle`` (a transfer path by ``SRC->DST``). A path must name a key
the base model has (a typo is an error, not a new key), except the last key of a table that
the file format allows and the base leaves at its default (``sync.flag_latency``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from staticsched.errors import InputError
from staticsched.model.hardware import Hardware
from staticsched.model.hardware_toml import hardware_from_dict

#: keys a table may have even when the base model leaves them out (their defaults apply)
_OPTIONAL = {
    "sync": {"event_ids", "flag_latency", "cross_core_event_ids", "cross_core_latency",
             "cross_core_capacity"},
    "space": {"capacity", "alignment"},
    "path": {"overhead"},
    "cube": {"overhead", "nd2nz_derate"},
    "vector": {"overhead"},
    "top": {"clock_ghz", "cores"},
}


def _entry_name(entry: Any, table: str) -> str:
    if not isinstance(entry, dict):
        return "?"
    return str(entry.get("name")) if table == "links" else f"{entry.get('src')}->{entry.get('dst')}"


def set_key_path(doc: dict[str, Any], path: str, value: Any) -> None:
    """Set ``path`` in the hardware document ``doc`` (in place).

    Raises
    ------
    InputError
        When the path names nothing in ``doc``, with the keys that exist there.
    """
    parts = path.split(".")
    if any(not p for p in parts):
        raise InputError(f"key path '{path}': empty part")
    node: Any = doc
    kind = "top"
    i = 0
    while i < len(parts) - 1:
        part, where = parts[i], ".".join(parts[: i + 1])
        if isinstance(node, dict) and part in ("links", "paths") and isinstance(node.get(part), list):
            if i + 2 > len(parts) - 1:
                example = "HBM" if part == "links" else "GM->L1"
                raise InputError(f"key path '{path}': '{where}' needs an entry and a key, e.g. "
                                 f"'{where}.{example}.bytes_per_cycle'")
            names = [_entry_name(e, part) for e in node[part]]
            if parts[i + 1] not in names:
                raise InputError(f"key path '{path}': no {part[:-1]} '{parts[i + 1]}' "
                                 f"(has {', '.join(names) or 'none'})")
            node = node[part][names.index(parts[i + 1])]
            kind = "link" if part == "links" else "path"
            i += 2
            continue
        if not isinstance(node, dict) or part not in node:
            have = ", ".join(sorted(node)) if isinstance(node, dict) else "nothing"
            raise InputError(f"key path '{path}': no key '{part}' at '{where}' (has {have})")
        kind = "space" if i >= 1 and parts[i - 1] == "spaces" else {
            "sync": "sync", "cube": "cube", "vector": "vector"}.get(part, kind)
        node = node[part]
        i += 1
    last, at = parts[-1], ".".join(parts[:-1]) or "top"
    if not isinstance(node, dict):
        raise InputError(f"key path '{path}': '{at}' is a value, not a table")
    if last not in node and last not in _OPTIONAL.get(kind, set()):
        raise InputError(f"key path '{path}': no key '{last}' at '{at}' (has {', '.join(sorted(node))})")
    if isinstance(node.get(last), dict | list):
        raise InputError(f"key path '{path}': '{last}' is a table, not a value")
    node[last] = value


def override_hardware(doc: Mapping[str, Any], where: str, overrides: Mapping[str, Any]) -> Hardware:
    """The hardware of ``doc`` with every ``key path -> value`` of ``overrides`` set.

    Raises
    ------
    InputError
        For a key path that names nothing; :class:`HardwareError` when a value makes the model
        invalid (a wrong type, a capacity of 0), one line per problem.
    """
    data = copy.deepcopy(dict(doc))
    for path in sorted(overrides):
        set_key_path(data, path, overrides[path])
    label = where + "".join(f" {k}={overrides[k]!r}" for k in sorted(overrides))
    return hardware_from_dict(data, label)
