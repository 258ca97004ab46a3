#pragma once
// The part of a .kiln file that lets a dynamic program imported from ONNX
// import its model again for new extents: the ranges of its parameters, the
// import options, and the model's bytes (in the data section).
#include <string>

#include "io/json_codec.hpp"
#include "kiln/program.hpp"

namespace kiln::io {

struct source_record {
    json meta;          // "dynamic" metadata, without the model's place
    std::string model;  // bytes for the data section
};

// What to save of p's specialiser; fails for a front end that cannot be saved.
source_record record_source(const program& p);

// Gives p the specialiser `meta` describes, whose model is `model`.
void restore_source(program& p, const json& meta, std::string model);

}  // namespace kiln::io
