#pragma once
// How program::compile lowers a program: options every target reads (the
// ones a target does not use it ignores). Saved with a compiled .kiln file.
#include <string>
#include <vector>

namespace kiln {

struct compile_options {
    // Copy host inputs to the target's memory and outputs back (no-op on host targets).
    bool offload_copy = true;
    // Worker threads for kernels; 0 means all cores.
    int threads = 0;
    // Print the IR and time of each pass to stderr.
    bool trace_passes = false;
    // Names of passes to skip.
    std::vector<std::string> disabled_passes;
    // Run the verifier after every pass (tests set it; a debug build of Kiln always does).
    bool verify_passes = false;
};

}  // namespace kiln
