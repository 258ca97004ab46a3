#pragma once
// Turning a GraphDef that calls functions of its library (as TF2 SavedModels
// do: StatefulPartitionedCall into the model's traced function) into one flat
// graph that the graph importer reads.
#include <string>
#include <vector>

#include "graph.pb.h"

namespace kiln::tf_import {

// The nodes that `outputs` ("node" or "node:k") depend on, with every call of
// a library function (StatefulPartitionedCall, PartitionedCall, or an op
// named after a function) replaced by the function's body: its nodes are
// renamed "<call>/<node>" and the call becomes an IdentityN of the results,
// so that "<call>:k" still names result k. `source` names the graph in errors.
tf::GraphDef inline_functions(const tf::GraphDef& graph, const std::vector<std::string>& outputs,
                              const std::string& source);

}  // namespace kiln::tf_import
