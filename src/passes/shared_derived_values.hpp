#pragma once
// Values derived from literals' bytes (folded constants, weights transposed
// into the layout a kernel reads), in one table for the process, shared by
// every program optimised from the same source: a ranged compile optimises a
// model at several extents, in several attempts (ir/program.cpp), and the
// imports share their weights, so a value derived at one extent is not
// computed and copied again at the next (GPT-2 small's weights are 500 MB a
// copy), and programs that share it compare equal by address. A per-shape
// compile of the same model reuses them too.
//
// Held weakly: an entry serves while the value and the source buffers its
// key names by address are alive (a program still holds them), so that
// nothing is kept from being freed (a literal handed over to its kernels) and
// no other buffer can have taken one of those addresses. Shared values are
// nobody's to write.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/argument.hpp"

namespace kiln {

// The value remembered under `key` (which names its sources by address and
// says how it was derived from them), while it and its sources are alive.
std::optional<argument> find_shared_derived_value(const std::string& key);

// Remembers `value` (one that owns its memory) under `key`; `sources` are
// the owners of the buffers the key names.
void share_derived_value(const std::string& key, const argument& value, std::vector<std::weak_ptr<void>> sources);

// derive() (a function of `source`'s values alone, named by `derivation`),
// or the buffer it gave for the same source buffer and derivation while some
// program still holds that buffer.
argument shared_derived_value(const argument& source, const std::string& derivation,
                              const std::function<argument()>& derive);

}  // namespace kiln
