#pragma once
// Which of a module's literals the cpu kernels all keep their own copies of
// (weights reordered for a primitive), so that the literals can drop their
// bytes. A literal is handed over as soon as the last of its users is built,
// which frees the original bytes while the next kernels pack theirs: the
// weights are never all held twice. Users see a literal directly or through
// views (a transposed weight matrix); a literal that is returned, read by a
// kernel that keeps no copy, or seen through a view that does not cover it
// exactly keeps its bytes.
#include <cstddef>
#include <memory>
#include <unordered_map>

#include "kiln/module.hpp"
#include "targets/cpu/kernels/cpu_kernel.hpp"

namespace kiln {

class literal_hand_over {
public:
    explicit literal_hand_over(const module& m);

    // The literal `value` is, or is a view of; nullptr for other values.
    const instruction* literal_behind(const instruction& value) const;

    // `kernel` was built for an instruction reading `value` (a literal or a
    // view of one, `byte_offset` into it) as its input `index`.
    void kernel_built(const instruction& value, std::size_t byte_offset,
                      const std::shared_ptr<const cpu_kernel>& kernel, std::size_t index);

    // Whether the literal `lit` was handed over to its kernels (all built).
    bool handed_over(const instruction& lit) const;

private:
    struct uses {
        std::size_t left = 0;  // reads by instructions whose kernels are not built yet
        bool all_kept = true;  // every kernel built so far keeps its own copy
        literal::restore_function restore;
        std::shared_ptr<const packed_constant> packed;  // the restoring kernel's copy, for saving
        bool handed = false;
    };

    std::unordered_map<const instruction*, const instruction*> literal_behind_;
    std::unordered_map<const instruction*, uses> uses_;
};

}  // namespace kiln
