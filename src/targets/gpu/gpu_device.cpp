#include "targets/gpu/gpu_device.hpp"

namespace kiln {

std::shared_ptr<std::byte> gpu_device::allocate_shared(std::size_t bytes) {
    auto* data = static_cast<std::byte*>(allocate(bytes));
    if (auto self = weak_from_this().lock())
        return std::shared_ptr<std::byte>(data, [self](std::byte* p) { self->release(p); });
    return std::shared_ptr<std::byte>(data, [this](std::byte* p) { release(p); });
}

}  // namespace kiln
