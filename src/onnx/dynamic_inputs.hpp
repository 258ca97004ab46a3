#pragma once
// Dynamic ONNX imports: which graph inputs map_dyn_input_dims and
// default_dyn_dim_value give ranges, and the specialiser that imports the
// model again, statically, for each set of extents in those ranges.
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "kiln/onnx.hpp"
#include "onnx.pb.h"
#include "onnx/initializer_cache.hpp"

namespace kiln::onnx_import {

// The graph inputs (not initializers) that get a range, with their shapes.
// Rejects names that are not graph inputs or that both maps name.
std::map<std::string, shape> dynamic_input_shapes(const onnx::GraphProto& graph, const onnx_options& options,
                                                  const std::string& source);

// `options` without ranges: fixed entries of map_dyn_input_dims move to
// map_input_dims, and a fixed default_dyn_dim_value becomes default_dim_value.
onnx_options without_ranges(const onnx_options& options);

// `options` (without ranges) importing the dynamic inputs at `lens`.
onnx_options at_extents(const onnx_options& options, const parameter_lens& lens);

// Imports the model again from where it came: the file (which must not have
// changed since) or a copy of the buffer, each import's initializers shared
// through `initializers` (one is made when null).
std::shared_ptr<const specialiser> file_specialiser(const std::string& path, const onnx_options& options,
                                                    std::shared_ptr<initializer_cache> initializers = nullptr);
std::shared_ptr<const specialiser> buffer_specialiser(const void* data, std::size_t size, const onnx_options& options,
                                                      const std::filesystem::path& model_dir = {},
                                                      std::shared_ptr<initializer_cache> initializers = nullptr);

// What a saved dynamic program keeps of its ONNX import: the model's bytes,
// the options (without ranges) and the folder external data resolves in.
struct source_image {
    std::string model;
    onnx_options options;
    std::filesystem::path model_dir;
};
// The image of an ONNX specialiser (a file is read again, and must not have
// changed); nullopt for a specialiser of another front end.
std::optional<source_image> image_of(const specialiser& s);
std::shared_ptr<const specialiser> specialiser_from_image(source_image image,
                                                          std::shared_ptr<initializer_cache> initializers = nullptr);

}  // namespace kiln::onnx_import
