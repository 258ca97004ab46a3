#pragma once
// topk: the k largest (or smallest) entries along an axis and their indices.
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln::op {

// One result per instruction, as with split: output 0 is the values (the
// input's dtype), output 1 their int64 indices; a graph wanting both uses two
// topk instructions. Equal values are ordered by lower index first (as ONNX
// specifies) and NaN counts as larger than any number. Results are always
// sorted; `sorted` is kept so that a false value round-trips.
struct topk : op_base {
    std::int64_t k = 1;
    std::int64_t axis = -1;
    bool largest = true;
    bool sorted = true;
    std::int64_t output = 0;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.k, "k");
        f(self.axis, "axis");
        f(self.largest, "largest");
        f(self.sorted, "sorted");
        f(self.output, "output");
    }
    std::string name() const { return "topk"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

}  // namespace kiln::op
