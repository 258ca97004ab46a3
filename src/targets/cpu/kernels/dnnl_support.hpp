#pragma once
// What the oneDNN-backed kernels share: the engine, memory descriptors made
// from Kiln shapes, post-op chains in oneDNN's terms, and running a
// primitive on a plan's buffers with a user-provided scratchpad.
#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kiln/argument.hpp"
#include "ops/post_ops.hpp"
#include "targets/cpu/kernels/cpu_kernel.hpp"

namespace kiln::dnnl_support {

const dnnl::engine& cpu_engine();

// A float32 descriptor with the shape's own lens and strides (a zero
// stride becomes a unit dimension, which oneDNN broadcasts).
dnnl::memory::desc plain_desc(const shape& s);
// The same with the dims given explicitly (e.g. a tensor seen with fewer
// or more dimensions); `strides` in elements, elements of `type`.
dnnl::memory::desc strided_desc(const std::vector<std::size_t>& dims, const std::vector<std::size_t>& strides,
                                dnnl::memory::data_type type = dnnl::memory::data_type::f32);
// [N, C, H, W] stored as [N, C/b, H, W, b], b = block (8 or 16).
dnnl::memory::desc blocked_desc(const shape& plain, std::size_t block);
// The channel block oneDNN's convolutions run fastest in on this CPU: 16 where
// oneDNN runs AVX-512 code (avx512_core or above), 8 otherwise.
// KILN_CPU_CHANNEL_BLOCK=8 or 16 overrides it (to compare the two).
std::size_t preferred_channel_block();

// oneDNN's form of a chain, or nothing when a kind has no oneDNN equivalent.
// `operand_descs` describe the binary operands in the destination's dims.
std::optional<dnnl::post_ops> make_post_ops(const op::post_op_chain& chain,
                                            const std::vector<dnnl::memory::desc>& operand_descs);

// Position in the chain of the k-th binary post-op (oneDNN numbers operands by it).
std::size_t post_op_index(const op::post_op_chain& chain, std::size_t k);

using arg_descs = std::vector<std::pair<int, dnnl::memory::desc>>;
using fixed_args = std::unordered_map<int, dnnl::memory>;

// A constant input the primitive reads from its own reordered copy: where
// the copy is and how the input's values are laid out (its shape and
// strides), so that they can be restored from it.
struct kept_constant {
    std::size_t input = 0;  // index among the instruction's inputs
    dnnl::memory copy;
    dnnl::memory::desc plain;
    // The loaded packed bytes `copy` reads in place, kept alive; empty when
    // the copy is the kernel's own.
    argument adopted;
    // Owns the buffer of a copy the kernel made (zeroed before the reorder:
    // it writes no byte of the padding between rows or blocks, and a saved
    // file must not hold whatever was there).
    std::shared_ptr<void> storage;
};

// Constant input `index` of `r` in layout `to`, its values described by
// `from`: the packed bytes the request carries, used in place when they are
// already in `to` and may be adopted, or reordered into a new copy (from
// the packed bytes when the request carries them, else from the values).
kept_constant constant_in_layout(const kernel_request& r, std::size_t index, const dnnl::memory::desc& from,
                                 const dnnl::memory::desc& to);

// A kernel running one primitive; it knows where each of the primitive's
// arguments comes from at run time.
class primitive_kernel final : public cpu_kernel {
public:
    // `slots` maps a oneDNN argument id to an input index of the instruction
    // (or result_slot); `fixed` holds arguments prepared once (weights).
    static constexpr int result_slot = -1;
    // `kept` are the constants the kernel copied; `read_in_place` the
    // constants `fixed` points into, kept alive by the kernel.
    primitive_kernel(dnnl::primitive p, std::vector<std::pair<int, dnnl::memory::desc>> descs, std::vector<int> slots,
                     std::unordered_map<int, dnnl::memory> fixed, std::size_t scratch_bytes,
                     std::vector<kept_constant> kept = {}, std::vector<argument> read_in_place = {});
    void run(const argument& result, const std::vector<argument>& inputs, std::byte* scratch) const override;
    std::size_t scratch_bytes() const override { return scratch_bytes_; }
    bool keeps_own_copy(std::size_t index) const override;
    void restore_constant(std::size_t index, const argument& into) const override;
    std::size_t own_copy_bytes() const override;
    std::shared_ptr<const packed_constant> packed_copy(std::size_t index) const override;
    std::size_t adopted_bytes() const override;

private:
    // The argument map of one run, its memory objects pointed at each run's
    // buffers: making them afresh cost ~2 us a call (MobileNetV2 runs 55).
    struct bound_args {
        std::unordered_map<int, dnnl::memory> args;
        std::vector<dnnl::memory> run_time;  // matching descs_, then the scratchpad
    };
    std::unique_ptr<bound_args> take_bound_args(const argument& result, const std::vector<argument>& inputs,
                                                std::byte* scratch) const;

    dnnl::primitive primitive_;
    std::vector<std::pair<int, dnnl::memory::desc>> descs_;  // per run-time argument
    std::vector<int> slots_;                                 // matching descs_
    std::unordered_map<int, dnnl::memory> fixed_;
    dnnl::memory::desc scratch_desc_;
    std::size_t scratch_bytes_ = 0;
    std::vector<kept_constant> kept_;
    std::vector<argument> read_in_place_;
    // Argument maps not in use; one per run in flight, so that concurrent
    // runs of a program never share one. Empty when an argument's layout
    // has a padding area, which oneDNN zeroes whenever a handle is set.
    bool reuse_args_ = true;
    mutable std::mutex idle_mutex_;
    mutable std::vector<std::unique_ptr<bound_args>> idle_args_;
};

// Runs `inner` on input `index` reordered from `from` into `to` in a buffer
// at the start of scratch, seen there as `staged`. The reorder's own
// scratchpad is user-provided (after the buffer), as every primitive's.
std::shared_ptr<const cpu_kernel> with_input_reordered(std::shared_ptr<const cpu_kernel> inner, std::size_t index,
                                                       const dnnl::memory::desc& from, const dnnl::memory::desc& to,
                                                       const shape& staged);

// Scratchpad handled by Kiln, so that concurrent runs use separate memory.
dnnl::primitive_attr user_scratchpad_attr();

}  // namespace kiln::dnnl_support
