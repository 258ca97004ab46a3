// fused_pointwise and single elementwise ops on the GPU: the instruction is
// translated once into a small program (pointwise_translation.cpp) that one
// generic CUDA kernel interprets per output element (pointwise_kernel.cu).
#include <memory>
#include <string>
#include <utility>

#include "targets/gpu/cuda/cuda_device.hpp"
#include "targets/gpu/cuda/cuda_kernels.hpp"
#include "targets/gpu/cuda/pointwise_program.hpp"
#include "targets/gpu/cuda/pointwise_translation.hpp"

namespace kiln {

namespace {

class cuda_pointwise_kernel final : public gpu_kernel {
public:
    explicit cuda_pointwise_kernel(const pointwise::program& prog) : program_(prog) {}

    void run(const gpu_launch& launch, const argument& result, const std::vector<argument>& inputs) const override {
        pointwise::buffers bufs;
        for (int k = 0; k < program_.num_inputs; ++k) bufs.inputs[k] = inputs[static_cast<std::size_t>(k)].data();
        bufs.output = result.data();
        if (program_.has_integer_division) {
            bufs.status = launch.status;
            bufs.status_code = launch.status_code;
        }
        pointwise::launch(program_, bufs, as_cuda(launch.stream));
    }

    std::string algorithm() const override { return "cuda_pointwise"; }

    bool reports_status() const override { return program_.has_integer_division; }
    std::string status_message() const override { return "integer division or modulo by zero"; }

private:
    pointwise::program program_;
};

}  // namespace

std::shared_ptr<const gpu_kernel> make_cuda_pointwise_kernel(const gpu_kernel_request& request) {
    if (request.op.name() != "fused_pointwise" && !request.op.is_pointwise()) return nullptr;
    auto prog = pointwise::translate(request);
    if (!prog) return nullptr;
    return std::make_shared<cuda_pointwise_kernel>(*prog);
}

}  // namespace kiln
