// The cpu kernel for fused_pointwise and for single elementwise ops: the
// program is translated once, at lowering, into the AVX2 interpreter's
// instructions (pointwise_avx2.cpp). float32 and bool values only; anything
// else, or a CPU without AVX2, declines to the reference compute.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "ops/elementwise.hpp"
#include "ops/fused_pointwise.hpp"
#include "ops/op_helpers.hpp"
#include "targets/cpu/kernels/pointwise/pointwise_avx2.hpp"
#include "targets/cpu/kernels/cpu_features.hpp"
#include "targets/cpu/kernels/cpu_kernels.hpp"
#include "targets/cpu/kernels/follows_run_time_extents.hpp"

namespace kiln {

namespace {

using avx2::pw_op;

constexpr std::size_t max_inputs = 32;
constexpr std::size_t max_slots = 64;

std::optional<pw_op> float_unary_op(const operation& op) {
    static const std::map<std::string, pw_op> ops{
        {"neg", pw_op::neg},     {"abs", pw_op::abs},         {"exp", pw_op::exp},
        {"sqrt", pw_op::sqrt},   {"rsqrt", pw_op::rsqrt},     {"reciprocal", pw_op::reciprocal},
        {"tanh", pw_op::tanh},   {"sigmoid", pw_op::sigmoid}, {"relu", pw_op::relu},
        {"erf", pw_op::erf},     {"floor", pw_op::floor},     {"ceil", pw_op::ceil},
        {"round", pw_op::round}, {"sign", pw_op::sign}};
    if (const auto* g = op.get_if<op::gelu>())
        return g->approximate == op::gelu_approximation::tanh ? pw_op::gelu_tanh : pw_op::gelu_erf;
    auto it = ops.find(op.name());
    if (it == ops.end()) return std::nullopt;
    return it->second;
}

std::optional<pw_op> float_binary_op(const std::string& name) {
    static const std::map<std::string, pw_op> ops{
        {"add", pw_op::add},     {"sub", pw_op::sub},   {"mul", pw_op::mul},
        {"div", pw_op::div},     {"max", pw_op::max},   {"min", pw_op::min},
        {"equal", pw_op::equal}, {"less", pw_op::less}, {"greater", pw_op::greater}};
    auto it = ops.find(name);
    if (it == ops.end()) return std::nullopt;
    return it->second;
}

// The value of a constant scalar input (one element, or all elements equal).
std::optional<float> constant_scalar(const argument& a) {
    if (a.empty() || a.get_shape().type() != dtype::float_type || a.get_shape().elements() == 0) return std::nullopt;
    const double v = a.value_at(0);
    for (std::size_t i = 1; i < a.get_shape().elements(); ++i)
        if (a.value_at(i) != v) return std::nullopt;
    return static_cast<float>(v);
}

// Translates the steps into interpreter instructions and assigns slots.
class program_builder {
public:
    program_builder(const std::vector<op::pointwise_step>& steps, const kernel_request& r) : steps_(steps), r_(r) {}

    bool build() {
        const std::size_t n = r_.input_shapes.size();
        if (n > max_inputs) return false;
        std::vector<shape> shapes;
        op::fused_pointwise program;
        program.steps = steps_;
        try {
            shapes = program.value_shapes(r_.input_shapes);
        } catch (const error&) {
            return false;
        }
        for (const auto& s : shapes)
            if (s.type() != dtype::float_type && s.type() != dtype::bool_type) return false;
        is_bool_.clear();
        for (const auto& s : shapes) is_bool_.push_back(s.type() == dtype::bool_type);

        // Last step reading each value; inputs nobody reads are not supported.
        std::vector<std::size_t> last_use(shapes.size(), 0);
        std::vector<bool> read(shapes.size(), false);
        for (std::size_t k = 0; k < steps_.size(); ++k)
            for (auto a : steps_[k].args) {
                last_use[a] = k;
                read[a] = true;
            }
        for (std::size_t i = 0; i < n; ++i)
            if (!read[i]) return false;

        // Inputs keep their slots for the whole program (they are filled per block).
        slot_of_.assign(shapes.size(), -1);
        for (std::size_t i = 0; i < n; ++i) slot_of_[i] = new_slot();
        for (std::size_t k = 0; k < steps_.size(); ++k) {
            // A value read twice by its last step (d * d) is released once:
            // twice would hand its slot to two later values.
            std::vector<std::size_t> args = steps_[k].args;
            std::sort(args.begin(), args.end());
            args.erase(std::unique(args.begin(), args.end()), args.end());
            for (auto a : args)
                if (a >= n && last_use[a] == k) release(slot_of_[a]);
            slot_of_[n + k] = take_slot();
            if (!translate(k)) return false;
        }
        return slot_count_ <= max_slots;
    }

