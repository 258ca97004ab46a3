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
    // The most memory one run may need (planned intermediates plus outputs,
    // and no single value larger): compile refuses a program beyond it and
    // names its largest value. 0 means half of this machine's memory. Only
    // compile reads it: a saved compiled program does not keep it.
    std::size_t max_memory_bytes = 0;
};

}  // namespace kiln
