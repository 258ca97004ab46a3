#include "targets/gpu/cuda/convolution_cudnn.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "ops/conv.hpp"
#include "ops/fused_convolution.hpp"
#include "ops/narrow_weights.hpp"
#include "ops/op_helpers.hpp"
#include "ops/post_ops.hpp"
#include "targets/gpu/cuda/convolution_epilogue.hpp"
#include "targets/gpu/cuda/cuda_check.hpp"
#include "targets/gpu/cuda/cuda_device.hpp"
#include "targets/gpu/cuda/data_movement_kernels.hpp"
#include "targets/gpu/cuda/data_movement_layout.hpp"

namespace kiln {

namespace {

// Algorithms needing more scratch than this are passed over for a leaner one.
constexpr std::size_t max_workspace_bytes = std::size_t{256} << 20;

bool ok(cudnnStatus_t status) { return status == CUDNN_STATUS_SUCCESS; }

// Algorithms whose float32 error grows with the whole input's magnitude
// (transforms) rather than each dot product's: outputs near zero could miss
// the reference's 1e-5 absolute tolerance, so float32 keeps to the direct ones.
bool transforms_input(cudnnConvolutionFwdAlgo_t algo) {
    return algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT || algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
           algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD || algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}

// The epilogue's kinds are op::post_op_kind's, value for value.
static_assert(static_cast<int>(epilogue_kind::relu) == static_cast<int>(op::post_op_kind::relu) &&
              static_cast<int>(epilogue_kind::clip) == static_cast<int>(op::post_op_kind::clip) &&
              static_cast<int>(epilogue_kind::hardswish) == static_cast<int>(op::post_op_kind::hardswish) &&
              static_cast<int>(epilogue_kind::add) == static_cast<int>(op::post_op_kind::add) &&
              static_cast<int>(epilogue_kind::mul) == static_cast<int>(op::post_op_kind::mul));

std::optional<cudnnDataType_t> cudnn_type_of(dtype t) {
    switch (t) {
    case dtype::float_type: return CUDNN_DATA_FLOAT;
    case dtype::half_type: return CUDNN_DATA_HALF;
    case dtype::bf16_type: return CUDNN_DATA_BFLOAT16;
    default: return std::nullopt;
    }
}

std::optional<convolution_element> epilogue_element_of(dtype t) {
    switch (t) {
    case dtype::float_type: return convolution_element::f32;
    case dtype::half_type: return convolution_element::f16;
    case dtype::bf16_type: return convolution_element::bf16;
    default: return std::nullopt;
    }
}

bool fits_int(std::size_t v) { return v <= static_cast<std::size_t>(INT_MAX); }

// KILN_GPU_CUDNN_FIND=0: the heuristics' first choice, nothing timed at
// compile time (faster compiles; the GPU machine's check compares the two).
bool time_algorithms() {
    const char* value = std::getenv("KILN_GPU_CUDNN_FIND");
    return value == nullptr || std::string(value) != "0";
}

// cuDNN's scratch starts this far into the workspace when the padded input comes first.
constexpr std::size_t workspace_alignment = 256;
std::size_t aligned_up(std::size_t bytes) {
    return (bytes + workspace_alignment - 1) / workspace_alignment * workspace_alignment;
}

// The input padded with zeros where the op pads more on one side than the
// other (TF "same" padding): cuDNN pads both sides alike, so the surplus is
// written into the workspace first and cuDNN reads that copy.
struct input_prepad {
    data_movement::pad_walk walk;  // input -> padded copy, constant zero fill
    std::uint64_t elements = 0;    // of the padded copy
    std::size_t element_bytes = 0;
    bool wide_index = false;
    std::size_t bytes() const { return static_cast<std::size_t>(elements) * element_bytes; }
};

// Row-major strides of `dims`.
std::vector<int> packed_strides(const std::vector<int>& dims) {
    std::vector<int> strides(dims.size(), 1);
    for (std::size_t i = dims.size() - 1; i > 0; --i) strides[i - 1] = strides[i] * dims[i];
    return strides;
}

// How the bias and post-ops are applied.
enum class fusion {
    none,           // cudnnConvolutionForward, then the epilogue kernel if there is any bias / post-op
    bias_relu,      // cudnnConvolutionBiasActivationForward, relu(conv + bias)
    bias_add_relu,  // the same with z: relu(conv + bias + residual)
};

class cudnn_convolution_kernel final : public gpu_kernel {
public:
    cudnn_convolution_kernel() {
        KILN_CUDNN(cudnnCreateTensorDescriptor(&x_desc_));
        KILN_CUDNN(cudnnCreateTensorDescriptor(&y_desc_));
        KILN_CUDNN(cudnnCreateTensorDescriptor(&bias_desc_));
        KILN_CUDNN(cudnnCreateFilterDescriptor(&w_desc_));
        KILN_CUDNN(cudnnCreateConvolutionDescriptor(&conv_desc_));
        KILN_CUDNN(cudnnCreateActivationDescriptor(&act_desc_));
    }
    ~cudnn_convolution_kernel() override {
        if (act_desc_ != nullptr) cudnnDestroyActivationDescriptor(act_desc_);
        if (conv_desc_ != nullptr) cudnnDestroyConvolutionDescriptor(conv_desc_);
        if (w_desc_ != nullptr) cudnnDestroyFilterDescriptor(w_desc_);
        if (bias_desc_ != nullptr) cudnnDestroyTensorDescriptor(bias_desc_);
        if (y_desc_ != nullptr) cudnnDestroyTensorDescriptor(y_desc_);
        if (x_desc_ != nullptr) cudnnDestroyTensorDescriptor(x_desc_);
    }
    cudnn_convolution_kernel(const cudnn_convolution_kernel&) = delete;
    cudnn_convolution_kernel& operator=(const cudnn_convolution_kernel&) = delete;

