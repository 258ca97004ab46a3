// Average pooling through oneDNN (float32, no dilation). Max pooling stays
// on Kiln's own kernel: oneDNN's max drops NaNs, ONNX and PyTorch keep them.
// The blocked layouts [N, C/b, H, W, b] arrive as 3-D pooling with a unit
// window over the b channels of a block (see propagate_blocked_layout),
// which runs as oneDNN's 2-D pooling on nChw8c / nChw16c memory.
#include "ops/blocked_layout.hpp"
#include "ops/conv.hpp"
#include "ops/pool.hpp"
#include "targets/cpu/kernels/pooling/pooling_algorithms.hpp"
#include "targets/cpu/kernels/dnnl_support.hpp"

namespace kiln {

namespace ds = dnnl_support;
using dims = dnnl::memory::dims;

namespace {

bool eligible(const kernel_request& r) {
    const auto* pool = r.op.get_if<op::pooling>();
    return pool != nullptr && r.input_shapes[0].type() == dtype::float_type && pool->mode == op::pooling_mode::average;
}

std::shared_ptr<const cpu_kernel> build(const kernel_request& r, const kernel_builder&) {
    const auto* pool = r.op.get_if<op::pooling>();
    const shape& x = r.input_shapes[0];
    std::vector<std::size_t> spatial(x.lens().begin() + 2, x.lens().end());
    std::vector<std::size_t> kernel = spatial;
    if (!pool->global) kernel.assign(pool->lengths.begin(), pool->lengths.end());
    ops::window win = pool->global ? ops::make_window(pool->name(), kernel, {}, {}, {})
                                   : ops::make_window(pool->name(), kernel, pool->padding, pool->stride, pool->dilation);
    const bool blocked = x.ndim() == 5 && x.standard() &&
                         (x.lens()[4] == ops::avx2_channel_block || x.lens()[4] == ops::avx512_channel_block) &&
                         kernel[2] == 1 &&
                         win.stride[2] == 1 && win.pad_begin[2] == 0 && win.pad_end[2] == 0;
    if (blocked) {  // the unit window over a block's channels is not oneDNN's to see
        spatial.pop_back();
        kernel.pop_back();
        for (auto* v : {&win.kernel, &win.stride, &win.dilation, &win.pad_begin, &win.pad_end}) v->pop_back();
    }
    dims strides, ks, pad_l, pad_r;
    bool extra_padding = false;
    for (std::size_t i = 0; i < spatial.size(); ++i) {
        if (win.dilation[i] != 1) return nullptr;
        auto out = static_cast<dnnl::memory::dim>(r.output_shape.lens()[2 + i]);
        auto s = static_cast<dnnl::memory::dim>(win.stride[i]);
        auto k = static_cast<dnnl::memory::dim>(kernel[i]);
        auto pl = static_cast<dnnl::memory::dim>(win.pad_begin[i]);
        // The right padding that makes oneDNN's floor formula give our extent (ceil_mode).
        auto pr = (out - 1) * s + k - static_cast<dnnl::memory::dim>(spatial[i]) - pl;
        extra_padding = extra_padding || pr > static_cast<dnnl::memory::dim>(win.pad_end[i]);
        strides.push_back(s);
        ks.push_back(k);
        pad_l.push_back(pl);
        pad_r.push_back(std::max<dnnl::memory::dim>(pr, 0));
    }
    // Including the padding ceil_mode adds would divide by too much.
    if (pool->count_include_pad && extra_padding) return nullptr;
    const auto alg = pool->count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                             : dnnl::algorithm::pooling_avg_exclude_padding;
    try {
        const std::size_t block = x.lens().back();
        auto src = blocked ? ds::blocked_desc(ops::unblocked_shape("pooling", x), block) : ds::plain_desc(x);
        auto dst = blocked ? ds::blocked_desc(ops::unblocked_shape("pooling", r.output_shape), block)
                           : ds::plain_desc(r.output_shape);
        dnnl::pooling_forward::desc desc(dnnl::prop_kind::forward_inference, alg, src, dst, strides, ks, pad_l, pad_r);
        dnnl::pooling_forward::primitive_desc pd(desc, ds::user_scratchpad_attr(), ds::cpu_engine());
        return std::make_shared<ds::primitive_kernel>(
            dnnl::pooling_forward(pd), ds::arg_descs{{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}}, std::vector<int>{0, ds::primitive_kernel::result_slot},
            ds::fixed_args{}, pd.scratchpad_desc().get_size());
    } catch (const dnnl::error&) {
        return nullptr;
    }
}

}  // namespace

const kernel_algorithm onednn_average_pooling{"onednn_average", eligible, build};

}  // namespace kiln
