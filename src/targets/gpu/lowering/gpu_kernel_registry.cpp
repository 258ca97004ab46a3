#include "targets/gpu/lowering/gpu_kernel_registry.hpp"

#include "kiln/op_registry.hpp"
#include "targets/gpu/kernels/host_fallback_kernel.hpp"
#ifdef KILN_GPU
#include "targets/gpu/cuda/cuda_kernels.hpp"
#endif

namespace kiln {

namespace {
std::shared_ptr<const gpu_kernel> device_kernel([[maybe_unused]] const gpu_kernel_request& request) {
#ifdef KILN_GPU
    if (request.device.runs_cuda_kernels()) return make_cuda_kernel(request);
#endif
    return nullptr;
}
}  // namespace

chosen_gpu_kernel make_gpu_kernel(const gpu_kernel_request& request, const std::vector<const module*>& modules) {
    if (modules.empty()) {
        if (auto k = device_kernel(request)) return {k, false};
        bool strided = false;
        std::vector<shape> standard;
        for (const auto& s : request.input_shapes) {
            strided = strided || !s.standard();
            standard.push_back(s.as_standard());
        }
        if (strided) {
            gpu_kernel_request packed{request.op, standard, request.output_shape, request.constant_inputs, request.device};
            if (auto k = device_kernel(packed)) return {k, true};
        }
    }
    return {std::make_shared<host_fallback_kernel>(request.op, request.output_shape, modules), false};
}

std::shared_ptr<const gpu_kernel> make_gpu_standard_copy(const shape& source, gpu_device& device) {
    const operation op = make_op("contiguous");
    const std::vector<shape> inputs = {source};
    const shape output = source.as_standard();
    const std::vector<argument> constants(1);
    gpu_kernel_request request{op, inputs, output, constants, device};
    if (auto k = device_kernel(request)) return k;
    return std::make_shared<host_fallback_kernel>(op, output, std::vector<const module*>{});
}

}  // namespace kiln
