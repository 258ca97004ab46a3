#include "ops/op_helpers.hpp"

namespace kiln::ops {

void expect_inputs(const std::string& op, const std::vector<shape>& inputs, std::size_t n) {
    if (inputs.size() != n)
        fail(op + ": expected " + std::to_string(n) + " input" + (n == 1 ? "" : "s") + ", got " +
             std::to_string(inputs.size()));
}

void expect_inputs(const std::string& op, const std::vector<shape>& inputs, std::size_t lo, std::size_t hi) {
    if (inputs.size() < lo || inputs.size() > hi)
        fail(op + ": expected " + std::to_string(lo) + " to " + std::to_string(hi) + " inputs, got " +
             std::to_string(inputs.size()));
}

void expect_same_type(const std::string& op, const std::vector<shape>& inputs) {
    for (std::size_t i = 1; i < inputs.size(); ++i)
        if (inputs[i].type() != inputs[0].type())
            fail(error_kind::type_error, op + ": input " + std::to_string(i) + " has dtype " +
                                             to_string(inputs[i].type()) + " but input 0 has " +
                                             to_string(inputs[0].type()));
}

void expect_floating(const std::string& op, const shape& s, const std::string& which) {
    if (!is_floating(s.type()))
        fail(error_kind::type_error, op + ": " + which + " must be a floating-point type, got " + to_string(s.type()));
}

void expect_type(const std::string& op, const shape& s, dtype t, const std::string& which) {
    if (s.type() != t)
        fail(error_kind::type_error, op + ": " + which + " must be " + to_string(t) + ", got " + to_string(s.type()));
}

std::size_t normalize_axis(const std::string& op, std::int64_t axis, std::size_t rank) {
    auto r = static_cast<std::int64_t>(rank);
    if (axis < -r || axis >= r)
        fail(op + ": axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}

std::vector<std::size_t> normalize_axes(const std::string& op, const std::vector<std::int64_t>& axes, std::size_t rank) {
    std::vector<std::size_t> out;
    for (auto a : axes) {
        std::size_t n = normalize_axis(op, a, rank);
        for (auto seen : out)
            if (seen == n) fail(op + ": axis " + std::to_string(a) + " is given more than once");
        out.push_back(n);
    }
    return out;
}

std::vector<std::size_t> broadcast_lens(const std::string& op, const std::vector<shape>& inputs) {
    std::size_t rank = 0;
    for (const auto& s : inputs) rank = std::max(rank, s.ndim());
    std::vector<std::size_t> out(rank, 1);
    for (std::size_t k = 0; k < inputs.size(); ++k) {
        const auto& lens = inputs[k].lens();
        std::size_t pad = rank - lens.size();
        for (std::size_t i = 0; i < lens.size(); ++i) {
            std::size_t& o = out[pad + i];
            if (lens[i] == o || lens[i] == 1) continue;
            if (o == 1) {
                o = lens[i];
                continue;
            }
            std::string all;
            for (const auto& s : inputs) all += (all.empty() ? "" : " and ") + to_string(s.lens());
            fail(op + ": shapes " + all + " cannot be broadcast together (dimension " + std::to_string(pad + i) +
                 ": " + std::to_string(o) + " vs " + std::to_string(lens[i]) + ")");
        }
    }
    return out;
}

std::vector<std::size_t> broadcast_strides(const shape& in, const std::vector<std::size_t>& out_lens) {
    std::vector<std::size_t> strides(out_lens.size(), 0);
    std::size_t pad = out_lens.size() - in.ndim();
    for (std::size_t i = 0; i < in.ndim(); ++i)
        strides[pad + i] = in.lens()[i] == 1 ? 0 : in.strides()[i];
    return strides;
}

}  // namespace kiln::ops