    std::vector<avx2::pw_instruction> code;
    std::vector<std::int32_t> slot_of_;
    std::vector<bool> is_bool_;
    std::size_t slot_count_ = 0;

private:
    std::int32_t new_slot() { return static_cast<std::int32_t>(slot_count_++); }
    std::int32_t take_slot() {
        if (free_.empty()) return new_slot();
        auto s = free_.back();
        free_.pop_back();
        return s;
    }
    void release(std::int32_t s) { free_.push_back(s); }

    void emit(pw_op op, std::int32_t dst, std::vector<std::int32_t> src) {
        avx2::pw_instruction ins;
        ins.op = op;
        ins.dst = dst;
        for (std::size_t i = 0; i < src.size(); ++i) ins.src[i] = src[i];
        code.push_back(ins);
    }

    bool translate(std::size_t k) {
        const auto& step = steps_[k];
        const std::size_t n = r_.input_shapes.size();
        const std::string name = step.op.name();
        const std::int32_t dst = slot_of_[n + k];
        std::vector<std::int32_t> src;
        std::vector<bool> mask;
        for (auto a : step.args) {
            src.push_back(slot_of_[a]);
            mask.push_back(is_bool_[a]);
        }
        const bool all_float = std::none_of(mask.begin(), mask.end(), [](bool b) { return b; });
        const bool all_mask = std::all_of(mask.begin(), mask.end(), [](bool b) { return b; });

        if (name == "convert") {
            const bool to_bool = is_bool_[n + k];
            if (mask[0] == to_bool)
                emit(pw_op::copy, dst, src);
            else
                emit(to_bool ? pw_op::nonzero : pw_op::mask_to_float, dst, src);
            return true;
        }
        if (name == "where") {
            if (!mask[0] || mask[1] != mask[2]) return false;
            emit(pw_op::where, dst, src);
            return true;
        }
        if (all_mask) {
            if (name == "not")
                emit(pw_op::logical_not, dst, src);
            else if (name == "and")
                emit(pw_op::logical_and, dst, src);
            else if (name == "or")
                emit(pw_op::logical_or, dst, src);
            else if (name == "xor")
                emit(pw_op::logical_xor, dst, src);
            else if (name == "equal") {
                emit(pw_op::logical_xor, dst, src);
                emit(pw_op::logical_not, dst, {dst});
            } else {
                return false;
            }
            return true;
        }
        if (!all_float) return false;
        if (name == "clip") {
            emit(pw_op::clip, dst, src);
            return true;
        }
        if (auto u = float_unary_op(step.op)) {
            emit(*u, dst, src);
            return true;
        }
        if (name == "pow") return translate_pow(step, dst, src);
        if (auto b = float_binary_op(name)) {
            emit(*b, dst, src);
            return true;
        }
        // Ops without a vector form call the op's own scalar formula.
        const pointwise_formula formula = step.op.float32_formula();
        if (formula.unary) {
            emit(pw_op::unary_function, dst, src);
            code.back().unary_function = formula.unary;
            return true;
        }
        if (formula.binary) {
            emit(pw_op::binary_function, dst, src);
            code.back().binary_function = formula.binary;
            return true;
        }
        return false;
    }

    // x^2 and x^3 with a constant exponent are products (as exact as pow
    // for squares; one rounding more for cubes); other powers call pow.
    bool translate_pow(const op::pointwise_step& step, std::int32_t dst, const std::vector<std::int32_t>& src) {
        const std::size_t e = step.args[1];
        if (e < r_.input_shapes.size()) {
            auto c = constant_scalar(r_.constant_inputs[e]);
            if (c && (*c == 2.0f || *c == 3.0f)) {
                emit(*c == 2.0f ? pw_op::square : pw_op::cube, dst, {src[0]});
                return true;
            }
        }
        emit(pw_op::binary_function, dst, src);
        code.back().binary_function = step.op.float32_formula().binary;
        return true;
    }

