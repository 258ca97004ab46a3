// literal's storage: its bytes, or once handed over, how to restore them.
#include <mutex>

#include "kiln/argument.hpp"

namespace kiln {

struct literal::storage {
    std::mutex mutex;
    argument bytes;            // empty once handed over
    restore_function restore;  // set by the hand-over
    std::shared_ptr<const packed_constant> packed;  // a kernel's layout of the values, when known
};

literal::literal(const argument& a) { adopt(a.contiguous()); }

literal::literal(const shape& s, const std::function<void(std::byte*)>& fill) {
    argument values(s.as_standard());
    fill(values.data());
    adopt(std::move(values));
}

literal literal::sharing(const argument& standard_values) {
    if (!standard_values.get_shape().standard() || !standard_values.owns_memory())
        fail(error_kind::invalid_argument, "literal::sharing: the " + to_string(standard_values.get_shape()) +
                                               " argument must be standard-strided and have an owner");
    standard_values.require_host("literal::sharing");
    literal out;
    out.adopt(standard_values);
    return out;
}

literal literal::packed(const shape& s, std::shared_ptr<const packed_constant> form) {
    if (!s.standard() || form == nullptr)
        fail(error_kind::invalid_argument, "literal::packed: needs a standard shape and a packed form, got " + to_string(s));
    literal out;
    out.shape_ = s;
    out.storage_ = std::make_shared<storage>();
    out.storage_->packed = std::move(form);
    return out;
}

void literal::adopt(argument standard_values) {
    shape_ = standard_values.get_shape();
    storage_ = std::make_shared<storage>();
    storage_->bytes = std::move(standard_values);
}

argument literal::get_argument() const {
    if (storage_ == nullptr) return {};
    restore_function restore;
    {
        std::lock_guard<std::mutex> lock(storage_->mutex);
        if (!storage_->restore && storage_->packed != nullptr)
            fail(error_kind::runtime, "the values of a " + to_string(shape_) +
                                          " literal stored packed for a target's kernels are not available until the "
                                          "program is lowered for that target");
        if (!storage_->restore) return storage_->bytes;
        restore = storage_->restore;
    }
    argument values = restore();
    if (values.get_shape().lens() != shape_.lens() || values.get_shape().type() != shape_.type() ||
        !values.get_shape().standard())
        fail(error_kind::runtime, "a handed-over literal of shape " + to_string(shape_) + " was restored as " +
                                      to_string(values.get_shape()));
    return values;
}

void literal::hand_over(restore_function restore, std::shared_ptr<const packed_constant> form) const {
    if (storage_ == nullptr || !restore) return;
    std::lock_guard<std::mutex> lock(storage_->mutex);
    // The latest hand-over wins, so an earlier compiled program's kernels
    // are not kept alive by the literal once that program is gone.
    storage_->restore = std::move(restore);
    storage_->bytes = argument();
    storage_->packed = std::move(form);  // the latest kernel's, or none
}

bool literal::holds_bytes() const {
    if (storage_ == nullptr) return false;
    std::lock_guard<std::mutex> lock(storage_->mutex);
    return !storage_->restore && storage_->packed == nullptr;
}

std::shared_ptr<const packed_constant> literal::packed_form() const {
    if (storage_ == nullptr) return nullptr;
    std::lock_guard<std::mutex> lock(storage_->mutex);
    return storage_->packed;
}

}  // namespace kiln
