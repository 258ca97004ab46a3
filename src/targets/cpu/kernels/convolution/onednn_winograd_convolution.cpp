// oneDNN's Winograd convolution (its AVX-512 F(2x2, 3x3) kernel) for 3 x 3
// stride-1 layers in 16-channel blocks, where Kiln's own Winograd (8-channel
// blocks) does not run, and only over few input channels: it sums all of
// them at once after rounding transforms, and a chain of six such layers
// drifts from float64 1.2-1.3x as far as ONNX Runtime with 64 input
// channels, 1.6x with 128, 2.1x with 256 and 2.8x with 512 (oneDNN's direct
// kernel: within 1.3x). oneDNN reorders weights into its Winograd layout but
// not back, so the kernel keeps the plain weights behind the transformed
// ones (as Kiln's own Winograd does): the literal's bytes can go, a saved
// program restores them from there, and a compiled file stores both, read in
// place on load.
#include <cstring>
#include <string>

#include "ops/conv.hpp"
#include "targets/cpu/kernels/convolution/convolution_algorithms.hpp"
#include "targets/cpu/kernels/convolution/dnnl_convolution.hpp"
#include "targets/cpu/kernels/own_packed_layout.hpp"
#include "targets/cpu/kernels/packed_constant_values.hpp"

namespace kiln {

namespace {

namespace ds = dnnl_support;

// Everything that fixes the transformed weights' layout: a stored form is
// read in place only when the primitive wants exactly this one.
own_layout::geometry layout_geometry(const shape& w, const dnnl::memory::desc& transformed) {
    const dnnl_wino_desc_t& d = transformed.data.format_desc.wino_desc;
    std::int32_t scale_bits = 0;
    static_assert(sizeof scale_bits == sizeof d.adj_scale);
    std::memcpy(&scale_bits, &d.adj_scale, sizeof scale_bits);
    return {{"out_channels", static_cast<std::int64_t>(w.lens()[0])},
            {"in_channels", static_cast<std::int64_t>(w.lens()[1])},
            {"wino_format", static_cast<std::int64_t>(d.wino_format)},
            {"r", d.r},
            {"alpha", d.alpha},
            {"ic", d.ic},
            {"oc", d.oc},
            {"ic_block", d.ic_block},
            {"oc_block", d.oc_block},
            {"ic2_block", d.ic2_block},
            {"oc2_block", d.oc2_block},
            {"adj_scale_bits", scale_bits},
            {"transformed_bytes", static_cast<std::int64_t>(d.size)}};
}

// The widest input the accuracy above allows.
constexpr std::size_t max_in_channels = 64;

class onednn_winograd_kernel final : public cpu_kernel {
public:
    // `packed`: the transformed weights, then the plain ones from byte `transformed_bytes`.
    onednn_winograd_kernel(std::shared_ptr<const cpu_kernel> primitive, argument packed, std::size_t transformed_bytes,
                           own_layout::geometry geometry, bool adopted)
        : primitive_(std::move(primitive)),
          packed_(std::move(packed)),
          transformed_bytes_(transformed_bytes),
          geometry_(std::move(geometry)),
          adopted_(adopted) {}

