#include "passes/repeated_constants.hpp"

#include <cstring>

namespace kiln {

namespace {

shape with_unit_dim(const shape& s, std::size_t d) {
    auto lens = s.lens();
    lens.at(d) = 1;
    return shape(s.type(), std::move(lens));
}

// Whether the standard value's slices along `d` all equal the first.
bool repeats_along(const argument& v, std::size_t d) {
    const shape& s = v.get_shape();
    const std::size_t bytes = s.element_size() * s.strides()[d];  // one slice of the dims after d
    const std::size_t len = s.lens()[d];
    const std::size_t outer = s.elements() / (len * s.strides()[d]);
    for (std::size_t o = 0; o < outer; ++o) {
        const std::byte* first = v.data() + o * len * bytes;
        for (std::size_t i = 1; i < len; ++i)
            if (std::memcmp(first + i * bytes, first, bytes) != 0) return false;
    }
    return true;
}

argument first_slice_along(const argument& v, std::size_t d) {
    const shape& s = v.get_shape();
    const std::size_t bytes = s.element_size() * s.strides()[d];
    const std::size_t len = s.lens()[d];
    const std::size_t outer = s.elements() / (len * s.strides()[d]);
    argument out(with_unit_dim(s, d));
    for (std::size_t o = 0; o < outer; ++o) std::memcpy(out.data() + o * bytes, v.data() + o * len * bytes, bytes);
    return out;
}

}  // namespace

std::vector<std::size_t> dims_its_readers_broadcast(const instruction& c) {
    const shape& s = c.get_shape();
    std::vector<std::size_t> dims;
    if (s.is_tuple() || !s.standard() || c.outputs().empty()) return dims;
    for (std::size_t d = 0; d < s.ndim(); ++d) {
        if (s.lens()[d] <= 1) continue;
        const shape narrowed = with_unit_dim(s, d);
        bool broadcast = true;
        for (const auto& reader : c.outputs()) {
            if (!reader->get_operator().is_pointwise() || !reader->module_inputs().empty()) {
                broadcast = false;
                break;
            }
            std::vector<shape> inputs = reader->input_shapes();
            for (std::size_t k = 0; k < inputs.size(); ++k)
                if (&*reader->inputs()[k] == &c) inputs[k] = narrowed;
            try {
                const shape out = reader->get_operator().compute_shape(inputs);
                broadcast = out.type() == reader->get_shape().type() && out.lens() == reader->get_shape().lens();
            } catch (const error&) {
                broadcast = false;
            }
            if (!broadcast) break;
        }
        if (broadcast) dims.push_back(d);
    }
    return dims;
}

std::optional<argument> without_repeats(const argument& value, const std::vector<std::size_t>& dims) {
    if (!value.get_shape().standard() || value.data() == nullptr || value.get_shape().elements() == 0)
        return std::nullopt;
    std::optional<argument> out;
    for (std::size_t d : dims) {
        const argument& current = out ? *out : value;
        if (current.get_shape().lens().at(d) > 1 && repeats_along(current, d)) out = first_slice_along(current, d);
    }
    return out;
}

}  // namespace kiln
