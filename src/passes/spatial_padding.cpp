#include "passes/spatial_padding.hpp"

#include "ops/shape_ops.hpp"

namespace kiln {

std::optional<spatial_padding> constant_spatial_pad(const instruction& pad) {
    const auto* p = pad.get_operator().get_if<op::pad>();
    const std::size_t rank = pad.get_shape().ndim();
    if (p == nullptr || p->mode != op::pad_mode::constant || rank < 3 || p->pads.size() != 2 * rank) return std::nullopt;
    const auto& pads = p->pads;
    if (pads[0] || pads[1] || pads[rank] || pads[rank + 1]) return std::nullopt;
    const auto at = [&](std::size_t i) { return pads.begin() + static_cast<std::ptrdiff_t>(i); };
    return spatial_padding{{at(2), at(rank)}, {at(rank + 2), pads.end()}, p->value};
}

operation with_more_padding(const operation& op, const spatial_padding& p) {
    const std::size_t spatial = p.begins.size();
    const value attributes = op.attributes();
    std::vector<std::int64_t> padding;
    for (const auto& v : attributes.find("padding")->as_list()) padding.push_back(v.as_int());
    if (padding.empty()) padding.assign(2 * spatial, 0);
    if (padding.size() == spatial) padding.insert(padding.end(), padding.begin(), padding.end());
    value_list merged;
    for (std::size_t i = 0; i < spatial; ++i) merged.push_back(value(padding[i] + p.begins[i]));
    for (std::size_t i = 0; i < spatial; ++i) merged.push_back(value(padding[spatial + i] + p.ends[i]));
    value_map attributes_to_set;
    attributes_to_set.emplace_back("padding", value(std::move(merged)));
    return op.with_attributes(value(std::move(attributes_to_set)));
}

}  // namespace kiln
