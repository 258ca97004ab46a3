#pragma once
// How program::compile lowers a program: options every target reads (the
// ones a target does not use it ignores). Saved with a compiled .kiln file.
#include <map>
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
    // Time every eligible algorithm of an instruction with several (cpu:
    // convolution, matmul ...) on its real shapes and keep the fastest,
    // instead of the fixed rule. Slower compile; the choices are saved with
    // the compiled file, so loading it times nothing.
    bool exhaustive_tune = false;
    // A JSON file of earlier tuning results (empty: none): a tuned compile
    // reads it first, times only what it lacks, and writes the new results
    // back. Only compile reads it.
    std::string tuning_cache;
    // The algorithm each instruction of the main module runs, by its printed
    // name ("@12"): what a loaded compiled file recorded. Filled by load();
    // an algorithm that is unknown or no longer eligible falls back to the
    // default rule with a warning.
    std::map<std::string, std::string> pinned_algorithms;
    // A directory of compiled programs (empty: none), keyed by the program,
    // its input shapes and dtypes, these options, the target, Kiln's version
    // and the CPU: a program compiled before is loaded (its weights mapped)
    // instead of compiled, and a new one is stored. Dynamic programs compile
    // as usual. Only compile reads it.
    std::string cache_dir;
    // Passes that choose a layout by a length (target::
    // passes_choosing_layout_by_length) choose the one that serves every
    // length instead: set by the compile of a dynamic program whose ends
    // differed in such a layout only, so that one program serves the range.
    bool layouts_for_every_extent = false;
    // Set by the compile of a dynamic program for the programs it optimises
    // at a range's extents: those passes then choose layouts that the
    // extents near each other share (target::passes_choosing_layout_by_length),
    // so that one program, and one copy of its weights, serves the range.
    bool layouts_within_a_range = false;
};

}  // namespace kiln
