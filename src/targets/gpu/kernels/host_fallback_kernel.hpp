#pragma once
// Runs an op the device has no kernel for on the host: copies the memory its
// inputs span to the host, computes with the op's reference compute, and
// copies the result back. Correct for every op, slow, and it waits for the
// device, so a plan that holds one is never recorded into a graph. `kiln
// perf` names it ("host_reference") so that it is never a silent slowdown.
#include <memory>
#include <vector>

#include "kiln/module.hpp"
#include "targets/gpu/kernels/gpu_kernel.hpp"

namespace kiln {

class host_fallback_kernel final : public gpu_kernel {
public:
    // `modules`: the instruction's module arguments (if / loop), run on the
    // host by the reference evaluator.
    host_fallback_kernel(operation op, shape output_shape, std::vector<const module*> modules);
    void run(const gpu_launch& launch, const argument& result, const std::vector<argument>& inputs) const override;
    bool capturable() const override { return false; }
    std::string algorithm() const override { return "host_reference"; }

private:
    operation op_;
    shape output_shape_;
    // Copies (the program may change or go away): one per module argument,
    // and the modules those call.
    std::vector<std::unique_ptr<module>> modules_;
    std::vector<std::unique_ptr<module>> nested_;
};

// Copies the memory the view `device_value` spans to the host and returns a
// host argument with the same shape (strides included) over that copy.
argument download_view(gpu_device& device, gpu_stream stream, const argument& device_value);
// Writes the values of host `values` into the device view `device_value`
// (same lens; any strides on either side).
void upload_view(gpu_device& device, gpu_stream stream, const argument& values, const argument& device_value);

}  // namespace kiln