    // Describes the convolution to cuDNN and picks its algorithm; false when
    // cuDNN cannot express it or has no algorithm for it.
    bool describe(cudnnHandle_t handle, cudnnDataType_t type, const std::vector<int>& x_dims,
                  const std::vector<int>& w_dims, const std::vector<int>& y_dims, const std::vector<int>& pads,
                  const std::vector<int>& strides, const std::vector<int>& dilations, int groups) {
        const int nd = static_cast<int>(x_dims.size());
        if (!ok(cudnnSetTensorNdDescriptor(x_desc_, type, nd, x_dims.data(), packed_strides(x_dims).data())) ||
            !ok(cudnnSetTensorNdDescriptor(y_desc_, type, nd, y_dims.data(), packed_strides(y_dims).data())) ||
            !ok(cudnnSetFilterNdDescriptor(w_desc_, type, CUDNN_TENSOR_NCHW, nd, w_dims.data())) ||
            !ok(cudnnSetConvolutionNdDescriptor(conv_desc_, nd - 2, pads.data(), strides.data(), dilations.data(),
                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT)) ||
            !ok(cudnnSetConvolutionGroupCount(conv_desc_, groups)))
            return false;
        // float32 is checked against the reference at 1e-4: no TF32 tensor cores.
        const bool fp32 = type == CUDNN_DATA_FLOAT;
        if (!ok(cudnnSetConvolutionMathType(conv_desc_, fp32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH))) return false;

        // cuDNN must agree with the output extents Kiln computed.
        std::vector<int> out(y_dims.size());
        if (!ok(cudnnGetConvolutionNdForwardOutputDim(conv_desc_, x_desc_, w_desc_, nd, out.data())) || out != y_dims)
            return false;

        // The algorithms fastest first: as cuDNN times them on scratch buffers
        // of these shapes (with the heuristics' first choices, ResNet-50 at
        // batch 32 in float16 ran 1.44x behind PyTorch eager's cuDNN calls on
        // an H100), or in the heuristics' order where timing is off or fails.
        int max_count = 0;
        if (!ok(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max_count)) || max_count <= 0) return false;
        std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<std::size_t>(max_count));
        int returned = 0;
        if (time_algorithms() &&
            ok(cudnnFindConvolutionForwardAlgorithm(handle, x_desc_, w_desc_, conv_desc_, y_desc_, max_count, &returned,
                                                    perf.data())) &&
            pick_algorithm(handle, fp32, perf, returned))
            return true;
        return ok(cudnnGetConvolutionForwardAlgorithm_v7(handle, x_desc_, w_desc_, conv_desc_, y_desc_, max_count,
                                                         &returned, perf.data())) &&
               pick_algorithm(handle, fp32, perf, returned);
    }