    const std::vector<op::pointwise_step>& steps_;
    const kernel_request& r_;
    std::vector<std::int32_t> free_;
};

// Output dimensions merged where every input walks them as one, and each
// input's strides over them.
struct collapsed_layout {
    std::vector<std::size_t> lens;
    std::vector<std::vector<std::size_t>> strides;  // per input
};

collapsed_layout collapse(const std::vector<shape>& inputs, const shape& out) {
    std::vector<std::size_t> lens = out.lens();
    std::vector<std::vector<std::size_t>> strides;
    for (const auto& s : inputs) strides.push_back(ops::broadcast_strides(s, lens));
    collapsed_layout c;
    c.strides.resize(inputs.size());
    // Walk from the innermost dimension, growing the current merged one.
    for (std::size_t d = lens.size(); d-- > 0;) {
        if (lens[d] == 1) continue;
        bool merge = !c.lens.empty();
        for (std::size_t i = 0; merge && i < inputs.size(); ++i)
            merge = strides[i][d] == c.strides[i].back() * c.lens.back();
        if (merge) {
            c.lens.back() *= lens[d];
            continue;
        }
        c.lens.push_back(lens[d]);
        for (std::size_t i = 0; i < inputs.size(); ++i) c.strides[i].push_back(strides[i][d]);
    }
    if (c.lens.empty()) {
        c.lens.push_back(1);
        for (auto& s : c.strides) s.push_back(0);
    }
    std::reverse(c.lens.begin(), c.lens.end());
    for (auto& s : c.strides) std::reverse(s.begin(), s.end());
    return c;
}

// Work (in simple vector operations per element) below which threads do not
// pay: about 50 microseconds on one core, several times what waking a
// thread costs, and more when the machine is busy.
constexpr std::size_t parallel_work = std::size_t{1} << 18;

std::size_t cost_per_element(const std::vector<avx2::pw_instruction>& code, std::size_t inputs) {
    std::size_t cost = inputs;
    for (const auto& ins : code) {
        switch (ins.op) {
            case pw_op::exp:
            case pw_op::tanh:
            case pw_op::sigmoid:
            case pw_op::erf:
            case pw_op::gelu_erf:
            case pw_op::gelu_tanh:
                cost += 16;
                break;
            case pw_op::unary_function:
            case pw_op::binary_function:
                cost += 40;
                break;
            case pw_op::div:
            case pw_op::sqrt:
            case pw_op::rsqrt:
            case pw_op::reciprocal:
                cost += 4;
                break;
            default:
                cost += 1;
        }
    }
    return cost;
}

class pointwise_kernel final : public cpu_kernel, public pointwise_runner, public follows_run_time_extents {
public:
    pointwise_kernel(program_builder&& b, const collapsed_layout& layout, const kernel_request& r)
        : code_(std::move(b.code)), output_lens_(r.output_shape.lens()) {
        const std::size_t n = r.input_shapes.size();
        std::vector<std::size_t> standard(layout.lens.size(), 1);
        for (std::size_t d = layout.lens.size(); d-- > 1;) standard[d - 1] = standard[d] * layout.lens[d];
        for (std::size_t i = 0; i < n; ++i) {
            avx2::pw_input in;
            in.slot = b.slot_of_[i];
            in.is_bool = b.is_bool_[i];
            const auto& s = layout.strides[i];
            in.in_place = !in.is_bool && s == standard;
            in.constant = std::all_of(s.begin(), s.end(), [](std::size_t v) { return v == 0; });
            const std::size_t rank = layout.lens.size();
            in.repeated_vector = !in.is_bool && !in.constant && rank >= 2 && layout.lens[rank - 1] % 8 == 0 &&
                                 s[rank - 1] == 1 && s[rank - 2] == 0;
            std::copy(s.begin(), s.end(), in.strides);
            inputs_.push_back(in);
        }
        program_.rank = layout.lens.size();
        std::copy(layout.lens.begin(), layout.lens.end(), program_.lens);
        program_.elements = r.output_shape.elements();
        program_.inputs = inputs_.data();
        program_.input_count = inputs_.size();
        program_.code = code_.data();
        program_.code_size = code_.size();
        program_.slot_count = b.slot_count_;
        program_.result_slot = b.slot_of_.back();
        program_.result_is_bool = b.is_bool_.back();
        program_.threads = r.threads;
        program_.parallel_elements = parallel_work / std::max<std::size_t>(1, cost_per_element(code_, n));
        recognize_affine();
    }
    pointwise_kernel(const pointwise_kernel&) = delete;
    pointwise_kernel& operator=(const pointwise_kernel&) = delete;

