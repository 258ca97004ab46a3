// 2-D max pooling of int8 / uint8 codes through oneDNN, so that a quantized
// network's pooling stays in int8 (fuse_quantized_ops moves the dequantize
// below it). oneDNN pools channels-last codes fastest: other layouts are
// reordered on the way in and out. Integer codes have no NaN to keep.
#include "ops/conv.hpp"
#include "ops/pool.hpp"
#include "targets/cpu/kernels/dnnl_support.hpp"
#include "targets/cpu/kernels/int8_support.hpp"
#include "targets/cpu/kernels/pooling/pooling_algorithms.hpp"

namespace kiln {

namespace {

namespace ds = dnnl_support;
namespace is = int8_support;
using dims = dnnl::memory::dims;

bool eligible(const kernel_request& r) {
    const auto* pool = r.op.get_if<op::pooling>();
    const dtype t = r.input_shapes[0].type();
    return pool != nullptr && pool->mode == op::pooling_mode::max && r.input_shapes[0].ndim() == 4 &&
           (t == dtype::int8_type || t == dtype::uint8_type);
}

std::shared_ptr<const cpu_kernel> build(const kernel_request& r, const kernel_builder&) {
    const auto* pool = r.op.get_if<op::pooling>();
    const shape& x = r.input_shapes[0];
    const shape& y = r.output_shape;
    std::vector<std::size_t> spatial(x.lens().begin() + 2, x.lens().end());
    std::vector<std::size_t> kernel = spatial;
    if (!pool->global) kernel.assign(pool->lengths.begin(), pool->lengths.end());
    const ops::window win = pool->global ? ops::make_window(pool->name(), kernel, {}, {}, {})
                                         : ops::make_window(pool->name(), kernel, pool->padding, pool->stride, pool->dilation);
    dims strides, ks, pad_l, pad_r;
    for (std::size_t i = 0; i < 2; ++i) {
        if (win.dilation[i] != 1) return nullptr;
        const auto out = static_cast<dnnl::memory::dim>(y.lens()[2 + i]);
        const auto s = static_cast<dnnl::memory::dim>(win.stride[i]);
        const auto k = static_cast<dnnl::memory::dim>(kernel[i]);
        const auto pl = static_cast<dnnl::memory::dim>(win.pad_begin[i]);
        // The right padding that makes oneDNN's floor formula give our extent (ceil_mode).
        strides.push_back(s);
        ks.push_back(k);
        pad_l.push_back(pl);
        pad_r.push_back(std::max<dnnl::memory::dim>((out - 1) * s + k - static_cast<dnnl::memory::dim>(spatial[i]) - pl, 0));
    }
    const shape inner_x{x.type(), x.lens(), op::channels_last_strides(x.lens())};
    const shape inner_y{y.type(), y.lens(), op::channels_last_strides(y.lens())};
    try {
        const auto src = is::typed_desc(inner_x);
        const auto dst = is::typed_desc(inner_y);
        dnnl::pooling_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::pooling_max, src, dst,
                                         strides, ks, pad_l, pad_r);
        dnnl::pooling_forward::primitive_desc pd(desc, ds::user_scratchpad_attr(), ds::cpu_engine());
        auto inner = std::make_shared<ds::primitive_kernel>(
            dnnl::pooling_forward(pd), ds::arg_descs{{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}},
            std::vector<int>{0, ds::primitive_kernel::result_slot}, ds::fixed_args{}, pd.scratchpad_desc().get_size());
        return is::staged(inner, x, inner_x, y, inner_y);
    } catch (const dnnl::error&) {
        return nullptr;
    }
}

}  // namespace

const kernel_algorithm onednn_int8_max_pooling{"onednn_int8_max", eligible, build};

}  // namespace kiln
