"""Values that cross between the trusted worker and an agent process: `plain_json` for what the
agent reports (``AGENT_INFO``, ``episode_info()``), `dumps_request` for what the worker sends (pickles
of plain values and numeric arrays only)."""

from __future__ import annotations

import io
import json
import pickle
from typing import Any

import numpy as np

from ..lockdown import wire

PLAIN_JSON_DEPTH = 16
AGENT_INFO_BYTES = 64 << 10


def plain_json(value: Any, where: str, depth: int = 0) -> Any:
    """``value`` as plain JSON data (numpy scalars and arrays become numbers and lists); ValueError
    naming ``where`` for anything else: NaN or infinity, other types, keys that are not strings."""
    if depth > PLAIN_JSON_DEPTH:
        raise ValueError(f"{where} is nested deeper than {PLAIN_JSON_DEPTH} levels")
    if isinstance(value, np.ndarray):
        value = value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"{where} is {value}, which JSON cannot hold")
        return value
    if isinstance(value, (list, tuple)):
        return [plain_json(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"{where} has a key {k!r} that is not a string")
            out[k] = plain_json(v, f"{where}[{k!r}]", depth + 1)
        return out
    raise ValueError(f"{where} is of type {type(value).__name__}, not a JSON value")


def small_json(value: Any, where: str, limit: int) -> Any:
    """`plain_json` of ``value``, and ValueError when its JSON text is over ``limit`` bytes."""
    clean = plain_json(value, where)
    size = len(json.dumps(clean))
    if size > limit:
        raise ValueError(f"{where} holds {size:,} bytes of JSON")
    return clean



class NotPlain(TypeError):
    """A request value that is not plain data or a numeric numpy array."""


class _PlainPickler(pickle.Pickler):
    """Pickles plain data (None, bool, int, float, str, bytes, lists, tuples, dicts) and numeric numpy
    arrays and scalars, the values the agent process's unpickler rebuilds; anything else raises
    `NotPlain` (and `act_send` sends its `plain_copy` instead)."""

    # what numpy's reductions of arrays (contiguous or not), scalars and dtypes name by reference
    NUMPY_GLOBALS = frozenset(map(id, (np.ndarray, np.dtype, np.zeros(1).__reduce_ex__(5)[0],
                                       np.zeros((2, 4))[:, ::2].__reduce_ex__(5)[0], np.float64(0).__reduce__()[0])))

    def reducer_override(self, obj: Any) -> Any:
        kind = type(obj)
        if kind is np.ndarray or isinstance(obj, np.generic):
            if obj.dtype.kind in "biufc" and obj.dtype.names is None:
                return NotImplemented  # numpy's own reduction: the array's bytes and its dtype
        elif (isinstance(obj, np.dtype) or kind is pickle.PickleBuffer or id(obj) in self.NUMPY_GLOBALS
              or kind in (bool, int, float, str, bytes, bytearray, type(None))):
            return NotImplemented
        raise NotPlain(f"cannot send a value of type {kind.__name__} to the agent process")


def dumps_request(value: Any) -> bytes:
    """``value`` pickled for the agent process (protocol 5), or `NotPlain`."""
    buf = io.BytesIO()
    _PlainPickler(buf, protocol=5).dump(value)
    return buf.getvalue()


def plain_copy(value: Any, depth: int = 0) -> Any:
    """A plain copy of ``value``: what the wire format makes of it (an int subclass an int, ...), and
    for unknown objects (a custom info value of a native environment) their ``repr``."""
    if depth > 24:
        return repr(value)[:1000]
    if isinstance(value, dict):
        return {str(k): plain_copy(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [plain_copy(v, depth + 1) for v in value]
        return items if isinstance(value, list) else tuple(items)
    try:
        return wire.decode(wire.encode(value))  # an int subclass becomes an int, and so on
    except TypeError:
        return repr(value)[:1000]


