"""A record's steps packed into one compressed block of bytes, and unpacked again when someone reads them.

A record lives as long as its function, and its steps' programs are many small Python objects (calls, proxies,
tuples, names). Python's small-object allocator gives memory back to the system only when every object in an
arena of it is freed, so a long-lived process that made many records keeps the high-water mark of all of them
even after their functions are gone. Packed, a record's steps are one ``bytes`` object (held by the C allocator,
which returns it when freed) and a tuple of the objects they refer to but do not own (symbols, pass classes,
tensors): unpacking gives back steps equal to the packed ones, sharing among steps included, with the very same
symbols.

Only the recently used records keep their steps as objects (``recent``); a record is packed when it falls out of
that window, and unpacked (and so recent again) when its steps are read.
"""
from __future__ import annotations

import io
import pickle
import sys
import threading
import weakref
import zlib
from collections import OrderedDict

import torch

from thunderlab.core.symbols import Symbol

# how many records keep their steps unpacked: those whose steps were read or made most recently
RECENT = 8

# kinds of objects a packed record holds as copies: plain values and the IR's own data. Anything else it refers
# to (a symbol, a pass class, a tensor constant, a region's runner) is kept by reference and comes back as itself.
_PLAIN = frozenset({tuple, list, dict, set, frozenset, str, int, float, bool, type(None), complex, bytes, slice,
                    torch.dtype, torch.device, torch.Size})
_DATA_MODULES = ("thunderlab.core.", "thunderlab.inspect.")


# type -> whether its values are copied, for the types met so far that are plain or thunderlab's own (a pack
# asks once per value it writes, and most are of a handful of types)
_KNOWN: dict[type, bool] = dict.fromkeys(_PLAIN, True)


def _copied(obj) -> bool:
    t = type(obj)
    known = _KNOWN.get(t)
    if known is not None:
        return known
    # thunderlab's own classes (the IR's, its passes') are written by name; any other is referred to: a name in a
    # notebook may mean another class by the time the steps are read (a pass defined again), and re-runs tell a
    # step's pass class from the one registered now by identity
    if issubclass(t, type):
        return obj.__module__.startswith("thunderlab.") and _importable(obj)
    # symbols are shared by every trace that calls them
    copied = t.__module__.startswith(_DATA_MODULES) and not issubclass(t, Symbol)
    if t.__module__.startswith("thunderlab."):
        _KNOWN[t] = copied
    return copied


def _importable(cls: type) -> bool:
    module = sys.modules.get(cls.__module__)
    found = module
    for part in cls.__qualname__.split("."):
        found = getattr(found, part, None)
    return module is not None and found is cls


class _Packer(pickle.Pickler):
    def __init__(self, out):
        super().__init__(out, protocol=pickle.HIGHEST_PROTOCOL)
        self.refs: list = []
        self._index: dict[int, int] = {}

    def persistent_id(self, obj):
        if _copied(obj):
            return None
        i = self._index.get(id(obj))
        if i is None:
            i = self._index[id(obj)] = len(self.refs)
            self.refs.append(obj)
        return i


class _Unpacker(pickle.Unpickler):
    def __init__(self, data: bytes, refs: tuple):
        super().__init__(io.BytesIO(data))
        self.refs = refs

    def persistent_load(self, pid):
        return self.refs[pid]


class Packed:
    """Steps as one compressed block and the objects they refer to (see the module's docstring)."""

    __slots__ = ("data", "refs", "count", "origin")

    def __init__(self, steps: list):
        out = io.BytesIO()
        packer = _Packer(out)
        packer.dump(steps)
        self.data = zlib.compress(out.getvalue(), 1)
        self.refs = tuple(packer.refs)
        # what lists of records show without unpacking: how many steps, and the capture step's notes (a small frozen
        # value, the one its graph holds)
        self.count = len(steps)
        self.origin = steps[0].notes if steps else None

    def unpack(self) -> list:
        return _Unpacker(zlib.decompress(self.data), self.refs).load()


LOCK = threading.RLock()  # a record is packed on the thread that makes another; its steps read on any
_recent: OrderedDict[int, weakref.ref] = OrderedDict()  # record uid -> record, least recently used first


def touch(record) -> None:
    """``record``'s steps were just made or read: it keeps them unpacked, and the least recently used record
    beyond ``RECENT`` is packed."""
    with LOCK:
        if record.uid in _recent:
            _recent.move_to_end(record.uid)
            return
        _recent[record.uid] = weakref.ref(record)
        while len(_recent) > RECENT:
            _, ref = _recent.popitem(last=False)
            old = ref()
            if old is not None:
                old.pack()


def forget(record) -> None:
    with LOCK:
        _recent.pop(record.uid, None)


def is_recent(uid: int) -> bool:
    return uid in _recent
