#pragma once
// Reductions over axes (sum, mean, max, min, prod) and the index reductions
// argmax / argmin. Results are standard-strided.
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln::op {

enum class reduction { sum, mean, max, min, prod };

// Shared attributes and kernels of the reduce_* ops. `axes` empty means all
// axes; negative axes count from the end.
struct reduce_op : op_base {
    std::vector<std::int64_t> axes;
    bool keepdims = true;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.axes, "axes");
        f(self.keepdims, "keepdims");
    }

protected:
    shape reduce_shape(const std::string& op, const std::vector<shape>& inputs) const;
    void reduce_compute(reduction kind, const argument& result, const std::vector<argument>& inputs) const;
};

#define KILN_DECLARE_REDUCE_OP(STRUCT, KIND)                                                                 \
    struct STRUCT : reduce_op {                                                                              \
        std::string name() const { return #STRUCT; }                                                         \
        shape compute_shape(const std::vector<shape>& inputs) const { return reduce_shape(name(), inputs); } \
        void compute(const argument& result, const std::vector<argument>& inputs) const {                    \
            reduce_compute(reduction::KIND, result, inputs);                                                 \
        }                                                                                                    \
    };

KILN_DECLARE_REDUCE_OP(reduce_sum, sum)
KILN_DECLARE_REDUCE_OP(reduce_mean, mean)
KILN_DECLARE_REDUCE_OP(reduce_max, max)
KILN_DECLARE_REDUCE_OP(reduce_min, min)
KILN_DECLARE_REDUCE_OP(reduce_prod, prod)
#undef KILN_DECLARE_REDUCE_OP

// Index of the extreme value along `axis` as int64. Ties pick the first index
// unless select_last_index; NaN counts as the extreme value (as numpy).
struct arg_reduce_op : op_base {
    std::int64_t axis = 0;
    bool keepdims = true;
    bool select_last_index = false;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.axis, "axis");
        f(self.keepdims, "keepdims");
        f(self.select_last_index, "select_last_index");
    }

protected:
    shape arg_shape(const std::string& op, const std::vector<shape>& inputs) const;
    void arg_compute(bool want_max, const argument& result, const std::vector<argument>& inputs) const;
};

struct argmax : arg_reduce_op {
    std::string name() const { return "argmax"; }
    shape compute_shape(const std::vector<shape>& inputs) const { return arg_shape(name(), inputs); }
    void compute(const argument& result, const std::vector<argument>& inputs) const {
        arg_compute(true, result, inputs);
    }
};

struct argmin : arg_reduce_op {
    std::string name() const { return "argmin"; }
    shape compute_shape(const std::vector<shape>& inputs) const { return arg_shape(name(), inputs); }
    void compute(const argument& result, const std::vector<argument>& inputs) const {
        arg_compute(false, result, inputs);
    }
};

}  // namespace kiln::op
