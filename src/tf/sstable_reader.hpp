#pragma once
// Reading a LevelDB-format table (SSTable), the format of a TensorFlow tensor
// bundle's index file (variables/variables.index).
#include <map>
#include <string>

namespace kiln::tf_import {

// Every key and value of the table held in `bytes`; `source` names the file
// in errors. A malformed or truncated table, or a compressed block, raises
// a parse error.
std::map<std::string, std::string> read_sstable(const std::string& bytes, const std::string& source);

}  // namespace kiln::tf_import
