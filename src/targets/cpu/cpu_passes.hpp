#pragma once
// Passes only the cpu target runs: they choose layouts its kernels want.
#include "kiln/pass.hpp"

namespace kiln {

// Moves convolutions (and the concats and elementwise ops between them) to
// the nChw8c blocked layout that oneDNN's AVX2 kernels run fastest in, so
// that a chain of convolutions stays blocked with no reorder in between.
// Values leave the blocked region through from_blocked where a plain-layout
// op reads them; the ones nobody reads are removed.
class propagate_blocked_layout final : public pass {
public:
    std::string name() const override { return "propagate_blocked_layout"; }
    void apply(module& m) const override;
};

}  // namespace kiln
