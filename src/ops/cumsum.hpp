#pragma once
// cumsum and cumprod: running sums and products along an axis (ONNX CumSum, CumProd).
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln::op {

// result[.., i, ..] = sum of x[.., j, ..] for j <= i along `axis`; `exclusive`
// leaves out x[i] itself and `reverse` sums from the end. 16-bit floats
// accumulate in float.
struct cumsum : op_base {
    std::int64_t axis = 0;
    bool exclusive = false;
    bool reverse = false;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.axis, "axis");
        f(self.exclusive, "exclusive");
        f(self.reverse, "reverse");
    }
    std::string name() const { return "cumsum"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

// result[.., i, ..] = product of x[.., j, ..] for j <= i along `axis`, with
// `exclusive` and `reverse` as for cumsum (an empty product is 1).
struct cumprod : op_base {
    std::int64_t axis = 0;
    bool exclusive = false;
    bool reverse = false;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.axis, "axis");
        f(self.exclusive, "exclusive");
        f(self.reverse, "reverse");
    }
    std::string name() const { return "cumprod"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

}  // namespace kiln::op
