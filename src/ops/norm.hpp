#pragma once
// Normalizations: softmax and log_softmax along an axis, batch_norm_inference,
// layer_norm and rms_norm. Floating types only; results are standard-strided.
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln::op {

// exp(x - max) / sum(exp(x - max)) along `axis`.
struct softmax : op_base {
    std::int64_t axis = -1;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.axis, "axis");
    }
    std::string name() const { return "softmax"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

// x - max - log(sum(exp(x - max))) along `axis`.
struct log_softmax : op_base {
    std::int64_t axis = -1;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.axis, "axis");
    }
    std::string name() const { return "log_softmax"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

// Inputs x [N, C, ...], scale, bias, mean, variance (each [C]):
// scale * (x - mean) / sqrt(variance + epsilon) + bias per channel.
struct batch_norm_inference : op_base {
    double epsilon = 1e-5;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.epsilon, "epsilon");
    }
    std::string name() const { return "batch_norm_inference"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

// Inputs x, optional scale, optional bias. Normalizes over dimensions
// axis..rank-1 (mean and biased variance), then multiplies by scale and
// adds bias, both broadcast against those trailing dimensions.
struct layer_norm : op_base {
    std::int64_t axis = -1;
    double epsilon = 1e-5;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.axis, "axis");
        f(self.epsilon, "epsilon");
    }
    std::string name() const { return "layer_norm"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

// Inputs x, optional scale. x / sqrt(mean(x^2) + epsilon) over dimensions
// axis..rank-1, times scale broadcast against them: layer_norm without the
// mean taken out (ONNX RMSNormalization; Llama's and T5's norms).
struct rms_norm : op_base {
    std::int64_t axis = -1;
    double epsilon = 1e-5;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.axis, "axis");
        f(self.epsilon, "epsilon");
    }
    std::string name() const { return "rms_norm"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

}  // namespace kiln::op
