#include "targets/gpu/host_backed_device.hpp"

#include <cstdlib>
#include <cstring>

#include "kiln/errors.hpp"

namespace kiln {

void* host_backed_device::allocate(std::size_t bytes) {
    // Never a null pointer for an empty buffer: null means "no buffer" to the plan.
    void* data = std::aligned_alloc(256, ((std::max<std::size_t>(bytes, 1) + 255) / 256) * 256);
    if (data == nullptr) fail(error_kind::runtime, "host-backed device: cannot allocate " + std::to_string(bytes) + " bytes");
    std::lock_guard<std::mutex> lock(mutex_);
    live_[static_cast<std::byte*>(data)] = bytes;
    traffic_.allocations++;
    traffic_.live_bytes += bytes;
    return data;
}

void host_backed_device::release(void* data) noexcept {
    if (data == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(static_cast<std::byte*>(data));
    if (it == live_.end()) return;
    traffic_.live_bytes -= it->second;
    live_.erase(it);
    std::free(data);
}

bool host_backed_device::owns(const void* data, std::size_t bytes) const {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto* p = static_cast<const std::byte*>(data);
    auto it = live_.upper_bound(p);
    if (it == live_.begin()) return false;
    --it;
    return p >= it->first && p + bytes <= it->first + it->second;
}

void host_backed_device::check_owned(const void* data, std::size_t bytes, const char* what) const {
    if (bytes != 0 && !owns(data, bytes))
        fail(error_kind::runtime, std::string("host-backed device: ") + what + " is not device memory (" +
                                      std::to_string(bytes) + " bytes)");
}

void host_backed_device::copy_to_device(void* device_dst, const void* host_src, std::size_t bytes, gpu_stream) {
    check_owned(device_dst, bytes, "the destination of a copy to the device");
    if (bytes != 0) std::memcpy(device_dst, host_src, bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    traffic_.bytes_to_device += bytes;
}

void host_backed_device::copy_to_host(void* host_dst, const void* device_src, std::size_t bytes, gpu_stream) {
    check_owned(device_src, bytes, "the source of a copy to the host");
    if (bytes != 0) std::memcpy(host_dst, device_src, bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    traffic_.bytes_to_host += bytes;
}

void host_backed_device::copy_on_device(void* device_dst, const void* device_src, std::size_t bytes, gpu_stream) {
    check_owned(device_dst, bytes, "the destination of a device copy");
    check_owned(device_src, bytes, "the source of a device copy");
    if (bytes != 0) std::memmove(device_dst, device_src, bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    traffic_.bytes_on_device += bytes;
}

void host_backed_device::fill_zero(void* device_dst, std::size_t bytes, gpu_stream) {
    check_owned(device_dst, bytes, "the destination of a fill");
    if (bytes != 0) std::memset(device_dst, 0, bytes);
}

gpu_stream host_backed_device::create_stream() {
    std::lock_guard<std::mutex> lock(mutex_);
    return reinterpret_cast<gpu_stream>(++tokens_);
}

gpu_event host_backed_device::create_event() {
    std::lock_guard<std::mutex> lock(mutex_);
    return reinterpret_cast<gpu_event>(++tokens_);
}

void host_backed_device::record_event(gpu_event, gpu_stream stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    traffic_.recorded_on.push_back(stream);
}

void host_backed_device::wait_event(gpu_stream stream, gpu_event) {
    std::lock_guard<std::mutex> lock(mutex_);
    traffic_.made_to_wait.push_back(stream);
}

device_traffic host_backed_device::traffic() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return traffic_;
}

}  // namespace kiln
