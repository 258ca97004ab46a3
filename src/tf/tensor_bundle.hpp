#pragma once
// A TensorFlow tensor bundle (a checkpoint, and a SavedModel's variables):
// `<prefix>.index`, a LevelDB table mapping each tensor's checkpoint key to
// a BundleEntryProto, and the data shards `<prefix>.data-0000N-of-0000M`.
#include <map>
#include <string>

#include "saved_model.pb.h"

namespace kiln::tf_import {

class tensor_bundle {
public:
    // Reads `<prefix>.index`; a missing or malformed index raises an error.
    explicit tensor_bundle(std::string prefix);

    bool contains(const std::string& key) const { return entries_.contains(key); }
    // The tensor under `key` as a TensorProto holding its bytes (numeric types only).
    tf::TensorProto tensor(const std::string& key) const;
    // The scalar string tensor under `key`.
    std::string scalar_string(const std::string& key) const;

private:
    const tf::BundleEntryProto& entry(const std::string& key) const;
    std::string shard_path(int shard) const;
    std::string read_bytes(const std::string& key, const tf::BundleEntryProto& e) const;

    std::string prefix_;
    int num_shards_ = 1;
    std::map<std::string, tf::BundleEntryProto> entries_;
};

}  // namespace kiln::tf_import
