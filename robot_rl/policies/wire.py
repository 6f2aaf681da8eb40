"""The policy-server wire format: msgpack with numpy arrays, as openpi's policy servers and clients speak it.

An array travels as the map ``{"__ndarray__": true, "data": <raw bytes>, "dtype": <numpy dtype str>, "shape":
[...]}`` and a numpy scalar as ``{"__npgeneric__": true, "data": <value>, "dtype": ...}`` (keys as msgpack bin,
as openpi's ``msgpack_numpy`` writes them; text keys are read too). Decoding is strict, because the bytes come
from the network: only bool / integer / float / fixed-width text dtypes (never object, void or any type that
could carry code), the data length must match the shape exactly, msgpack extension types are refused, and the
message size is bounded. Nothing is ever unpickled.
"""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

ALLOWED_KINDS = frozenset("biufU")
"""numpy dtype kinds a peer may send: bool, signed/unsigned int, float, fixed-width unicode."""
MAX_DIMS = 8


class WireError(ValueError):
    """A message that does not decode to what the protocol allows."""


def _check_dtype(dtype: Any) -> np.dtype:
    try:
        dt = np.dtype(dtype.decode() if isinstance(dtype, bytes) else dtype)
    except TypeError as exc:
        raise WireError(f"unknown array dtype {dtype!r}") from exc
    if dt.kind not in ALLOWED_KINDS or dt.hasobject or dt.fields is not None:
        raise WireError(f"array dtype {dt.str!r} is not allowed (bool, int, uint, float and text only)")
    return dt


def _encode(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        dt = _check_dtype(obj.dtype.str)
        return {b"__ndarray__": True, b"data": np.ascontiguousarray(obj).tobytes(), b"dtype": dt.str,
                b"shape": list(obj.shape)}
    if isinstance(obj, np.generic):
        dt = _check_dtype(obj.dtype.str)
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": dt.str}
    raise TypeError(f"cannot send a {type(obj).__name__} over the policy wire")


def _get(obj: dict, key: str) -> Any:
    value = obj.get(key.encode(), obj.get(key))
    if value is None:
        raise WireError(f"encoded array lacks {key!r}")
    return value


def _decode(obj: dict) -> Any:
    if b"__ndarray__" in obj or "__ndarray__" in obj:
        dt = _check_dtype(_get(obj, "dtype"))
        shape = _get(obj, "shape")
        data = _get(obj, "data")
        if (not isinstance(shape, (list, tuple)) or len(shape) > MAX_DIMS
                or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape)):
            raise WireError(f"bad array shape {shape!r}")
        if not isinstance(data, bytes):
            raise WireError("array data must be bytes")
        if len(data) != int(np.prod(shape, dtype=np.int64)) * dt.itemsize:
            raise WireError(f"array data of {len(data)} bytes does not fit shape {list(shape)} {dt.str}")
        return np.frombuffer(data, dtype=dt).reshape(shape)
    if b"__npgeneric__" in obj or "__npgeneric__" in obj:
        dt = _check_dtype(_get(obj, "dtype"))
        value = _get(obj, "data")
        if not isinstance(value, (bool, int, float, str)):
            raise WireError(f"bad numpy scalar {value!r}")
        return dt.type(value)
    return obj


def _refuse_ext(code: int, data: bytes) -> Any:
    raise WireError(f"msgpack extension type {code} is not allowed")


def packb(obj: Any) -> bytes:
    """``obj`` (maps, lists, str, numbers, numpy arrays/scalars) as one message."""
    return msgpack.packb(obj, default=_encode, use_bin_type=True)


def unpackb(data: bytes, max_bytes: int = 256 << 20) -> Any:
    """A message back (arrays are read-only views of ``data``); :class:`WireError` for anything not allowed."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise WireError(f"expected a binary message, got {type(data).__name__}")
    if len(data) > max_bytes:
        raise WireError(f"message of {len(data)} bytes is over the {max_bytes}-byte limit")
    try:
        return msgpack.unpackb(bytes(data), object_hook=_decode, ext_hook=_refuse_ext, raw=False,
                               strict_map_key=False)
    except WireError:
        raise
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, TypeError) as exc:
        raise WireError(f"not a msgpack message: {type(exc).__name__}: {exc}") from None