    void run(const argument& result, const std::vector<argument>& inputs, std::byte* scratch) const override {
        const void* data[max_inputs];
        for (std::size_t i = 0; i < inputs.size(); ++i) data[i] = inputs[i].data();
        const std::size_t elements = result.get_shape().elements();
        if (elements == program_.elements) return avx2::run_pointwise(program_, data, result.data(), scratch);
        avx2::run_pointwise(program_at(elements), data, result.data(), scratch);
    }
    // The result's outermost dimension longer than one is the outer factor
    // of the first collapsed dimension (standard result), whose every input
    // stride stays as built: only that length changes.
    bool follows_extent_of(std::size_t dim) const override {
        return dim < output_lens_.size() &&
               std::all_of(output_lens_.begin(), output_lens_.begin() + static_cast<std::ptrdiff_t>(dim),
                           [](std::size_t l) { return l == 1; });
    }
    void run(const void* const* inputs, void* output, std::byte* scratch) const override {
        avx2::run_pointwise(program_, inputs, output, scratch);
    }
    std::size_t scratch_bytes() const override { return avx2::pointwise_scratch_bytes(program_); }

private:
    // The program over `elements` of the result at a smaller run-time extent
    // of its outermost dimension (follows_extent_of).
    avx2::pw_program program_at(std::size_t elements) const {
        avx2::pw_program p = program_;
        p.lens[0] = program_.lens[0] * elements / program_.elements;
        p.elements = elements;
        if (elements % 8 != 0) p.affine_x = -1;  // the affine loop runs whole vectors
        return p;
    }

    // Sets program_.affine_* when the code is mul(x, scale) -> add(., shift)
    // [-> relu], operands in either order (both ops commute exactly).
    void recognize_affine() {
        if (program_.result_is_bool || program_.elements % 8 != 0) return;
        if (code_.size() != 2 && code_.size() != 3) return;
        const auto& mul = code_[0];
        const auto& add = code_[1];
        if (mul.op != pw_op::mul || add.op != pw_op::add) return;
        if (code_.size() == 3 && (code_[2].op != pw_op::relu || code_[2].src[0] != add.dst)) return;
        if (add.src[0] != mul.dst && add.src[1] != mul.dst) return;
        if (add.src[0] == mul.dst && add.src[1] == mul.dst) return;
        auto input_of = [&](std::int32_t slot) -> std::int32_t {
            for (std::size_t i = 0; i < inputs_.size(); ++i)
                if (inputs_[i].slot == slot) return static_cast<std::int32_t>(i);
            return -1;
        };
        auto repeats = [&](std::int32_t i) {
            return i >= 0 && !inputs_[i].is_bool && (inputs_[i].repeated_vector || inputs_[i].constant);
        };
        const std::int32_t a = input_of(mul.src[0]), b = input_of(mul.src[1]);
        const std::int32_t shift = input_of(add.src[0] == mul.dst ? add.src[1] : add.src[0]);
        std::int32_t x = -1, scale = -1;
        if (a >= 0 && inputs_[a].in_place && repeats(b)) {
            x = a;
            scale = b;
        } else if (b >= 0 && inputs_[b].in_place && repeats(a)) {
            x = b;
            scale = a;
        }
        if (x < 0 || !repeats(shift) || shift == x) return;
        program_.affine_x = x;
        program_.affine_scale = scale;
        program_.affine_shift = shift;
        program_.affine_relu = code_.size() == 3;
    }

    std::vector<avx2::pw_instruction> code_;
    std::vector<std::size_t> output_lens_;
    std::vector<avx2::pw_input> inputs_;
    avx2::pw_program program_;
};

std::shared_ptr<pointwise_kernel> build_pointwise_kernel(const std::vector<op::pointwise_step>& steps,
                                                         const kernel_request& r) {
    if (!avx2::supported() || r.output_shape.elements() == 0 || !r.output_shape.standard()) return nullptr;
    program_builder builder(steps, r);
    if (!builder.build()) return nullptr;
    collapsed_layout layout = collapse(r.input_shapes, r.output_shape);
    if (layout.lens.size() > avx2::pointwise_max_rank) return nullptr;
    return std::make_shared<pointwise_kernel>(std::move(builder), layout, r);
}

}  // namespace

std::shared_ptr<const cpu_kernel> make_pointwise_kernel(const kernel_request& r) {
    std::vector<op::pointwise_step> steps;
    if (const auto* f = r.op.get_if<op::fused_pointwise>()) {
        steps = f->steps;
    } else {
        op::pointwise_step single{r.op, {}};
        for (std::size_t i = 0; i < r.input_shapes.size(); ++i) single.args.push_back(i);
        steps.push_back(std::move(single));
    }
    return build_pointwise_kernel(steps, r);
}

std::shared_ptr<const pointwise_runner> make_pointwise_runner(const std::vector<op::pointwise_step>& steps,
                                                              const kernel_request& r) {
    return build_pointwise_kernel(steps, r);
}

}  // namespace kiln
