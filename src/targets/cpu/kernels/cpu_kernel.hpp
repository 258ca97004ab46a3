#pragma once
// A kernel is what the cpu plan runs for one instruction. It is built once,
// when the module is lowered, and may prepare whatever makes it fast then:
// a oneDNN primitive, weights reordered into the primitive's layout. Running
// it allocates nothing; it writes the result into memory the plan provides,
// and may use `scratch`, a per-run buffer of scratch_bytes().
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kiln/argument.hpp"
#include "kiln/operation.hpp"

namespace kiln {

class cpu_kernel {
public:
    virtual ~cpu_kernel() = default;
    virtual void run(const argument& result, const std::vector<argument>& inputs, std::byte* scratch) const = 0;
    virtual std::size_t scratch_bytes() const { return 0; }
    // Whether the kernel made its own copy of constant input `index` when it
    // was built (weights in the primitive's layout) and never reads that
    // input while running: the plan may then drop the literal's bytes.
    virtual bool keeps_own_copy(std::size_t /*index*/) const { return false; }
    // Writes the values of such an input, restored from the kernel's copy,
    // into `into`: new memory with the input's shape and strides (for saving,
    // printing and verifying the program).
    virtual void restore_constant(std::size_t index, const argument& into) const;
    // Bytes of the kernel's own copies of constants.
    virtual std::size_t own_copy_bytes() const { return 0; }
    // The kernel's copy of constant input `index` in its own layout, for a
    // compiled file to store (so that loading it packs nothing); null when
    // the kernel keeps none or cannot read such a copy back.
    virtual std::shared_ptr<const packed_constant> packed_copy(std::size_t /*index*/) const { return nullptr; }
    // Bytes of constants the kernel reads in place from a loaded file's
    // packed weights (kernel_request::packed), which it did not pack.
    virtual std::size_t adopted_bytes() const { return 0; }
    // The type the kernel computes in ("int8"), for `kiln perf` and `kiln
    // read`, when its instruction's types do not tell: a kernel that fuses
    // quantized inputs with a float32 result, or one that emulates a type
    // in a wider one. Empty: what the instruction's types say.
    virtual std::string arithmetic() const { return {}; }
    // The input whose memory the result may take when nothing reads that
    // input after this step (same bytes), or -1: the kernel reads all of it
    // before it writes any of the result, or each element just before it
    // writes the same one. A residual copied into the result first (the
    // int8 kernels' sum post-op) then needs no copy.
    virtual int result_may_take_input() const { return -1; }
};

// A kernel that runs `inner_` with an operand or its result staged
// elsewhere: the constants it keeps in its own copy are inner's, so that the
// plan releases their literals (and restores them) through the wrapper.
class wrapping_kernel : public cpu_kernel {
public:
    explicit wrapping_kernel(std::shared_ptr<const cpu_kernel> inner) : inner_(std::move(inner)) {}
    bool keeps_own_copy(std::size_t index) const override { return inner_->keeps_own_copy(index); }
    void restore_constant(std::size_t index, const argument& into) const override { inner_->restore_constant(index, into); }
    std::size_t own_copy_bytes() const override { return inner_->own_copy_bytes(); }
    std::shared_ptr<const packed_constant> packed_copy(std::size_t index) const override {
        return inner_->packed_copy(index);
    }
    std::size_t adopted_bytes() const override { return inner_->adopted_bytes(); }
    // Wrappers stage inputs before running inner and the result after it: inner's answer holds.
    int result_may_take_input() const override { return inner_->result_may_take_input(); }

protected:
    std::shared_ptr<const cpu_kernel> inner_;
};

// What a kernel factory knows about the instruction it builds for.
struct kernel_request {
    const operation& op;
    const std::vector<shape>& input_shapes;
    const shape& output_shape;
    // The value of each input that is a literal (weights); empty for the others.
    const std::vector<argument>& constant_inputs;
    int threads;  // the threads the kernel is built and run for: the compile option resolved, >= 1
    // A loaded file's packed form of each constant input, or null: such an
    // input's constant_inputs entry has its shape but no data, and a kernel
    // that packs it takes the packed bytes (in place when the layouts match)
    // instead. A kernel that does not keep its own copy of such an input is
    // built again with the plain values. Null: no input is packed.
    const std::vector<std::shared_ptr<const packed_constant>>* packed = nullptr;

    // Whether input `index` is a constant, given as values or packed.
    bool is_constant(std::size_t index) const {
        return !constant_inputs[index].empty() || packed_input(index) != nullptr;
    }
    const packed_constant* packed_input(std::size_t index) const {
        return packed != nullptr && index < packed->size() ? (*packed)[index].get() : nullptr;
    }
};

}  // namespace kiln
