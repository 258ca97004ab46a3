#pragma once
// Turns a CUDA runtime, cuBLAS or cuDNN status into a Kiln error that names
// the call that failed and the library's own words for why.
#include <string>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "kiln/errors.hpp"

namespace kiln {

inline void check_cuda(cudaError_t status, const char* call) {
    if (status != cudaSuccess)
        fail(error_kind::runtime, std::string("CUDA: ") + call + " failed: " + cudaGetErrorName(status) + " (" +
                                      cudaGetErrorString(status) + ")");
}

inline void check_cublas(cublasStatus_t status, const char* call) {
    if (status != CUBLAS_STATUS_SUCCESS)
        fail(error_kind::runtime, std::string("cuBLAS: ") + call + " failed: " + cublasGetStatusName(status) + " (" +
                                      cublasGetStatusString(status) + ")");
}

inline void check_cudnn(cudnnStatus_t status, const char* call) {
    if (status != CUDNN_STATUS_SUCCESS)
        fail(error_kind::runtime, std::string("cuDNN: ") + call + " failed: " + cudnnGetErrorString(status));
}

}  // namespace kiln

// The call's own text names it in the error.
#define KILN_CUDA(call) ::kiln::check_cuda((call), #call)
#define KILN_CUBLAS(call) ::kiln::check_cublas((call), #call)
#define KILN_CUDNN(call) ::kiln::check_cudnn((call), #call)
