#include "kiln/quantize.hpp"

namespace kiln {

calibration_method to_calibration_method(const std::string& name) {
    if (name == "max") return calibration_method::max;
    if (name == "percentile") return calibration_method::percentile;
    if (name == "entropy") return calibration_method::entropy;
    if (name == "mse") return calibration_method::mse;
    fail("unknown calibration method '" + name + "'; the methods are max, percentile, entropy and mse");
}

std::string to_string(calibration_method m) {
    switch (m) {
        case calibration_method::max:
            return "max";
        case calibration_method::percentile:
            return "percentile";
        case calibration_method::entropy:
            return "entropy";
        case calibration_method::mse:
            return "mse";
    }
    return "unknown";
}

}  // namespace kiln
