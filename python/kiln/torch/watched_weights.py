"""The model weights a compiled module holds as constants, checked on every call.

A compiled program holds the values a model's parameters and buffers had
when it was compiled. A call after any of them changed in place (an
optimizer step, a BatchNorm in train mode: the tensor's version moves) or
was replaced (load_state_dict into a new tensor, a new Parameter, ``.data =``)
must raise instead of computing with the old values.

That check runs on every call, over every weight: a Python loop over
MobileNetV2's 314 tensors cost about 120 us a call, as much as a small
model's whole run. Here the common case (nothing changed) is a few ``map``
passes that run in C: owners, their tensor tables, the tensors, their
identity, memory and version, compared as lists. Only when that finds a
difference, or an owner is gone, does the per-weight loop run, to name the
weight that changed (or to forget the weights of a model that no longer
exists, which nothing can change any more).

Weak references throughout: the compiled module keeps neither the model
nor its tensors alive.
"""

import operator
import weakref

import torch

import kiln

_alive = weakref.ref.__call__
_data_ptr = torch.Tensor.data_ptr
_version = operator.attrgetter("_version")
# Below this many weights the plain loop is quicker than setting up the map
# passes (2 weights: 0.8 against 2.0 us).
_FEW = 16


class WatchedWeights:
    """Weak references to a model's parameters and buffers, as they were."""

    def __init__(self, model):
        self._entries = []  # (name, owner_ref, table, key, tensor_ref, address, version)
        for prefix, owner in model.named_modules():
            for table in ("_parameters", "_buffers"):
                for key, t in getattr(owner, table).items():
                    if t is None:
                        continue
                    # Inference tensors (made under torch.inference_mode) keep no version.
                    version = None if t.is_inference() else t._version
                    name = f"{prefix}.{key}" if prefix else key
                    self._entries.append((name, weakref.ref(owner), table, key, weakref.ref(t), t.data_ptr(), version))
        self._index()

    def __len__(self):
        return len(self._entries)

    def _index(self):
        """The columns the fast check maps over."""
        entries = self._entries
        self._owner_refs = [e[1] for e in entries]
        self._tables = [e[2] for e in entries]
        self._keys = [e[3] for e in entries]
        self._tensor_refs = [e[4] for e in entries]
        self._addresses = [e[5] for e in entries]
        versioned = [i for i, e in enumerate(entries) if e[6] is not None]
        self._versions = [entries[i][6] for i in versioned]
        # itemgetter of one position returns the item, not a 1-tuple: keep lists.
        self._pick_versioned = (lambda ts, i=versioned: [ts[k] for k in i]) if len(versioned) < 2 else operator.itemgetter(*versioned)

    def check(self):
        """Raises KilnRuntimeError naming a weight that changed since it was watched."""
        if len(self._entries) < _FEW:
            self._check_each()
            return
        try:
            owners = map(_alive, self._owner_refs)
            current = list(map(dict.get, map(getattr, owners, self._tables), self._keys))
            if (
                all(map(operator.is_, current, map(_alive, self._tensor_refs)))
                and list(map(_data_ptr, current)) == self._addresses
                and list(map(_version, self._pick_versioned(current))) == self._versions
            ):
                return
        except (AttributeError, TypeError):  # an owner or a tensor is gone (None has no table / data_ptr)
            pass
        self._check_each()

    def _check_each(self):
        kept = []
        for entry in self._entries:
            name, owner_ref, table, key, tensor_ref, address, version = entry
            owner = owner_ref()
            if owner is None:  # the model is gone: nothing can change it any more
                continue
            t = getattr(owner, table).get(key)
            if (
                t is None
                or t is not tensor_ref()
                or t.data_ptr() != address
                or (version is not None and t._version != version)
            ):
                raise kiln.KilnRuntimeError(
                    f"CompiledModule: the model's '{name}' changed after kiln.torch.compile, which compiled its "
                    "values at that time; compile the model again to use the new values"
                )
            kept.append(entry)
        if len(kept) != len(self._entries):
            self._entries = kept
            self._index()
