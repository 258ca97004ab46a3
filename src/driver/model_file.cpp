#include "driver/model_file.hpp"

#include <filesystem>

#include "kiln/onnx.hpp"
#include "kiln/serialize.hpp"

namespace kiln::driver {

program load_model(const std::string& path, std::size_t batch) {
    std::string ext = std::filesystem::path(path).extension().string();
    if (ext == ".onnx") {
        onnx_options options;
        options.default_dim_value = batch;
        return parse_onnx(path, options);
    }
    // Anything else is read as a .kiln file, whose loader recognises foreign files by their magic bytes.
    return load(path);
}

}  // namespace kiln::driver
