#include "targets/gpu/kernels/host_fallback_kernel.hpp"

#include "kiln/errors.hpp"
#include "kiln/target.hpp"
#include "targets/ref/ref_target.hpp"

namespace kiln {

argument download_view(gpu_device& device, gpu_stream stream, const argument& device_value) {
    const shape& s = device_value.get_shape();
    const std::size_t bytes = s.bytes();
    std::shared_ptr<std::byte> host = allocate_aligned(bytes);
    if (bytes != 0) device.copy_to_host(host.get(), device_value.data(), bytes, stream);
    return argument(s, host, host.get());
}

void upload_view(gpu_device& device, gpu_stream stream, const argument& values, const argument& device_value) {
    const shape& s = device_value.get_shape();
    if (s.bytes() == 0) return;
    if (s.standard() && values.get_shape().standard()) {
        device.copy_to_device(device_value.data(), values.data(), s.bytes(), stream);
        return;
    }
    // Keep the bytes between the view's elements: read the span, write into it, send it back.
    argument span = download_view(device, stream, device_value);
    copy_values(values, span);
    device.copy_to_device(device_value.data(), span.data(), s.bytes(), stream);
}

host_fallback_kernel::host_fallback_kernel(operation op, shape output_shape, std::vector<const module*> modules)
    : op_(std::move(op)), output_shape_(std::move(output_shape)) {
    for (const module* m : modules) {
        auto copies = copy_with_submodules(*m);
        modules_.push_back(std::move(copies.front()));
        for (std::size_t i = 1; i < copies.size(); ++i) nested_.push_back(std::move(copies[i]));
    }
}

void host_fallback_kernel::run(const gpu_launch& launch, const argument& result, const std::vector<argument>& inputs) const {
    std::vector<argument> host_inputs;
    host_inputs.reserve(inputs.size());
    for (const auto& in : inputs) host_inputs.push_back(download_view(launch.device, launch.stream, in));
    argument host_result;
    if (modules_.empty()) {
        host_result = op_.evaluate(output_shape_, host_inputs);
    } else {
        module_runner runner = [this](std::size_t index, const std::vector<argument>& args) {
            const module& sub = *modules_.at(index);
            auto names = sub.get_parameter_names();
            if (names.size() != args.size())
                fail(error_kind::runtime, "module '" + sub.name() + "' takes " + std::to_string(names.size()) +
                                              " inputs, got " + std::to_string(args.size()));
            parameter_map params;
            for (std::size_t i = 0; i < names.size(); ++i) params.emplace(names[i], args[i]);
            return evaluate_module(sub, params);
        };
        host_result = op_.evaluate(output_shape_, host_inputs, runner);
    }
    upload_view(launch.device, launch.stream, host_result, result);
    // The host buffers go away when this returns: the copies must be done.
    launch.device.synchronize(launch.stream);
}

}  // namespace kiln
