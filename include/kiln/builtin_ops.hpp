#pragma once
// Ops that structure a module rather than compute: parameters, literals, return.
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln::op {

struct param : op_base {
    std::string name_ = {};
    shape param_shape = {};
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.name_, "name");
        f(self.param_shape, "shape");
    }
    std::string name() const { return "@param"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument&, const std::vector<argument>&) const;
};

// The shape and data of a literal live in its instruction.
struct literal_op : op_base {
    std::string name() const { return "@literal"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument&, const std::vector<argument>&) const;
};

struct return_op : op_base {
    std::string name() const { return "@return"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument&, const std::vector<argument>&) const;
};

}  // namespace kiln::op
