#include "targets/cpu/kernels/dnnl_support.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "targets/cpu/kernels/own_packed_layout.hpp"
#include "targets/cpu/kernels/packed_constant_values.hpp"
#include "targets/cpu/kernels/packed_layout.hpp"
#include "targets/cpu/kernels/scratch_alignment.hpp"

namespace kiln::dnnl_support {

using dt = dnnl::memory::data_type;

const dnnl::engine& cpu_engine() {
    static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    return engine;
}

dnnl::memory::desc strided_desc(const std::vector<std::size_t>& dims, const std::vector<std::size_t>& strides,
                                dnnl::memory::data_type type) {
    dnnl::memory::dims d, s;
    for (std::size_t i = 0; i < dims.size(); ++i) {
        const bool broadcast = strides[i] == 0 && dims[i] > 1;
        d.push_back(static_cast<dnnl::memory::dim>(broadcast ? 1 : dims[i]));
        s.push_back(static_cast<dnnl::memory::dim>(strides[i]));
    }
    if (d.empty()) {  // a scalar
        d.push_back(1);
        s.push_back(1);
    }
    return dnnl::memory::desc(d, type, s);
}

dnnl::memory::desc plain_desc(const shape& s) { return strided_desc(s.lens(), s.strides()); }

std::size_t preferred_channel_block() {
    if (const char* forced = std::getenv("KILN_CPU_CHANNEL_BLOCK")) {
        const std::string v = forced;
        if (v == "8" || v == "16") return static_cast<std::size_t>(std::stoi(v));
        fail("KILN_CPU_CHANNEL_BLOCK must be 8 or 16, got '" + v + "'");
    }
    static const std::size_t block = [] {
        const auto core = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
        return (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & core) == core ? 16U : 8U;
    }();
    return block;
}

dnnl::memory::desc blocked_desc(const shape& plain, std::size_t block) {
    dnnl::memory::dims d;
    for (auto l : plain.lens()) d.push_back(static_cast<dnnl::memory::dim>(l));
    return dnnl::memory::desc(d, dt::f32, block == 16 ? dnnl::memory::format_tag::nChw16c : dnnl::memory::format_tag::nChw8c);
}

std::optional<dnnl::post_ops> make_post_ops(const op::post_op_chain& chain,
                                            const std::vector<dnnl::memory::desc>& operand_descs) {
    using op::post_op_kind;
    using alg = dnnl::algorithm;
    dnnl::post_ops ops;
    std::size_t next_operand = 0;
    for (std::size_t k = 0; k < chain.kinds.size(); ++k) {
        const float a = static_cast<float>(chain.alpha[k]);
        const float b = static_cast<float>(chain.beta[k]);
        switch (chain.kinds[k]) {
        case post_op_kind::relu: ops.append_eltwise(1.f, alg::eltwise_relu, 0.f, 0.f); break;
        case post_op_kind::sigmoid: ops.append_eltwise(1.f, alg::eltwise_logistic, 0.f, 0.f); break;
        case post_op_kind::tanh: ops.append_eltwise(1.f, alg::eltwise_tanh, 0.f, 0.f); break;
        case post_op_kind::gelu_erf: ops.append_eltwise(1.f, alg::eltwise_gelu_erf, 0.f, 0.f); break;
        case post_op_kind::gelu_tanh: ops.append_eltwise(1.f, alg::eltwise_gelu_tanh, 0.f, 0.f); break;
        case post_op_kind::clip: ops.append_eltwise(1.f, alg::eltwise_clip, a, b); break;
        case post_op_kind::swish: ops.append_eltwise(1.f, alg::eltwise_swish, 1.f, 0.f); break;
        case post_op_kind::hardswish: ops.append_eltwise(1.f, alg::eltwise_hardswish, 0.f, 0.f); break;
        case post_op_kind::add:
            ops.append_binary(alg::binary_add, operand_descs.at(next_operand++));
            break;
        case post_op_kind::mul:
            ops.append_binary(alg::binary_mul, operand_descs.at(next_operand++));
            break;
        default: return std::nullopt;
        }
    }
    return ops;
}

std::size_t post_op_index(const op::post_op_chain& chain, std::size_t k) {
    for (std::size_t i = 0; i < chain.kinds.size(); ++i)
        if (op::is_binary(chain.kinds[i]) && k-- == 0) return i;
    fail(error_kind::runtime, "post-op chain has no binary operand " + std::to_string(k));
}

dnnl::primitive_attr user_scratchpad_attr() {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return attr;
}

primitive_kernel::primitive_kernel(dnnl::primitive p, std::vector<std::pair<int, dnnl::memory::desc>> descs,
                                   std::vector<int> slots, std::unordered_map<int, dnnl::memory> fixed,
                                   std::size_t scratch_bytes, std::vector<kept_constant> kept,
                                   std::vector<argument> read_in_place)
    : primitive_(std::move(p)),
      descs_(std::move(descs)),
      slots_(std::move(slots)),
      fixed_(std::move(fixed)),
      scratch_bytes_(scratch_bytes),
      kept_(std::move(kept)),
      read_in_place_(std::move(read_in_place)) {
    if (scratch_bytes_ > 0) scratch_desc_ = dnnl::memory::desc({static_cast<dnnl::memory::dim>(scratch_bytes_)}, dt::u8, {1});
    for (const auto& [id, desc] : descs_)
        for (int i = 0; i < desc.data.ndims; ++i)
            if (desc.data.padded_dims[i] != desc.data.dims[i]) reuse_args_ = false;
}

std::unique_ptr<primitive_kernel::bound_args> primitive_kernel::take_bound_args(const argument& result,
                                                                                const std::vector<argument>& inputs,
                                                                                std::byte* scratch) const {
    std::unique_ptr<bound_args> bound;
    if (reuse_args_) {
        const std::lock_guard<std::mutex> lock(idle_mutex_);
        if (!idle_args_.empty()) {
            bound = std::move(idle_args_.back());
            idle_args_.pop_back();
        }
    }
    const bool fresh = bound == nullptr;
    if (fresh) {
        bound = std::make_unique<bound_args>();
        bound->args = fixed_;
    }
    const auto& engine = cpu_engine();
    auto bind = [&](std::size_t k, int id, const dnnl::memory::desc& desc, void* data) {
        if (!fresh) return bound->run_time[k].set_data_handle(data);
        bound->run_time.emplace_back(desc, engine, data);
        bound->args.emplace(id, bound->run_time.back());
    };
    for (std::size_t i = 0; i < descs_.size(); ++i) {
        const argument& a = slots_[i] == result_slot ? result : inputs.at(static_cast<std::size_t>(slots_[i]));
        bind(i, descs_[i].first, descs_[i].second, a.data());
    }
    if (scratch_bytes_ > 0) bind(descs_.size(), DNNL_ARG_SCRATCHPAD, scratch_desc_, scratch);
    return bound;
}

void primitive_kernel::run(const argument& result, const std::vector<argument>& inputs, std::byte* scratch) const {
    // Memory objects are handles over the plan's buffers (no data of their
    // own); each run in flight holds its own map of them.
    std::unique_ptr<bound_args> bound = take_bound_args(result, inputs, scratch);
    thread_local dnnl::stream stream(cpu_engine());
    primitive_.execute(stream, bound->args);
    stream.wait();
    if (!reuse_args_) return;
    const std::lock_guard<std::mutex> lock(idle_mutex_);
    idle_args_.push_back(std::move(bound));
}

bool primitive_kernel::keeps_own_copy(std::size_t index) const {
    for (const auto& k : kept_)
        if (k.input == index) return true;
    return false;
}

std::size_t primitive_kernel::own_copy_bytes() const {
    std::size_t bytes = 0;
    for (const auto& k : kept_)
        if (k.adopted.data() == nullptr) bytes += k.copy.get_desc().get_size();
    return bytes;
}

std::size_t primitive_kernel::adopted_bytes() const {
    std::size_t bytes = 0;
    for (const auto& k : kept_)
        if (k.adopted.data() != nullptr) bytes += k.copy.get_desc().get_size();
    return bytes;
}

std::shared_ptr<const packed_constant> primitive_kernel::packed_copy(std::size_t index) const {
    for (const auto& k : kept_) {
        if (k.input != index) continue;
        // The memory handle owns a copy the kernel made; adopted bytes belong to the loaded file.
        std::shared_ptr<void> owner = k.adopted.data() != nullptr ? k.adopted.owner()
                                      : k.storage != nullptr       ? k.storage
                                                                   : std::make_shared<dnnl::memory>(k.copy);
        return export_packed(k.copy, k.plain, std::move(owner));
    }
    return nullptr;
}

void primitive_kernel::restore_constant(std::size_t index, const argument& into) const {
    for (const auto& k : kept_) {
        if (k.input != index) continue;
        dnnl::memory plain(k.plain, cpu_engine(), into.data());
        dnnl::memory copy = k.copy;  // a handle: oneDNN's reorder takes non-const ones
        dnnl::stream stream(cpu_engine());
        dnnl::reorder(copy, plain).execute(stream, copy, plain);
        stream.wait();
        return;
    }
    cpu_kernel::restore_constant(index, into);
}

namespace {

class input_reorder_kernel final : public wrapping_kernel {
public:
    input_reorder_kernel(std::shared_ptr<const cpu_kernel> inner, std::size_t index, const dnnl::memory::desc& from,
                         const dnnl::memory::desc& to, const shape& staged)
        : wrapping_kernel(std::move(inner)), index_(index), staged_(staged), from_(from), to_(to),
          bytes_(scratch_aligned(to.get_size())) {
        dnnl::reorder::primitive_desc pd(cpu_engine(), from, cpu_engine(), to, user_scratchpad_attr());
        pad_ = pd.scratchpad_desc();
        reorder_ = dnnl::reorder(pd);
    }

