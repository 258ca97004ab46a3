// widened_panel_matmul: a product whose constant 2-D weights [K, N] are
// float16 / bfloat16 or int8 codes. The columns are cut into panels of `panel` columns;
// each thread widens one panel at a time into a float32 buffer of its own
// (sized to stay in its L2 cache) and runs oneDNN's float32 matmul of the
// whole source against it, bias and post-ops included, writing that panel's
// columns of the result. The weights are read from memory once per run at 2
// bytes a value (1 for int8); a batch-1 product (GPT-2's 768 x 50257 output layer) is
// bounded by exactly that.
#include <omp.h>

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "ops/fused_dot.hpp"
#include "ops/op_helpers.hpp"
#include "targets/cpu/kernels/copy/widen_to_float32.hpp"
#include "targets/cpu/kernels/cpu_features.hpp"
#include "targets/cpu/kernels/dnnl_support.hpp"
#include "targets/cpu/kernels/matmul/matmul_algorithms.hpp"
#include "targets/cpu/kernels/narrow_weights/narrow_weights_algorithms.hpp"
#include "targets/cpu/kernels/pointwise/pointwise_avx2.hpp"
#include "targets/cpu/kernels/scratch_alignment.hpp"

namespace kiln {

namespace {

namespace ds = dnnl_support;

// A binary post-op operand seen as [rows, N] with unit column stride: its
// row stride, 0 when it is broadcast along the rows.
struct operand_layout {
    std::size_t row_stride = 0;
};

// The product as this kernel runs it: source [rows, K] row-major, weights
// [K, N], result [rows, N] row-major.
struct product_plan {
    std::size_t rows = 0, inner = 0, cols = 0;
    // Weights stored [N, K] and read transposed (a tied embedding): a panel
    // then holds its columns' K values contiguously, oneDNN reads it transposed.
    bool transposed_weights = false;
    std::vector<operand_layout> operands;
};

std::optional<product_plan> plan_product(const op::fused_dot& fused, const kernel_request& r) {
    const shape& a = r.input_shapes[0];
    const shape& b = r.input_shapes[1];
    const shape& out = r.output_shape;
    if (a.type() != dtype::float_type || b.ndim() != 2 || !a.standard() || !out.standard()) return std::nullopt;
    product_plan p;
    p.inner = b.lens()[0];
    p.cols = b.lens()[1];
    p.transposed_weights = !b.standard();
    if (p.transposed_weights && (b.strides()[0] != 1 || b.strides()[1] != p.inner)) return std::nullopt;
    if (p.inner == 0 || p.cols == 0 || a.lens().back() != p.inner || out.elements() == 0) return std::nullopt;
    p.rows = a.elements() / p.inner;
    if (out.elements() != p.rows * p.cols) return std::nullopt;
    for (std::size_t i = fused.first_post_operand(); i < r.input_shapes.size(); ++i) {
        const auto strides = ops::broadcast_strides(r.input_shapes[i], out.lens());
        if (r.input_shapes[i].type() != dtype::float_type) return std::nullopt;
        if (p.cols > 1 && strides.back() != 1) return std::nullopt;
        bool broadcast_rows = true, standard_rows = true;
        std::size_t expected = p.cols;
        for (std::size_t d = out.ndim() - 1; d-- > 0;) {
            if (out.lens()[d] == 1) continue;
            broadcast_rows = broadcast_rows && strides[d] == 0;
            standard_rows = standard_rows && strides[d] == expected;
            expected *= out.lens()[d];
        }
        if (!broadcast_rows && !standard_rows) return std::nullopt;
        p.operands.push_back({broadcast_rows ? 0 : p.cols});
    }
    return p;
}

// The panel width: a float32 panel of about 1 MiB (L2 holds it beside the
// source rows), a multiple of 16, and at least two panels per thread so
// that the threads finish together (narrower panels slow the gemm down).
std::size_t panel_width(const product_plan& p, int threads) {
    constexpr std::size_t panel_bytes = std::size_t{1} << 20;
    const std::size_t cap = std::max<std::size_t>(16, panel_bytes / (p.inner * sizeof(float)) / 16 * 16);
    const std::size_t spread =
        (p.cols + 2 * static_cast<std::size_t>(threads) - 1) / (2 * static_cast<std::size_t>(threads));
    return std::min(p.cols, std::clamp<std::size_t>((spread + 15) / 16 * 16, 16, cap));
}

dnnl::memory::dim dim(std::size_t v) {
    return static_cast<dnnl::memory::dim>(v);
}

// One oneDNN matmul for panels `width` columns wide.
struct panel_primitive {
    dnnl::matmul matmul;
    dnnl::memory::desc src, weights, dst, bias;
    std::vector<dnnl::memory::desc> operands;
    std::size_t scratchpad_bytes = 0;
};

std::optional<panel_primitive> make_panel_primitive(const op::fused_dot& fused, const product_plan& p,
                                                    std::size_t width) {
    panel_primitive k;
    k.src = ds::strided_desc({p.rows, p.inner}, {p.inner, 1});
    k.weights = p.transposed_weights ? ds::strided_desc({p.inner, width}, {1, p.inner})
                                     : ds::strided_desc({p.inner, width}, {width, 1});
    k.dst = ds::strided_desc({p.rows, width}, {p.cols, 1});
    k.bias = ds::strided_desc({1, width}, {0, 1});
    for (const auto& o : p.operands) k.operands.push_back(ds::strided_desc({p.rows, width}, {o.row_stride, 1}));
    auto post_ops = ds::make_post_ops(fused.post, k.operands);
    if (!post_ops) return std::nullopt;
    auto attr = ds::user_scratchpad_attr();
    attr.set_post_ops(*post_ops);
    try {
        auto desc = fused.has_bias ? dnnl::matmul::desc(k.src, k.weights, k.bias, k.dst)
                                   : dnnl::matmul::desc(k.src, k.weights, k.dst);
        dnnl::matmul::primitive_desc pd(desc, attr, ds::cpu_engine());
        k.scratchpad_bytes = pd.scratchpad_desc().get_size();
        k.matmul = dnnl::matmul(pd);
    } catch (const dnnl::error&) {
        return std::nullopt;
    }
    return k;
}

// Where the panel primitive's bias and binary post-op operands are among
// the instruction's inputs, and int8 codes' column scales.
struct panel_inputs {
    // int8 codes (int8_weight_products): the chain's first post-op multiplies
    // by one scale per column; the widening applies it instead, since oneDNN
    // runs a matmul with a row-broadcast binary post-op on its reference
    // kernel (250x slower), and a row-broadcast add right after it becomes
    // the primitive's bias for the same reason.
    std::optional<std::size_t> column_scales;
    std::optional<std::size_t> bias;
    std::vector<std::size_t> operands;  // one per binary post-op of the primitive's chain
};

// The inputs of `fused` as the primitive reads them, taking int8 codes'
// scales (and a bias add after them) out of its chain and `plan`; nothing
// when int8 codes come without their scales first.
std::optional<panel_inputs> map_panel_inputs(op::fused_dot& fused, product_plan& plan, dtype stored) {
    panel_inputs in;
    if (fused.has_bias) in.bias = 2;
    for (std::size_t o = 0; o < plan.operands.size(); ++o) in.operands.push_back(fused.first_post_operand() + o);
    if (stored != dtype::int8_type) return in;
    auto row_broadcast_first = [&](op::post_op_kind kind) {
        return !fused.post.kinds.empty() && fused.post.kinds.front() == kind && !plan.operands.empty() &&
               plan.operands.front().row_stride == 0;
    };
    auto take_first = [&] {
        fused.post.kinds.erase(fused.post.kinds.begin());
        fused.post.alpha.erase(fused.post.alpha.begin());
        fused.post.beta.erase(fused.post.beta.begin());
        plan.operands.erase(plan.operands.begin());
        const std::size_t input = in.operands.front();
        in.operands.erase(in.operands.begin());
        return input;
    };
    if (fused.has_bias || !row_broadcast_first(op::post_op_kind::mul)) return std::nullopt;
    in.column_scales = take_first();
    if (row_broadcast_first(op::post_op_kind::add)) {
        in.bias = take_first();
        fused.has_bias = true;
    }
    return in;
}

class widened_panel_matmul_kernel final : public cpu_kernel {
public:
    widened_panel_matmul_kernel(op::fused_dot fused, product_plan plan, panel_inputs inputs, std::size_t width,
                                panel_primitive full, std::optional<panel_primitive> tail, dtype stored, int threads,
                                bool gelu_tanh)
        : gelu_tanh_(gelu_tanh),
          fused_(std::move(fused)),
          inputs_(std::move(inputs)),
          plan_(std::move(plan)),
          width_(width),
          full_(std::move(full)),
          tail_(std::move(tail)),
          widen_(widen_to_float32_function(stored)),
          stored_bytes_(shape{stored}.element_size()),
          threads_(threads) {
        const std::size_t scratchpad = std::max(full_.scratchpad_bytes, tail_ ? tail_->scratchpad_bytes : 0);
        panel_bytes_ = scratch_aligned(plan_.inner * width_ * sizeof(float));
        scratchpad_desc_ = dnnl::memory::desc({dim(std::max<std::size_t>(scratchpad, 1))}, dnnl::memory::data_type::u8,
                                              dnnl::memory::dims{1});
        per_thread_ = panel_bytes_ + scratch_aligned(scratchpad);
    }

