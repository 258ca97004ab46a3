#include "ir/reshape_lengths_from_input.hpp"

#include <cstdint>

#include "kiln/op_registry.hpp"

namespace kiln {

std::size_t write_reshape_lengths_copied_from_input(module& m) {
    std::size_t changed = 0;
    for (auto it = m.begin(); it != m.end(); ++it) {
        if (it->name() != "reshape" || it->inputs().size() != 1) continue;
        const value attributes = it->get_operator().attributes();
        const value* dims_value = attributes.find("dims");
        if (dims_value == nullptr) continue;
        const auto& in = it->inputs()[0]->get_shape().lens();
        value_list dims;
        bool differs = false;
        std::size_t i = 0;
        for (const auto& d : dims_value->as_list()) {
            std::int64_t length = d.as_int();
            if (i < in.size() && length > 0 && static_cast<std::size_t>(length) == in[i]) {
                length = 0;
                differs = true;
            }
            dims.emplace_back(length);
            ++i;
        }
        if (!differs) continue;
        const operation op = make_op("reshape", value_map{{"dims", value(dims)}});
        if (op.compute_shape({it->inputs()[0]->get_shape()}) != it->get_shape()) continue;
        m.replace_instruction(it, op, {it->inputs()[0]});
        ++changed;
    }
    return changed;
}

}  // namespace kiln