    void run(const argument& result, const std::vector<argument>& inputs, std::byte* scratch) const override {
        const auto& engine = cpu_engine();
        thread_local dnnl::stream stream(engine);
        dnnl::memory from(from_, engine, inputs[index_].data()), to(to_, engine, scratch);
        dnnl::memory pad(pad_, engine, scratch + bytes_);  // free again once the reorder is done
        reorder_.execute(stream, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}, {DNNL_ARG_SCRATCHPAD, pad}});
        stream.wait();
        std::vector<argument> moved = inputs;
        moved[index_] = argument(staged_, scratch);
        inner_->run(result, moved, scratch + bytes_);
    }
    std::size_t scratch_bytes() const override {
        return bytes_ + std::max(pad_.get_size(), inner_->scratch_bytes());
    }

private:
    std::size_t index_;
    shape staged_;
    dnnl::memory::desc from_, to_, pad_;
    dnnl::reorder reorder_;
    std::size_t bytes_;
};

}  // namespace

std::shared_ptr<const cpu_kernel> with_input_reordered(std::shared_ptr<const cpu_kernel> inner, std::size_t index,
                                                       const dnnl::memory::desc& from, const dnnl::memory::desc& to,
                                                       const shape& staged) {
    return std::make_shared<input_reorder_kernel>(std::move(inner), index, from, to, staged);
}