    void run(const argument& result, const std::vector<argument>& inputs, std::byte* scratch) const override {
        const std::size_t panels = (plan_.cols + width_ - 1) / width_;
        const int threads = std::min<std::size_t>(panels, static_cast<std::size_t>(threads_)) > 1 ? threads_ : 1;
#pragma omp parallel num_threads(threads)
        {
            // Each thread binds the primitive's arguments once per run (the
            // tail's when it meets the tail) and moves them per panel.
            std::byte* own = scratch + static_cast<std::size_t>(omp_get_thread_num()) * per_thread_;
            std::optional<bound_args> full_args, tail_args;
#pragma omp for schedule(static)
            for (std::int64_t j = 0; j < static_cast<std::int64_t>(panels); ++j) {
                const bool full = std::min(width_, plan_.cols - static_cast<std::size_t>(j) * width_) == width_;
                auto& args = full ? full_args : tail_args;
                if (!args) args = bind(full ? full_ : *tail_, result, inputs, own);
                run_panel(static_cast<std::size_t>(j), result, inputs, own, *args);
            }
        }
    }

    std::size_t scratch_bytes() const override {
        return static_cast<std::size_t>(threads_) * per_thread_;
    }

private:
    // One thread's arguments for a panel primitive: the source, the panel
    // and the scratchpad stay; the memories reading or writing columns
    // (result, bias, post-op operands) move to each panel's first column.
    struct bound_args {
        std::unordered_map<int, dnnl::memory> args;
        std::vector<std::pair<dnnl::memory, float*>> columns;  // and their column 0
    };

