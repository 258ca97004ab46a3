#pragma once
// bitcast: reinterprets each element's bytes as another dtype of the same
// size (ONNX BitCast), unlike convert, which converts values.
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln::op {

struct bitcast : op_base {
    dtype target_type = dtype::float_type;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.target_type, "target_type");
    }
    std::string name() const { return "bitcast"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

}  // namespace kiln::op
