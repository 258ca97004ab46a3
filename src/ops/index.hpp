#pragma once
// Index ops: gather.
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln::op {

// gather(data, indices): picks entries of `data` along `axis` at `indices`
// (int32 or int64; negative counts from the end). The result has lens
// data.lens[:axis] + indices.lens + data.lens[axis+1:]. An index outside the
// axis raises an out_of_range error at run time instead of reading past it.
struct gather : op_base {
    std::int64_t axis = 0;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.axis, "axis");
    }
    std::string name() const { return "gather"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

}  // namespace kiln::op
