// reduce_sum / mean / max / min / prod over any set of axes of an input with
// any strides (the device code walks the kept and the reduced dims separately),
// and argmax / argmin along one axis.
#include <string>
#include <vector>

#include "ops/op_helpers.hpp"
#include "ops/reduce.hpp"
#include "targets/gpu/cuda/cuda_device.hpp"
#include "targets/gpu/cuda/reduction_factories.hpp"
#include "targets/gpu/cuda/reduction_shapes.hpp"

namespace kiln {

namespace {

using cuda_reduce::reduce_kind;

class cuda_reduce_kernel final : public gpu_kernel {
public:
    cuda_reduce_kernel(reduce_kind kind, cuda_reduce::element_type type, std::vector<bool> reduced)
        : kind_(kind), type_(type), reduced_(std::move(reduced)) {}

    void run(const gpu_launch& launch, const argument& result, const std::vector<argument>& inputs) const override {
        const shape& in = inputs[0].get_shape();
        std::vector<std::size_t> kept_lens, kept_strides, reduced_lens, reduced_strides;
        std::size_t count = 1;
        for (std::size_t d = 0; d < in.ndim(); ++d) {
            if (reduced_[d]) {
                reduced_lens.push_back(in.lens()[d]);
                reduced_strides.push_back(in.strides()[d]);
                count *= in.lens()[d];
            } else {
                kept_lens.push_back(in.lens()[d]);
                kept_strides.push_back(in.strides()[d]);
            }
        }
        cuda_reduce::reduce_params p;
        p.outputs = result.get_shape().elements();
        p.count = count;
        p.kept = cuda_reduce::make_dims(kept_lens, kept_strides);
        p.reduced = cuda_reduce::make_dims(reduced_lens, reduced_strides);
        cuda_reduce::launch_reduce(type_, kind_, inputs[0].data(), result.data(), p, as_cuda(launch.stream));
    }
    std::string algorithm() const override { return "cuda_reduce"; }

private:
    reduce_kind kind_;
    cuda_reduce::element_type type_;
    std::vector<bool> reduced_;  // per input dim
};

class cuda_arg_reduce_kernel final : public gpu_kernel {
public:
    cuda_arg_reduce_kernel(cuda_reduce::element_type type, std::size_t axis, bool want_max, bool select_last)
        : type_(type), axis_(axis), want_max_(want_max), select_last_(select_last) {}

    void run(const gpu_launch& launch, const argument& result, const std::vector<argument>& inputs) const override {
        const shape& in = inputs[0].get_shape();
        cuda_reduce::arg_reduce_params p;
        p.outputs = result.get_shape().elements();
        p.length = in.lens()[axis_];
        p.kept = cuda_reduce::make_dims(cuda_reduce::without(in.lens(), axis_), cuda_reduce::without(in.strides(), axis_));
        p.step = in.strides()[axis_];
        p.want_max = want_max_;
        p.select_last = select_last_;
        cuda_reduce::launch_arg_reduce(type_, inputs[0].data(), result.data_as<std::int64_t>(), p,
                                       as_cuda(launch.stream));
    }
    std::string algorithm() const override { return "cuda_arg_reduce"; }

private:
    cuda_reduce::element_type type_;
    std::size_t axis_;
    bool want_max_;
    bool select_last_;
};

// The kind and attributes of a reduce_* op, or null for other ops.
const op::reduce_op* as_reduce(const operation& o, reduce_kind& kind) {
    if (const auto* r = o.get_if<op::reduce_sum>()) return kind = reduce_kind::sum, r;
    if (const auto* r = o.get_if<op::reduce_mean>()) return kind = reduce_kind::mean, r;
    if (const auto* r = o.get_if<op::reduce_max>()) return kind = reduce_kind::max, r;
    if (const auto* r = o.get_if<op::reduce_min>()) return kind = reduce_kind::min, r;
    if (const auto* r = o.get_if<op::reduce_prod>()) return kind = reduce_kind::prod, r;
    return nullptr;
}

}  // namespace

static std::shared_ptr<const gpu_kernel> make_cuda_arg_reduce_kernel(const gpu_kernel_request& request) {
    const auto* max = request.op.get_if<op::argmax>();
    const auto* min = request.op.get_if<op::argmin>();
    const op::arg_reduce_op* r = max ? static_cast<const op::arg_reduce_op*>(max) : min;
    if (!r || request.input_shapes.size() != 1) return nullptr;
    const shape& in = request.input_shapes[0];
    const shape& out = request.output_shape;
    if (in.ndim() == 0 || !cuda_reduce::fits_walks({in, out}) || !out.standard() || out.type() != dtype::int64_type)
        return nullptr;
    const auto type = cuda_reduce::element_type_of(in.type());
    if (!type) return nullptr;
    const std::size_t axis = ops::normalize_axis(request.op.name(), r->axis, in.ndim());
    if (in.lens()[axis] == 0 || out.elements() != in.elements() / in.lens()[axis]) return nullptr;
    return std::make_shared<cuda_arg_reduce_kernel>(*type, axis, max != nullptr, r->select_last_index);
}

std::shared_ptr<const gpu_kernel> make_cuda_reduce_kernel(const gpu_kernel_request& request) {
    reduce_kind kind{};
    const op::reduce_op* r = as_reduce(request.op, kind);
    if (!r) return make_cuda_arg_reduce_kernel(request);
    if (request.input_shapes.size() != 1) return nullptr;
    const shape& in = request.input_shapes[0];
    if (!cuda_reduce::fits_walks({in, request.output_shape}) || !request.output_shape.standard()) return nullptr;
    const auto type = cuda_reduce::element_type_of(in.type());
    if (!type || request.output_shape.type() != in.type()) return nullptr;
    // Empty axes reduce every dim; the others are normalized as the op's compute_shape did.
    std::vector<bool> reduced(in.ndim(), r->axes.empty());
    for (auto a : ops::normalize_axes(request.op.name(), r->axes, in.ndim())) reduced[a] = true;
    std::size_t kept = 1;
    for (std::size_t d = 0; d < in.ndim(); ++d)
        if (!reduced[d]) kept *= in.lens()[d];
    if (kept != request.output_shape.elements()) return nullptr;
    return std::make_shared<cuda_reduce_kernel>(kind, *type, std::move(reduced));
}

}  // namespace kiln
