"""The compact binary format of the sandbox pipe, safe to decode from an untrusted peer.

Decoding builds only plain data (``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``,
``list``, ``tuple``, ``dict`` and numeric numpy arrays and scalars) and never calls anything the
bytes name; lengths and nesting are checked, so hostile bytes end in `WireError`. The sandbox child
loads this module by file path under ``python -I -S``, so it imports only the standard library and
numpy. See docs/sandbox.md#the-lockdown-toolkit for the frame layout.
"""

from __future__ import annotations

import re
import struct

import numpy as np

TYPE_CHECKING = False  # typing is not imported at run time: the sandbox child imports as little as it can
if TYPE_CHECKING:
    from typing import Any

MAX_DEPTH = 32
MAX_NDIM = 32

_I32 = struct.Struct("<I")
_Q = struct.Struct("<q")
_D = struct.Struct("<d")
_DTYPE_RE = re.compile(r"^[<>|=][biufc][0-9]{1,2}$")


class WireError(ValueError):
    """Bytes that are not a well-formed value of the sandbox wire format."""


_SHAPES = [struct.Struct(f"<{n}q") for n in range(MAX_NDIM + 1)]
_DTYPES: dict[bytes, np.dtype] = {}  # accepted dtype strings (a few thousand can match the pattern at most)


def _dtype(raw: bytes) -> np.dtype:
    dt = _DTYPES.get(raw)
    if dt is not None:
        return dt
    text = raw.decode("ascii")
    if not _DTYPE_RE.match(text):
        raise WireError(f"refused dtype {text!r}: only bool, integer, float and complex dtypes")
    dt = np.dtype(text)
    if dt.kind not in "biufc" or dt.hasobject:
        raise WireError(f"refused dtype {text!r}")
    _DTYPES[raw] = dt
    return dt


# ------------------------------------------------------------------------------------- encoding
def encode(value: Any) -> bytes:
    """Encode plain data (see the module docstring) to bytes; raise `TypeError` for anything else."""
    out: list[bytes] = []
    _enc(value, out, 0)
    return b"".join(out)


def _enc(v: Any, out: list[bytes], depth: int) -> None:
    t = type(v)
    if t is np.ndarray:
        if v.dtype.kind not in "biufc" or v.dtype.hasobject or v.ndim > MAX_NDIM:
            raise TypeError(f"cannot send an array of dtype {v.dtype} and {v.ndim} dimensions")
        if not v.flags.c_contiguous:
            v = np.ascontiguousarray(v)
        ds = v.dtype.str.encode()
        out.append(b"a" + bytes((len(ds),)) + ds + bytes((v.ndim,))
                   + struct.pack(f"<{v.ndim}q", *v.shape) + v.tobytes())
    elif t is int:
        if -(1 << 63) <= v < (1 << 63):
            out.append(b"i" + _Q.pack(v))
        else:
            s = str(v).encode()  # Python itself caps int->str at 4300 digits
            out.append(b"I" + _I32.pack(len(s)) + s)
    elif t is float:
        out.append(b"f" + _D.pack(v))
    elif t is str:
        b = v.encode("utf-8", "surrogatepass")
        out.append(b"s" + _I32.pack(len(b)) + b)
    elif v is None:
        out.append(b"N")
    elif v is True:
        out.append(b"T")
    elif v is False:
        out.append(b"F")
    elif t is list or t is tuple:
        if depth >= MAX_DEPTH:
            raise TypeError(f"value nested deeper than {MAX_DEPTH} levels")
        out.append((b"l" if t is list else b"t") + _I32.pack(len(v)))
        for item in v:
            _enc(item, out, depth + 1)
    elif t is dict:
        if depth >= MAX_DEPTH:
            raise TypeError(f"value nested deeper than {MAX_DEPTH} levels")
        out.append(b"d" + _I32.pack(len(v)))
        for key, item in v.items():
            _enc(key, out, depth + 1)
            _enc(item, out, depth + 1)
    elif t is bytes or t is bytearray:
        out.append(b"y" + _I32.pack(len(v)) + bytes(v))
    elif isinstance(v, np.generic) and v.dtype.kind in "biufc":
        ds = v.dtype.str.encode()
        out.append(b"g" + bytes((len(ds),)) + ds + v.tobytes())
    elif isinstance(v, np.ndarray):  # a subclass (e.g. a matrix): send the plain array
        _enc(np.asarray(v).view(np.ndarray), out, depth)
    elif isinstance(v, (bool, np.bool_)):
        _enc(bool(v), out, depth)
    elif isinstance(v, int):  # an int subclass (IntEnum, ...) travels as a plain int
        _enc(int(v), out, depth)
    elif isinstance(v, float):
        _enc(float(v), out, depth)
    elif isinstance(v, str):
        _enc(str(v), out, depth)
    elif isinstance(v, (list, tuple)):
        _enc(list(v) if isinstance(v, list) else tuple(v), out, depth)
    elif isinstance(v, dict):
        _enc(dict(v), out, depth)
    else:
        raise TypeError(f"cannot send a value of type {type(v).__name__}; use numbers, strings, "
                        f"lists, tuples, dicts or numeric numpy arrays")


