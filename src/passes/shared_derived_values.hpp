#pragma once
// Values derived from a literal's bytes (weights transposed into the layout a
// kernel reads) shared by every program optimised from the same source: a
// ranged compile optimises a model at several extents (ir/program.cpp), and
// each program would otherwise make its own copy of each derived weight
// (GPT-2 small: 500 MB a copy), then compare the copies byte by byte to show
// that the programs are one graph. A shared value is one buffer, derived
// once, and equal by address.
#include <functional>
#include <string>

#include "kiln/argument.hpp"

namespace kiln {

// derive() (a function of `source`'s values alone, named by `derivation`),
// or the buffer it gave for the same source buffer and derivation while some
// program still holds that buffer. The result is shared: nobody may write it.
argument shared_derived_value(const argument& source, const std::string& derivation,
                              const std::function<argument()>& derive);

}  // namespace kiln
