#include "ir/reshape_lengths_from_input.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

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
        std::vector<std::int64_t> lengths;
        bool differs = false;
        for (const auto& d : dims_value->as_list()) {
            std::int64_t length = d.as_int();
            const std::size_t i = lengths.size();
            if (i < in.size() && length > 0 && static_cast<std::size_t>(length) == in[i]) {
                length = 0;
                differs = true;
            }
            lengths.push_back(length);
        }
        // The first length not copied ([batch * seq, 768] from [batch, seq,
        // 768]) is what the others leave, -1, where no length is -1 yet:
        // it takes the outer dimensions, where an extent usually is. A unit
        // length is passed over ([1, 1, 1, seq] from [1, seq] is
        // [0, 1, 1, -1]): an inserted dimension holds no extent.
        if (std::find(lengths.begin(), lengths.end(), -1) == lengths.end()) {
            auto first = std::find_if(lengths.begin(), lengths.end(), [](std::int64_t l) { return l > 1; });
            if (first == lengths.end())
                first = std::find_if(lengths.begin(), lengths.end(), [](std::int64_t l) { return l > 0; });
            if (first != lengths.end()) {
                *first = -1;
                differs = true;
            }
        }
        if (!differs) continue;
        value_list dims(lengths.begin(), lengths.end());
        const operation op = make_op("reshape", value_map{{"dims", value(dims)}});
        if (op.compute_shape({it->inputs()[0]->get_shape()}) != it->get_shape()) continue;
        m.replace_instruction(it, op, {it->inputs()[0]});
        ++changed;
    }
    return changed;
}

}  // namespace kiln