kept_constant constant_in_layout(const kernel_request& r, std::size_t index, const dnnl::memory::desc& from,
                                 const dnnl::memory::desc& to) {
    const auto& engine = cpu_engine();
    dnnl::memory source;
    argument restored;  // the values, when the form is one of Kiln's own layouts
    if (const packed_constant* form = r.packed_input(index); form != nullptr && own_layout::is_own(*form)) {
        // Packed by another kind of kernel (a literal several kernels read): its plain values, laid out
        // as the literal's, which `from` describes.
        restored = restore_packed_constant(*form, r.input_shapes[index].as_standard());
        source = dnnl::memory(from, engine, restored.data());
    } else if (form != nullptr) {
        const packed_descs descs = read_packed_layout(*form, r.input_shapes[index]);
        if (form->adoptable && descs.packed == to)
            return {index, dnnl::memory(to, engine, form->bytes.data()), from, form->bytes, nullptr};
        // Another layout (another implementation chosen): straight from the packed one.
        source = dnnl::memory(descs.packed, engine, form->bytes.data());
    } else {
        source = dnnl::memory(from, engine, r.constant_inputs[index].data());
    }
    // Zeroed (large buffers come zeroed from the kernel, with no pass of their own).
    std::shared_ptr<std::byte> storage = allocate_aligned(to.get_size());
    dnnl::memory copy(to, engine, storage.get());
    dnnl::stream stream(engine);
    dnnl::reorder(source, copy).execute(stream, source, copy);
    stream.wait();
    return {index, copy, from, {}, std::move(storage)};
}

}  // namespace kiln::dnnl_support
