#pragma once
// The gpu target: lowers a module to a plan whose values live in device
// memory (one planned arena, weights uploaded at compile time) and whose
// kernels run on the device's stream; a run is recorded once and replayed as
// a graph. Built on CUDA (-DKILN_GPU=ON) it runs on an NVIDIA GPU; on a
// host-backed device it runs the same plan in host memory (tests, CI).
#include <memory>

#include "kiln/target.hpp"
#include "targets/gpu/gpu_device.hpp"

namespace kiln {

class gpu_target final : public target {
public:
    explicit gpu_target(std::shared_ptr<gpu_device> device) : device_(std::move(device)) {}
    std::string name() const override { return "gpu"; }
    // The device model and compute capability: a compiled program's kernels were chosen for them.
    std::string identity() const override { return device_->description(); }
    pass_list get_passes(const compile_options& options) const override;
    std::shared_ptr<executable> lower(const module& m, const compile_options& options) const override;

    memory_location memory() const override { return memory_location::device; }
    argument allocate(const shape& s) const override;
    argument copy_to(const argument& host) const override;
    argument copy_from(const argument& device_value) const override;
    void synchronize() const override { device_->synchronize_device(); }

    gpu_device& device() const { return *device_; }

private:
    std::shared_ptr<gpu_device> device_;
};

}  // namespace kiln
