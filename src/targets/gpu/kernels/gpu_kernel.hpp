#pragma once
// A kernel is what the gpu plan runs for one instruction. It is built once,
// when the module is lowered, and may prepare whatever makes it fast then (a
// cuBLAS / cuDNN descriptor, weights in another layout in device memory).
// Running it only enqueues device work on the stream it is given: it neither
// allocates nor waits, so that a run can be recorded into a CUDA graph.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/argument.hpp"
#include "kiln/operation.hpp"
#include "targets/gpu/gpu_device.hpp"

namespace kiln {

// What a kernel gets when it runs.
struct gpu_launch {
    gpu_device& device;
    gpu_stream stream;
    std::byte* workspace;  // device memory of the kernel's workspace_bytes()
    // A device word, zero when the run starts. A kernel that finds bad data
    // (an index out of range) stores `status_code` there (any thread, plain
    // or atomic store) and leaves its result unspecified; after the run the
    // plan reads the word and raises the kernel's status_message() naming
    // the instruction. Only kernels whose reports_status() is true may write it.
    std::int32_t* status;
    std::int32_t status_code;
};

class gpu_kernel {
public:
    virtual ~gpu_kernel() = default;
    // Enqueues the computation of `result` from `inputs` on launch.stream.
    // Every argument's data() is a device pointer (never read it on the host);
    // shapes carry the strides the plan gave (inputs may be views; the result
    // is standard unless the factory accepted otherwise).
    virtual void run(const gpu_launch& launch, const argument& result, const std::vector<argument>& inputs) const = 0;
    virtual std::size_t workspace_bytes() const { return 0; }
    // Whether run() may be recorded into a graph (it only enqueues work).
    virtual bool capturable() const { return true; }
    // The name `kiln perf` and `kiln read` show, e.g. "cublas_gemm".
    virtual std::string algorithm() const = 0;
    // Bytes of device memory the kernel keeps of its own (reformatted weights).
    virtual std::size_t own_device_bytes() const { return 0; }
    // Whether run() may store a status (see gpu_launch::status), and what it means.
    virtual bool reports_status() const { return false; }
    virtual std::string status_message() const { return "the data is out of the op's range"; }
};

// What a kernel factory knows about the instruction it builds for.
struct gpu_kernel_request {
    const operation& op;
    const std::vector<shape>& input_shapes;  // with the strides the plan gives them
    const shape& output_shape;
    // The host value of each input that is a literal or a view of one
    // (weights), for kernels that prepare their own copy; empty for the others.
    const std::vector<argument>& constant_inputs;
    gpu_device& device;
};

}  // namespace kiln
