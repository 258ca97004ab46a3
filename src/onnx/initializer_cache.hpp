#pragma once
// The main graph's initializers of one model, shared by its imports at
// different extents: a dynamic program imports the model again for each
// extent it optimises (BERT-base: the range's two ends and its middle), and
// each import would otherwise copy every weight out of the file again
// (0.44 GB for BERT-base, three times: most of the compile's time went to
// zeroing the fresh pages). Later imports' literals share the first's bytes.
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "kiln/argument.hpp"

namespace kiln::onnx_import {

class initializer_cache {
public:
    // The literal of main-graph initializer `index` named `name`, made by
    // `make` on first use. Imports of one model run from several threads.
    literal get(std::size_t index, const std::string& name, const std::function<literal()>& make) {
        {
            const std::lock_guard<std::mutex> lock(mutex_);
            if (auto found = literals_.find({index, name}); found != literals_.end()) return found->second;
        }
        literal made = make();
        const std::lock_guard<std::mutex> lock(mutex_);
        return literals_.emplace(std::make_pair(index, name), std::move(made)).first->second;
    }

private:
    std::mutex mutex_;
    std::map<std::pair<std::size_t, std::string>, literal> literals_;
};

}  // namespace kiln::onnx_import