    bound_args bind(const panel_primitive& k, const argument& result, const std::vector<argument>& inputs,
                    std::byte* own) const {
        const auto& engine = ds::cpu_engine();
        bound_args b;
        b.args = {{DNNL_ARG_SRC, dnnl::memory(k.src, engine, inputs[0].data())},
                  {DNNL_ARG_WEIGHTS, dnnl::memory(k.weights, engine, own)},
                  {DNNL_ARG_SCRATCHPAD, dnnl::memory(scratchpad_desc_, engine, own + panel_bytes_)}};
        auto add_column = [&](int id, const dnnl::memory::desc& desc, const argument& a) {
            dnnl::memory m(desc, engine, a.data());
            b.args.emplace(id, m);
            b.columns.emplace_back(m, a.data_as<float>());
        };
        add_column(DNNL_ARG_DST, k.dst, result);
        if (inputs_.bias) add_column(DNNL_ARG_BIAS, k.bias, inputs[*inputs_.bias]);
        for (std::size_t o = 0; o < k.operands.size(); ++o) {
            const int id =
                DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(ds::post_op_index(fused_.post, o))) | DNNL_ARG_SRC_1;
            add_column(id, k.operands[o], inputs[inputs_.operands[o]]);
        }
        return b;
    }

    void run_panel(std::size_t j, const argument& result, const std::vector<argument>& inputs, std::byte* own,
                   bound_args& bound) const {
        const std::size_t first = j * width_;
        const std::size_t width = std::min(width_, plan_.cols - first);
        const panel_primitive& k = width == width_ ? full_ : *tail_;
        auto* panel = reinterpret_cast<float*>(own);
        const auto* weights = inputs[1].data();
        const float* scales = inputs_.column_scales ? inputs[*inputs_.column_scales].data_as<float>() + first : nullptr;
        if (plan_.transposed_weights) {
            for (std::size_t col = 0; col < width; ++col) {
                float* values = panel + col * plan_.inner;
                widen_(weights + (first + col) * plan_.inner * stored_bytes_, values, plan_.inner);
                if (scales != nullptr)
                    for (std::size_t k = 0; k < plan_.inner; ++k) values[k] *= scales[col];
            }
        } else {
            // Each row's segment is short and far from the last: fetch the
            // one a few rows ahead (as few_rows_16bit_avx2 does).
            constexpr std::size_t ahead = 4, line = 64;
            for (std::size_t row = 0; row < plan_.inner; ++row) {
                if (row + ahead < plan_.inner) {
                    const std::byte* next = weights + ((row + ahead) * plan_.cols + first) * stored_bytes_;
                    for (std::size_t b = 0; b < width * stored_bytes_; b += line) __builtin_prefetch(next + b);
                }
                float* values = panel + row * width;
                widen_(weights + (row * plan_.cols + first) * stored_bytes_, values, width);
                if (scales != nullptr)
                    for (std::size_t c = 0; c < width; ++c) values[c] *= scales[c];
            }
        }

        const auto& engine = ds::cpu_engine();
        auto column = [first](const argument& a) { return a.data_as<float>() + first; };
        for (auto& [memory, column_0] : bound.columns) memory.set_data_handle(column_0 + first);
        thread_local dnnl::stream stream(engine);
        k.matmul.execute(stream, bound.args);
        stream.wait();
        if (gelu_tanh_)
            for (std::size_t row = 0; row < plan_.rows; ++row) {
                float* y = column(result) + row * plan_.cols;
                avx2::gelu_tanh_array(y, y, width);
            }
    }

