#include "ops/bitcast.hpp"

#include <cstring>

#include "ops/op_helpers.hpp"

namespace kiln::op {

shape bitcast::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 1);
    const shape target{target_type};
    if (target.element_size() != inputs[0].element_size())
        fail(error_kind::type_error, name() + ": " + to_string(inputs[0].type()) + " has " +
                                         std::to_string(inputs[0].element_size()) + " bytes per element but " +
                                         to_string(target_type) + " has " + std::to_string(target.element_size()));
    return {target_type, inputs[0].lens()};
}

void bitcast::compute(const argument& result, const std::vector<argument>& inputs) const {
    const shape& in = inputs[0].get_shape();
    const std::size_t size = in.element_size();
    const std::byte* x = inputs[0].data();
    std::byte* y = result.data();
    // The input may be a strided view; the result is standard. A bool byte
    // other than 0 or 1 would be undefined behaviour, so bytes become 0 / 1.
    for (std::size_t i = 0; i < in.elements(); ++i) {
        if (target_type == dtype::bool_type)
            y[i] = std::byte{x[in.index(i)] != std::byte{0}};
        else
            std::memcpy(y + i * size, x + in.index(i) * size, size);
    }
}

}  // namespace kiln::op