# ------------------------------------------------------------------------------------- decoding
def decode(buf: bytes | bytearray | memoryview, start: int = 0) -> Any:
    """Decode one value from ``buf[start:]`` (bytes-like), which must hold exactly one value."""
    mv = memoryview(buf)
    try:
        value, pos = _dec(mv, start, 0)
    except WireError:
        raise
    except (struct.error, IndexError, UnicodeDecodeError, ValueError, TypeError, OverflowError) as exc:
        raise WireError(f"malformed frame: {type(exc).__name__}: {exc}") from None
    if pos != len(mv):
        raise WireError(f"malformed frame: {len(mv) - pos} trailing bytes")
    return value


def _need(mv: memoryview, pos: int, n: int) -> None:
    if n < 0 or pos + n > len(mv):
        raise WireError("malformed frame: truncated")


def _dec(mv: memoryview, pos: int, depth: int) -> tuple[Any, int]:
    _need(mv, pos, 1)
    tag = mv[pos]
    pos += 1
    if tag == 0x61:  # a: ndarray
        _need(mv, pos, 1)
        n = mv[pos]
        _need(mv, pos + 1, n + 1)
        dt = _dtype(bytes(mv[pos + 1:pos + 1 + n]))
        pos += 1 + n
        ndim = mv[pos]
        pos += 1
        if ndim > MAX_NDIM:
            raise WireError(f"array with {ndim} dimensions")
        _need(mv, pos, 8 * ndim)
        shape = _SHAPES[ndim].unpack_from(mv, pos)
        pos += 8 * ndim
        count = 1
        for s in shape:
            if s < 0:
                raise WireError(f"negative array dimension in shape {shape}")
            count *= s
        nbytes = count * dt.itemsize
        _need(mv, pos, nbytes)
        arr = np.frombuffer(mv, dtype=dt, count=count, offset=pos).reshape(shape).copy()
        return arr, pos + nbytes
    if tag == 0x69:  # i
        _need(mv, pos, 8)
        return _Q.unpack_from(mv, pos)[0], pos + 8
    if tag == 0x66:  # f
        _need(mv, pos, 8)
        return _D.unpack_from(mv, pos)[0], pos + 8
    if tag == 0x73 or tag == 0x79 or tag == 0x49:  # s, y, I
        _need(mv, pos, 4)
        n = _I32.unpack_from(mv, pos)[0]
        pos += 4
        _need(mv, pos, n)
        raw = bytes(mv[pos:pos + n])
        if tag == 0x73:
            return raw.decode("utf-8", "surrogatepass"), pos + n
        if tag == 0x79:
            return raw, pos + n
        if n > 5000 or not re.fullmatch(rb"-?[0-9]+", raw):
            raise WireError("malformed big integer")
        return int(raw), pos + n
    if tag == 0x4E:
        return None, pos
    if tag == 0x54:
        return True, pos
    if tag == 0x46:
        return False, pos
    if tag == 0x6C or tag == 0x74 or tag == 0x64:  # l, t, d
        if depth >= MAX_DEPTH:
            raise WireError(f"value nested deeper than {MAX_DEPTH} levels")
        _need(mv, pos, 4)
        n = _I32.unpack_from(mv, pos)[0]
        pos += 4
        _need(mv, pos, n)  # every item takes at least one byte
        if tag == 0x64:
            out = {}
            for _ in range(n):
                key, pos = _dec(mv, pos, depth + 1)
                value, pos = _dec(mv, pos, depth + 1)
                out[key] = value  # an unhashable key raises TypeError -> WireError
            return out, pos
        items = []
        for _ in range(n):
            item, pos = _dec(mv, pos, depth + 1)
            items.append(item)
        return (items if tag == 0x6C else tuple(items)), pos
    if tag == 0x67:  # g: numpy scalar
        _need(mv, pos, 1)
        n = mv[pos]
        _need(mv, pos + 1, n)
        dt = _dtype(bytes(mv[pos + 1:pos + 1 + n]))
        pos += 1 + n
        _need(mv, pos, dt.itemsize)
        return np.frombuffer(mv, dtype=dt, count=1, offset=pos)[0], pos + dt.itemsize
    raise WireError(f"malformed frame: unknown tag {tag!r}")