    // A tanh-form GELU ending the chain runs as Kiln's AVX2 loop over each
    // panel's result while it is in cache (oneDNN's eltwise for it is slow,
    // see dnnl_matmul.cpp); fused_ holds the chain without it.
    bool gelu_tanh_;

    op::fused_dot fused_;
    panel_inputs inputs_;
    product_plan plan_;
    std::size_t width_;
    panel_primitive full_;
    std::optional<panel_primitive> tail_;
    widen_function widen_;
    std::size_t stored_bytes_;
    int threads_;
    std::size_t panel_bytes_ = 0, per_thread_ = 0;
    dnnl::memory::desc scratchpad_desc_;
};

const op::fused_dot* requested_product(const kernel_request& r) {
    return r.op.get_if<op::fused_dot>();
}

bool panel_eligible(const kernel_request& r) {
    const auto* fused = requested_product(r);
    return fused != nullptr && has_narrow_weights(r) && plan_product(*fused, r).has_value();
}

std::shared_ptr<const cpu_kernel> build_panels(const kernel_request& r, const kernel_builder&) {
    auto fused = *requested_product(r);
    auto plan = plan_product(fused, r);
    if (!plan) return nullptr;
    auto inputs = map_panel_inputs(fused, *plan, r.input_shapes[1].type());
    if (!inputs) return nullptr;
    const bool gelu_tanh =
        !fused.post.kinds.empty() && fused.post.kinds.back() == op::post_op_kind::gelu_tanh && avx2::supported();
    if (gelu_tanh) {
        fused.post.kinds.pop_back();
        fused.post.alpha.pop_back();
        fused.post.beta.pop_back();
    }
    // The threads run the same primitives at once, each with its own
    // scratchpad (user scratchpad mode makes that safe).
    const std::size_t width = panel_width(*plan, r.threads);
    auto full = make_panel_primitive(fused, *plan, width);
    if (!full) return nullptr;
    std::optional<panel_primitive> tail;
    if (const std::size_t rest = plan->cols % width; rest != 0) {
        tail = make_panel_primitive(fused, *plan, rest);
        if (!tail) return nullptr;
    }
    return std::make_shared<widened_panel_matmul_kernel>(fused, *plan, std::move(*inputs), width, std::move(*full),
                                                         std::move(tail), r.input_shapes[1].type(), r.threads,
                                                         gelu_tanh);
}

std::shared_ptr<const cpu_kernel> build_matmul_per_run(const kernel_request& r, const kernel_builder&) {
    return build_widen_weights_per_run(matmul_algorithms(), r);
}

}  // namespace

std::span<const kernel_algorithm> narrow_weights_matmul_algorithms() {
    static const kernel_algorithm algorithms[] = {
        onednn_bf16_matmul,
        few_rows_16bit_avx512_matmul,
        few_rows_16bit_matmul,
        {"widened_panel_matmul", panel_eligible, build_panels},
        {"widen_weights_per_run", has_narrow_weights, build_matmul_per_run},
    };
    return algorithms;
}

}  // namespace kiln