    // The first of `returned` results that fits: float32 on FMA math and
    // direct algorithms only, a workspace within max_workspace_bytes. A
    // 16-bit convolution runs with the math type its algorithm was timed or
    // ranked with.
    bool pick_algorithm(cudnnHandle_t handle, bool fp32, const std::vector<cudnnConvolutionFwdAlgoPerf_t>& perf,
                        int returned) {
        for (int i = 0; i < returned; ++i) {
            const auto& p = perf[static_cast<std::size_t>(i)];
            if (p.status != CUDNN_STATUS_SUCCESS) continue;
            if (fp32 && (p.mathType == CUDNN_TENSOR_OP_MATH || p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
                continue;
            if (fp32 && transforms_input(p.algo)) continue;
            if (!fp32 && !ok(cudnnSetConvolutionMathType(conv_desc_, p.mathType))) continue;
            std::size_t bytes = 0;
            if (!ok(cudnnGetConvolutionForwardWorkspaceSize(handle, x_desc_, w_desc_, conv_desc_, y_desc_, p.algo,
                                                            &bytes)))
                continue;
            if (bytes > max_workspace_bytes) continue;
            algo_ = p.algo;
            workspace_ = bytes;
            return true;
        }
        return false;
    }

    // Uses cudnnConvolutionBiasActivationForward: bias [M] (standard) and relu,
    // with a residual z shaped like the result when `with_residual`.
    bool fuse_bias_relu(cudnnDataType_t type, int output_channels, int nd, bool with_residual,
                        std::size_t residual_input) {
        std::vector<int> dims(static_cast<std::size_t>(nd), 1);
        dims[1] = output_channels;
        if (!ok(cudnnSetTensorNdDescriptor(bias_desc_, type, nd, dims.data(), packed_strides(dims).data())) ||
            !ok(cudnnSetActivationDescriptor(act_desc_, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0)))
            return false;
        fusion_ = with_residual ? fusion::bias_add_relu : fusion::bias_relu;
        residual_input_ = residual_input;
        return true;
    }

    void use_epilogue(const epilogue_plan& plan, convolution_element element, bool has_bias,
                      std::size_t first_operand) {
        epilogue_ = plan;
        element_ = element;
        run_epilogue_ = true;
        has_bias_ = has_bias;
        first_operand_ = first_operand;
    }

    void pad_input_first(const input_prepad& prepad) {
        prepad_ = prepad;
        pad_input_ = true;
    }

    void own_weights(std::shared_ptr<std::byte> weights, std::size_t bytes) {
        own_weights_ = std::move(weights);
        own_bytes_ = bytes;
    }

    void run(const gpu_launch& launch, const argument& result, const std::vector<argument>& inputs) const override {
        cudnnHandle_t handle = static_cast<cuda_device&>(launch.device).cudnn(launch.stream);
        const float one = 1.0f;
        const float zero = 0.0f;
        const void* w = own_weights_ != nullptr ? static_cast<const void*>(own_weights_.get()) : inputs[1].data();
        void* y = result.data();
        // x_desc_ describes the padded copy when there is one; cuDNN's scratch follows it.
        const void* x = inputs[0].data();
        std::byte* scratch = launch.workspace;
        if (pad_input_) {
            // Zero-filled constant pad (0 bits are +0 in float32, float16 and bfloat16).
            data_movement::launch_pad(as_cuda(launch.stream), launch.workspace, x, prepad_.walk, prepad_.elements,
                                      prepad_.element_bytes, 0, prepad_.wide_index);
            x = launch.workspace;
            scratch = launch.workspace + aligned_up(prepad_.bytes());
        }
        if (fusion_ == fusion::none) {
            KILN_CUDNN(cudnnConvolutionForward(handle, &one, x_desc_, x, w_desc_, w, conv_desc_, algo_, scratch,
                                               workspace_, &zero, y_desc_, y));
        } else {
            // Without a residual, z is the result itself scaled by alpha2 = 0;
            // zeroed first so that whatever the arena held (NaN) cannot leak in
            // should cuDNN read z even then.
            const bool residual = fusion_ == fusion::bias_add_relu;
            if (!residual) KILN_CUDA(cudaMemsetAsync(y, 0, result.get_shape().bytes(), as_cuda(launch.stream)));
            const float alpha2 = residual ? 1.0f : 0.0f;
            const void* z = residual ? static_cast<const void*>(inputs[residual_input_].data()) : y;
            KILN_CUDNN(cudnnConvolutionBiasActivationForward(handle, &one, x_desc_, x, w_desc_, w, conv_desc_, algo_,
                                                             scratch, workspace_, &alpha2, y_desc_, z, bias_desc_,
                                                             inputs[2].data(), act_desc_, y_desc_, y));
        }
        if (run_epilogue_) {
            epilogue_plan plan = epilogue_;
            if (has_bias_) plan.bias = inputs[2].data();
            for (std::size_t k = first_operand_; k < inputs.size(); ++k)
                plan.operands[k - first_operand_] = inputs[k].data();
            launch_convolution_epilogue(plan, element_, result.data(), as_cuda(launch.stream));
        }
    }

    std::size_t workspace_bytes() const override {
        return pad_input_ ? aligned_up(prepad_.bytes()) + workspace_ : workspace_;
    }
    std::size_t own_device_bytes() const override { return own_bytes_; }
    std::string algorithm() const override {
        const std::string pad = pad_input_ ? "pad+" : "";
        if (fusion_ != fusion::none) return pad + "cudnn_conv_bias_relu";
        return pad + (run_epilogue_ ? "cudnn_conv+epilogue" : "cudnn_conv");
    }

private:
    cudnnTensorDescriptor_t x_desc_ = nullptr;
    cudnnTensorDescriptor_t y_desc_ = nullptr;
    cudnnTensorDescriptor_t bias_desc_ = nullptr;
    cudnnFilterDescriptor_t w_desc_ = nullptr;
    cudnnConvolutionDescriptor_t conv_desc_ = nullptr;
    cudnnActivationDescriptor_t act_desc_ = nullptr;
    cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    std::size_t workspace_ = 0;
    fusion fusion_ = fusion::none;
    std::size_t residual_input_ = 0;
    bool run_epilogue_ = false;
    bool has_bias_ = false;
    std::size_t first_operand_ = 0;
    epilogue_plan epilogue_;
    convolution_element element_ = convolution_element::f32;
    bool pad_input_ = false;
    input_prepad prepad_;
    std::shared_ptr<std::byte> own_weights_;
    std::size_t own_bytes_ = 0;
};

// The epilogue for a fused convolution's bias and post-ops, or nothing when
// the chain is longer than the kernel's fixed tables.
std::optional<epilogue_plan> make_epilogue(const op::fused_convolution& op, const std::vector<shape>& inputs,
                                           const shape& y) {
    const auto& post = op.post;
    if (post.kinds.size() > static_cast<std::size_t>(epilogue_max_steps) ||
        post.binary_count() > static_cast<std::size_t>(epilogue_max_operands) ||
        post.alpha.size() != post.kinds.size() || post.beta.size() != post.kinds.size() ||
        y.ndim() > static_cast<std::size_t>(epilogue_max_rank))
        return std::nullopt;
    epilogue_plan plan;
    plan.rank = static_cast<int>(y.ndim());
    for (std::size_t d = 0; d < y.ndim(); ++d) plan.lens[d] = y.lens()[d];
    plan.elements = y.elements();
    if (op.has_bias) {
        const shape& bias = inputs[2];
        if (bias.type() != y.type() || bias.lens() != std::vector<std::size_t>{y.lens()[1]}) return std::nullopt;
        plan.bias_stride = bias.strides()[0];
    }
    plan.steps = static_cast<int>(post.kinds.size());
    std::size_t operand = op.first_post_operand();
    int next = 0;
    for (std::size_t s = 0; s < post.kinds.size(); ++s) {
        plan.kinds[s] = static_cast<epilogue_kind>(static_cast<int>(post.kinds[s]));
        plan.alpha[s] = post.alpha[s];
        plan.beta[s] = post.beta[s];
        if (!op::is_binary(post.kinds[s])) continue;
        if (operand >= inputs.size()) return std::nullopt;
        const shape& b = inputs[operand++];
        if (b.type() != y.type() || b.ndim() > y.ndim()) return std::nullopt;
        if (ops::broadcast_lens(op.name(), {y, b}) != y.lens()) return std::nullopt;
        const auto strides = ops::broadcast_strides(b, y.lens());
        for (std::size_t d = 0; d < y.ndim(); ++d) plan.operand_strides[next][d] = strides[d];
        ++next;
    }
    if (operand != inputs.size()) return std::nullopt;
    return plan;
}

// The two chains cudnnConvolutionBiasActivationForward computes exactly.
bool is_relu_only(const op::post_op_chain& post) {
    return post.kinds.size() == 1 && post.kinds[0] == op::post_op_kind::relu;
}
bool is_add_then_relu(const op::post_op_chain& post) {
    return post.kinds.size() == 2 && post.kinds[0] == op::post_op_kind::add && post.kinds[1] == op::post_op_kind::relu;
}

}  // namespace

std::shared_ptr<const gpu_kernel> make_cudnn_convolution_kernel(const gpu_kernel_request& request) {
    const auto* fused = request.op.get_if<op::fused_convolution>();
    const op::convolution* conv = fused != nullptr ? &fused->conv : request.op.get_if<op::convolution>();
    if (conv == nullptr || request.input_shapes.size() < 2) return nullptr;
    if (fused != nullptr &&
        (fused->input_layout != op::tensor_layout::nchw || fused->output_layout != op::tensor_layout::nchw))
        return nullptr;
    if (fused == nullptr && request.input_shapes.size() != 2) return nullptr;

    const shape& x = request.input_shapes[0];
    const shape& w = request.input_shapes[1];
    const shape& y = request.output_shape;
    const std::size_t rank = x.ndim();
    if (rank < 3 || rank > 5 || w.ndim() != rank || y.ndim() != rank) return nullptr;
    if (!x.standard() || !y.standard() || x.type() != y.type()) return nullptr;
    const auto type = cudnn_type_of(x.type());
    if (!type) return nullptr;
    // Empty tensors are left to the host fallback.
    if (x.elements() == 0 || w.elements() == 0 || y.elements() == 0) return nullptr;
    if (!fits_int(x.elements()) || !fits_int(w.elements()) || !fits_int(y.elements())) return nullptr;

    // Weights: the activations' type and standard, or 16-bit constants next to
    // float32 activations (a fused_convolution of quantize_fp16), widened here.
    bool widen_weights = false;
    if (w.type() != x.type()) {
        const bool constant = request.constant_inputs.size() > 1 && request.constant_inputs[1].data() != nullptr;
        if (fused == nullptr || x.type() != dtype::float_type || !ops::is_16bit_float(w.type()) || !constant)
            return nullptr;
        widen_weights = true;
    } else if (!w.standard()) {
        return nullptr;
    }

    // The window, as op::convolution builds it. cuDNN pads symmetrically only:
    // it gets min(begin, end) on each side, and the surplus of the larger side
    // is padded into a copy of the input first (input_prepad).
    const std::vector<std::size_t> kernel(w.lens().begin() + 2, w.lens().end());
    const ops::window win = ops::make_window(conv->name(), kernel, conv->padding, conv->stride, conv->dilation);
    if (conv->group < 1 || !fits_int(static_cast<std::size_t>(conv->group))) return nullptr;
    const std::size_t spatial = rank - 2;
    std::vector<std::size_t> both_sides(spatial), extra_begin(spatial), padded_lens = x.lens();
    bool pad_input = false;
    for (std::size_t s = 0; s < spatial; ++s) {
        both_sides[s] = std::min(win.pad_begin[s], win.pad_end[s]);
        extra_begin[s] = win.pad_begin[s] - both_sides[s];
        const std::size_t extra_end = win.pad_end[s] - both_sides[s];
        if (!fits_int(extra_begin[s]) || !fits_int(extra_end)) return nullptr;
        padded_lens[s + 2] += extra_begin[s] + extra_end;
        pad_input = pad_input || extra_begin[s] != 0 || extra_end != 0;
    }
    input_prepad prepad;
    if (pad_input) {
        const shape padded{x.type(), padded_lens};
        if (!fits_int(padded.elements()) || !data_movement::walkable(x)) return nullptr;
        prepad.walk.rank = static_cast<int>(rank);
        prepad.walk.mode = data_movement::pad_walk_mode::constant;
        for (std::size_t d = 0; d < rank; ++d) {
            prepad.walk.out_lens[d] = padded_lens[d];
            prepad.walk.in_lens[d] = x.lens()[d];
            prepad.walk.in_strides[d] = x.strides()[d];
            prepad.walk.begin[d] = d >= 2 ? static_cast<std::int64_t>(extra_begin[d - 2]) : 0;
        }
        prepad.elements = padded.elements();
        prepad.element_bytes = x.element_size();
        prepad.wide_index = data_movement::needs_wide_index({prepad.elements, data_movement::span(x)});
    }

    // cuDNN wants at least two spatial dimensions: 1-D runs as [.., 1, W].
    const bool one_d = rank == 3;
    std::vector<int> x_dims, w_dims, y_dims, pads, strides, dilations;
    for (std::size_t d = 0; d < rank; ++d) {
        if (one_d && d == 2) {
            x_dims.push_back(1);
            w_dims.push_back(1);
            y_dims.push_back(1);
            pads.push_back(0);
            strides.push_back(1);
            dilations.push_back(1);
        }
        x_dims.push_back(static_cast<int>(padded_lens[d]));
        w_dims.push_back(static_cast<int>(w.lens()[d]));
        y_dims.push_back(static_cast<int>(y.lens()[d]));
        if (d >= 2) {
            const std::size_t s = d - 2;
            if (!fits_int(both_sides[s]) || !fits_int(win.stride[s]) || !fits_int(win.dilation[s])) return nullptr;
            pads.push_back(static_cast<int>(both_sides[s]));
            strides.push_back(static_cast<int>(win.stride[s]));
            dilations.push_back(static_cast<int>(win.dilation[s]));
        }
    }

    auto& device = static_cast<cuda_device&>(request.device);
    auto kernel_ptr = std::make_shared<cudnn_convolution_kernel>();
    if (!kernel_ptr->describe(device.cudnn(nullptr), *type, x_dims, w_dims, y_dims, pads, strides, dilations,
                              static_cast<int>(conv->group)))
        return nullptr;
    if (pad_input) kernel_ptr->pad_input_first(prepad);

    if (fused != nullptr) {
        const auto& post = fused->post;
        const std::size_t first = fused->first_post_operand();
        if (request.input_shapes.size() != first + post.binary_count()) return nullptr;
        // cudnnConvolutionBiasActivationForward: float32 (FLOAT_CONFIG) and
        // float16 (PSEUDO_HALF_CONFIG: bias of the data's type, float math);
        // bfloat16 is not among its documented configurations, so it takes the epilogue.
        const bool cudnn_fusable_type = y.type() == dtype::float_type || y.type() == dtype::half_type;
        const bool bias_standard = fused->has_bias && cudnn_fusable_type && request.input_shapes[2].standard() &&
                                   request.input_shapes[2].type() == y.type() &&
                                   request.input_shapes[2].lens() == std::vector<std::size_t>{y.lens()[1]};
        const int nd = static_cast<int>(x_dims.size());
        bool fused_in_cudnn = false;
        if (bias_standard && is_relu_only(post)) {
            fused_in_cudnn = kernel_ptr->fuse_bias_relu(*type, y_dims[1], nd, false, 0);
        } else if (bias_standard && is_add_then_relu(post)) {
            const shape& z = request.input_shapes[first];
            if (z.type() == y.type() && z.standard() && z.lens() == y.lens())
                fused_in_cudnn = kernel_ptr->fuse_bias_relu(*type, y_dims[1], nd, true, first);
        }
        if (!fused_in_cudnn && (fused->has_bias || !post.empty())) {
            auto plan = make_epilogue(*fused, request.input_shapes, y);
            const auto element = epilogue_element_of(y.type());
            if (!plan || !element) return nullptr;
            kernel_ptr->use_epilogue(*plan, *element, fused->has_bias, first);
        }
    }

    if (widen_weights) {
        const argument wide = ops::float32_weights(request.constant_inputs[1]);
        const std::size_t bytes = wide.get_shape().bytes();
        auto weights = device.allocate_shared(bytes);
        device.copy_to_device(weights.get(), wide.data(), bytes, nullptr);
        device.synchronize(nullptr);
        kernel_ptr->own_weights(std::move(weights), bytes);
    }
    return kernel_ptr;
}

}  // namespace kiln