    void run(const argument& result, const std::vector<argument>& inputs, std::byte* scratch) const override {
        primitive_->run(result, inputs, scratch);
    }
    std::size_t scratch_bytes() const override { return primitive_->scratch_bytes(); }
    bool keeps_own_copy(std::size_t index) const override { return index == 1; }
    void restore_constant(std::size_t index, const argument& into) const override {
        if (index != 1) return cpu_kernel::restore_constant(index, into);
        std::memcpy(into.data(), packed_.data() + transformed_bytes_, packed_.get_shape().bytes() - transformed_bytes_);
    }
    std::size_t own_copy_bytes() const override { return adopted_ ? 0 : packed_.get_shape().bytes(); }
    std::shared_ptr<const packed_constant> packed_copy(std::size_t index) const override {
        if (index != 1) return nullptr;
        return own_layout::export_form(onednn_winograd_convolution.name, geometry_, packed_);
    }
    std::size_t adopted_bytes() const override { return adopted_ ? packed_.get_shape().bytes() : 0; }

private:
    std::shared_ptr<const cpu_kernel> primitive_;
    argument packed_;
    std::size_t transformed_bytes_;
    own_layout::geometry geometry_;
    bool adopted_;
};

bool eligible(const kernel_request& r) {
    const auto& conv = requested_convolution(r);
    const shape& w = r.input_shapes[1];
    if (!onednn_convolution_eligible(r) || !r.is_constant(1) || conv.conv.group != 1 || w.ndim() != 4 ||
        w.lens()[1] > max_in_channels || w.lens()[2] != 3 || w.lens()[3] != 3)
        return false;
    if (conv.input_layout != op::tensor_layout::nchw16c || conv.output_layout != op::tensor_layout::nchw16c)
        return false;
    const ops::window win =
        ops::make_window(conv.name(), {3, 3}, conv.conv.padding, conv.conv.stride, conv.conv.dilation);
    for (std::size_t i = 0; i < 2; ++i)
        if (win.stride[i] != 1 || win.dilation[i] != 1) return false;
    return true;
}

std::shared_ptr<const cpu_kernel> build(const kernel_request& r, const kernel_builder&) {
    auto primitive = describe_convolution(r, dnnl::algorithm::convolution_winograd);
    if (!primitive) return nullptr;  // no Winograd kernel here (no AVX-512, a post-op it does not fuse)
    auto& [pd, plain_weights, descs, slots] = *primitive;
    const dnnl::memory::desc transformed = pd.weights_desc();
    if (transformed.data.format_kind != dnnl_format_kind_wino) return nullptr;
    const shape& w = r.input_shapes[1];
    const std::size_t transformed_bytes = transformed.get_size();
    const std::size_t bytes = transformed_bytes + w.bytes();
    own_layout::geometry geometry = layout_geometry(w, transformed);

    argument packed;
    const packed_constant* form = own_layout::adoptable(r, 1, onednn_winograd_convolution.name, geometry, bytes);
    if (form != nullptr) {
        packed = form->bytes;
    } else {
        const argument plain = constant_values(r, 1);
        packed = argument(shape{dtype::uint8_type, {bytes}});
        std::memcpy(packed.data() + transformed_bytes, plain.data(), w.bytes());
        const auto& engine = ds::cpu_engine();
        dnnl::memory from(plain_weights, engine, packed.data() + transformed_bytes);
        dnnl::memory to(transformed, engine, packed.data());
        dnnl::stream stream(engine);
        dnnl::reorder(from, to).execute(stream, from, to);
        stream.wait();
    }
    std::unordered_map<int, dnnl::memory> fixed{
        {DNNL_ARG_WEIGHTS, dnnl::memory(transformed, ds::cpu_engine(), packed.data())}};
    auto kernel =
        std::make_shared<ds::primitive_kernel>(dnnl::convolution_forward(pd), std::move(descs), std::move(slots),
                                               std::move(fixed), pd.scratchpad_desc().get_size());
    return std::make_shared<onednn_winograd_kernel>(std::move(kernel), std::move(packed), transformed_bytes,
                                                    std::move(geometry), form != nullptr);
}

}  // namespace

argument onednn_winograd_restore_weights(const packed_constant& form, const shape& whole) {
    const auto m = own_layout::entry(form, "out_channels", 1, std::int64_t{1} << 24);
    const auto c = own_layout::entry(form, "in_channels", 1, std::int64_t{1} << 24);
    const auto transformed = own_layout::entry(form, "transformed_bytes", 1, std::int64_t{1} << 40);
    if (whole.type() != dtype::float_type || whole.elements() != static_cast<std::size_t>(9 * m * c))
        fail(error_kind::parse_error, "packed weights: a oneDNN Winograd layout of " + std::to_string(m) + " x " +
                                          std::to_string(c) + " x 3 x 3 weights is stored for a " + to_string(whole) +
                                          " literal");
    own_layout::require_bytes(form, static_cast<std::size_t>(transformed) + whole.bytes());
    argument values(whole);
    std::memcpy(values.data(), form.bytes.data() + transformed, whole.bytes());
    return values;
}

// ResNet-50's 64-channel 3 x 3 layers at 56 x 56 (AVX-512): 1.4-1.7x faster
// than oneDNN's direct kernel at 1 and 2 threads.
const kernel_algorithm onednn_winograd_convolution{"onednn_winograd", eligible, build};

}  // namespace kiln
