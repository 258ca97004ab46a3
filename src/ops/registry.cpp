// Every op Kiln knows, listed explicitly. Adding an op: define it in its
// family file and add one line here.
#include <algorithm>
#include <map>

#include "kiln/builtin_ops.hpp"
#include "kiln/op_registry.hpp"
#include "ops/bitcast.hpp"
#include "ops/blocked_layout.hpp"
#include "ops/control.hpp"
#include "ops/conv.hpp"
#include "ops/conv_transpose.hpp"
#include "ops/cumsum.hpp"
#include "ops/deform_conv.hpp"
#include "ops/dft.hpp"
#include "ops/elementwise.hpp"
#include "ops/fused_attention.hpp"
#include "ops/fused_concat_pointwise.hpp"
#include "ops/fused_convolution.hpp"
#include "ops/fused_quantized_linalg.hpp"
#include "ops/fused_dot.hpp"
#include "ops/fused_pointwise.hpp"
#include "ops/grid_sample.hpp"
#include "ops/index.hpp"
#include "ops/index_scatter.hpp"
#include "ops/linalg.hpp"
#include "ops/norm.hpp"
#include "ops/pool.hpp"
#include "ops/quant.hpp"
#include "ops/quantized_linalg.hpp"
#include "ops/quantized_norm.hpp"
#include "ops/reduce.hpp"
#include "ops/resize.hpp"
#include "ops/roi_align.hpp"
#include "ops/shape_ops.hpp"
#include "ops/topk.hpp"
#include "ops/transcendental.hpp"

namespace kiln {

namespace {

class op_registry {
public:
    template <class Op>
    void add() {
        Op prototype{};
        std::string name = prototype.name();
        ops_.emplace(std::move(name), operation(std::move(prototype)));
    }
    const operation* find(const std::string& name) const {
        auto it = ops_.find(name);
        return it == ops_.end() ? nullptr : &it->second;
    }
    std::vector<std::string> names() const {
        std::vector<std::string> out;
        for (const auto& [name, op] : ops_)
            if (name.front() != '@') out.push_back(name);
        return out;
    }

private:
    std::map<std::string, operation> ops_;
};

op_registry build_registry() {
    op_registry r;
    // structure
    r.add<op::param>();
    r.add<op::literal_op>();
    r.add<op::return_op>();
    // control flow
    r.add<op::if_op>();
    r.add<op::loop>();
    r.add<op::get_tuple_elem>();
    // elementwise
    r.add<op::abs>();
    r.add<op::neg>();
    r.add<op::exp>();
    r.add<op::log>();
    r.add<op::sqrt>();
    r.add<op::rsqrt>();
    r.add<op::reciprocal>();
    r.add<op::sin>();
    r.add<op::cos>();
    r.add<op::tanh>();
    r.add<op::sigmoid>();
    r.add<op::relu>();
    r.add<op::erf>();
    r.add<op::floor>();
    r.add<op::ceil>();
    r.add<op::round>();
    r.add<op::sign>();
    r.add<op::logical_not>();
    r.add<op::add>();
    r.add<op::sub>();
    r.add<op::mul>();
    r.add<op::div>();
    r.add<op::pow>();
    r.add<op::max>();
    r.add<op::min>();
    r.add<op::mod>();
    r.add<op::equal>();
    r.add<op::less>();
    r.add<op::greater>();
    r.add<op::logical_and>();
    r.add<op::logical_or>();
    r.add<op::logical_xor>();
    r.add<op::where>();
    r.add<op::clip>();
    r.add<op::convert>();
    r.add<op::gelu>();
    // transcendental
    r.add<op::tan>();
    r.add<op::asin>();
    r.add<op::acos>();
    r.add<op::atan>();
    r.add<op::sinh>();
    r.add<op::cosh>();
    r.add<op::asinh>();
    r.add<op::acosh>();
    r.add<op::atanh>();
    r.add<op::bitwise_not>();
    r.add<op::bitwise_and>();
    r.add<op::bitwise_or>();
    r.add<op::bitwise_xor>();
    r.add<op::bitshift>();
    // shape
    r.add<op::reshape>();
    r.add<op::transpose>();
    r.add<op::broadcast>();
    r.add<op::slice>();
    r.add<op::concat>();
    r.add<op::squeeze>();
    r.add<op::unsqueeze>();
    r.add<op::flatten>();
    r.add<op::split>();
    r.add<op::contiguous>();
    r.add<op::pad>();
    // index
    r.add<op::gather>();
    r.add<op::gather_elements>();
    r.add<op::gather_nd>();
    r.add<op::scatter_elements>();
    r.add<op::scatter_nd>();
    r.add<op::scatter_nd_in_place>();
    r.add<op::topk>();
    r.add<op::cumsum>();
    r.add<op::cumprod>();
    r.add<op::bitcast>();
    r.add<op::grid_sample>();
    r.add<op::roi_align>();
    r.add<op::deform_conv>();
    r.add<op::dft>();
    // quant
    r.add<op::quantize_linear>();
    r.add<op::dequantize_linear>();
    r.add<op::quant_convolution>();
    r.add<op::quant_dot>();
    // reduce
    r.add<op::reduce_sum>();
    r.add<op::reduce_mean>();
    r.add<op::reduce_max>();
    r.add<op::reduce_min>();
    r.add<op::reduce_prod>();
    r.add<op::argmax>();
    r.add<op::argmin>();
    // linalg
    r.add<op::dot>();
    // conv
    r.add<op::convolution>();
    r.add<op::convolution_transpose>();
    r.add<op::resize>();
    // pool
    r.add<op::pooling>();
    // norm
    r.add<op::softmax>();
    r.add<op::log_softmax>();
    r.add<op::batch_norm_inference>();
    r.add<op::layer_norm>();
    r.add<op::rms_norm>();
    r.add<op::softmax_quantize>();
    r.add<op::layer_norm_quantize>();
    // fused (made by the optimizer: kernels with post-ops, layout changes)
    r.add<op::fused_convolution>();
    r.add<op::fused_dot>();
    r.add<op::fused_quant_convolution>();
    r.add<op::fused_quant_dot>();
    r.add<op::fused_pointwise>();
    r.add<op::fused_concat_pointwise>();
    r.add<op::fused_attention>();
    r.add<op::to_blocked>();
    r.add<op::from_blocked>();
    return r;
}

const op_registry& registry() {
    static const op_registry r = build_registry();
    return r;
}

}  // namespace

operation make_op(const std::string& name, const value& attributes) {
    const operation* proto = registry().find(name);
    if (proto == nullptr) {
        auto names = registry().names();
        // Suggest ops sharing a prefix to make typos obvious.
        std::string similar;
        for (const auto& n : names)
            if (!name.empty() && n.compare(0, std::min<std::size_t>(3, name.size()), name, 0, 3) == 0)
                similar += (similar.empty() ? "" : ", ") + n;
        fail(error_kind::not_implemented, "unknown op '" + name + "'" +
                                              (similar.empty() ? "" : " (similar: " + similar + ")") +
                                              "; get_operators() lists all " + std::to_string(names.size()) + " ops");
    }
    return attributes.is_null() ? *proto : proto->with_attributes(attributes);
}

bool has_op(const std::string& name) {
    return registry().find(name) != nullptr;
}

std::vector<std::string> get_operators() {
    return registry().names();
}

}  // namespace kiln
