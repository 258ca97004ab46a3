#include "targets/gpu/cuda/pooling_cuda.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "ops/conv.hpp"
#include "ops/pool.hpp"
#include "targets/gpu/cuda/cuda_device.hpp"
#include "targets/gpu/cuda/pooling_kernel.hpp"

namespace kiln {

namespace {

std::optional<pooling_element> pooling_element_of(dtype t) {
    switch (t) {
    case dtype::float_type: return pooling_element::f32;
    case dtype::double_type: return pooling_element::f64;
    case dtype::half_type: return pooling_element::f16;
    case dtype::bf16_type: return pooling_element::bf16;
    case dtype::int8_type: return pooling_element::i8;
    case dtype::uint8_type: return pooling_element::u8;
    case dtype::int32_type: return pooling_element::i32;
    case dtype::int64_type: return pooling_element::i64;
    default: return std::nullopt;
    }
}

bool is_floating(pooling_element e) {
    return e == pooling_element::f32 || e == pooling_element::f64 || e == pooling_element::f16 ||
           e == pooling_element::bf16;
}

class cuda_pooling_kernel final : public gpu_kernel {
public:
    cuda_pooling_kernel(const pooling_geometry& g, pooling_element type) : geometry_(g), type_(type) {}

    void run(const gpu_launch& launch, const argument& result, const std::vector<argument>& inputs) const override {
        launch_pooling(geometry_, type_, inputs[0].data(), result.data(), as_cuda(launch.stream));
    }
    std::string algorithm() const override { return "cuda_pooling"; }

private:
    pooling_geometry geometry_;
    pooling_element type_;
};

}  // namespace

std::shared_ptr<const gpu_kernel> make_cuda_pooling_kernel(const gpu_kernel_request& request) {
    const auto* op = request.op.get_if<op::pooling>();
    if (op == nullptr || request.input_shapes.size() != 1) return nullptr;
    const shape& x = request.input_shapes[0];
    const shape& y = request.output_shape;
    if (x.type() != y.type() || !y.standard() || x.ndim() < 3 || x.ndim() > 5 || y.ndim() != x.ndim()) return nullptr;
    const auto type = pooling_element_of(x.type());
    if (!type) return nullptr;
    const bool max = op->mode == op::pooling_mode::max;
    if (!max && !is_floating(*type)) return nullptr;

    // The window as op::pooling's reference builds it.
    const std::vector<std::size_t> spatial(x.lens().begin() + 2, x.lens().end());
    ops::window w;
    if (op->global) {
        w = ops::make_window(op->name(), spatial, {}, {}, {});
    } else {
        if (op->lengths.size() != spatial.size()) return nullptr;
        std::vector<std::size_t> kernel;
        for (auto l : op->lengths) {
            if (l < 1) return nullptr;
            kernel.push_back(static_cast<std::size_t>(l));
        }
        w = ops::make_window(op->name(), kernel, op->padding, op->stride, op->dilation);
    }
    // The result must have the extents this window gives (it does when the
    // shape came from compute_shape; anything else is not ours to guess).
    const auto out = ops::window_output_lens(op->name(), spatial, w, op->ceil_mode && !op->global);
    if (!std::equal(out.begin(), out.end(), y.lens().begin() + 2) || y.lens()[0] != x.lens()[0] ||
        y.lens()[1] != x.lens()[1])
        return nullptr;

    const ops::view5 xv = ops::as_5d(x);
    const ops::view5 yv = ops::as_5d(y);
    const ops::window3 w3 = ops::as_3d(w);
    pooling_geometry g;
    for (int d = 0; d < 5; ++d) {
        g.x_lens[d] = xv.lens[d];
        g.x_strides[d] = xv.strides[d];
        g.y_lens[d] = yv.lens[d];
    }
    for (int d = 0; d < 3; ++d) {
        g.kernel[d] = w3.kernel[d];
        g.stride[d] = w3.stride[d];
        g.dilation[d] = w3.dilation[d];
        g.pad_begin[d] = w3.pad_begin[d];
        g.pad_end[d] = w3.pad_end[d];
    }
    g.elements = y.elements();
    g.max = max;
    g.count_include_pad = op->count_include_pad;
    return std::make_shared<cuda_pooling_kernel>(g, *type);
}

}  // namespace kiln
