#include "targets/cpu/lowering/literal_hand_over.hpp"

namespace kiln {

literal_hand_over::literal_hand_over(const module& m) {
    for (const auto& ins : m) {
        if (ins.is_literal()) {
            literal_behind_[&ins] = &ins;
            uses_[&ins];
            continue;
        }
        const int alias = ins.is_return() ? -1 : ins.get_operator().output_alias(ins.input_shapes());
        for (std::size_t i = 0; i < ins.inputs().size(); ++i) {
            const instruction* lit = literal_behind(*ins.inputs()[i]);
            if (lit == nullptr) continue;
            if (alias == static_cast<int>(i))
                literal_behind_[&ins] = lit;  // a view: its readers read the literal
            else if (alias >= 0 || ins.is_return())
                uses_[lit].all_kept = false;  // returned, or an operand of a view: no kernel keeps it
            else
                ++uses_[lit].left;
        }
    }
}

const instruction* literal_hand_over::literal_behind(const instruction& value) const {
    auto it = literal_behind_.find(&value);
    return it == literal_behind_.end() ? nullptr : it->second;
}

void literal_hand_over::kernel_built(const instruction& value, std::size_t byte_offset,
                                     const std::shared_ptr<const cpu_kernel>& kernel, std::size_t index) {
    const instruction* lit = literal_behind(value);
    if (lit == nullptr) return;
    auto& u = uses_.at(lit);
    const shape& seen = value.get_shape();
    // Restoring through the view must write every element of the literal once.
    const bool covers_exactly =
        byte_offset == 0 && seen.elements() == lit->get_shape().elements() && seen.packed();
    if (!covers_exactly || !kernel->keeps_own_copy(index)) {
        u.all_kept = false;
    } else if (!u.restore) {
        u.restore = [kernel, index, seen, whole = lit->get_shape()] {
            argument values(whole);
            kernel->restore_constant(index, argument(seen, values.data()));
            return values;
        };
        u.packed = kernel->packed_copy(index);
    }
    if (--u.left == 0 && u.all_kept) {
        lit->get_literal().hand_over(std::move(u.restore), std::move(u.packed));
        u.handed = true;
    }
}

bool literal_hand_over::handed_over(const instruction& lit) const {
    auto it = uses_.find(&lit);
    return it != uses_.end() && it->second.handed;
}

}  // namespace kiln
