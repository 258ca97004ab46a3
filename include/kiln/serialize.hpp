#pragma once
// Saving and loading programs as .kiln files.
//
// A .kiln file is a fixed 64-byte binary header (magic, format version, flags,
// offsets and sizes of the sections, checksums), a JSON metadata section (the
// modules, their instructions and, for a compiled program, the target and
// compile options) and a data section holding every literal's raw bytes at a
// 64-byte aligned file offset, so that weights can later be mapped in place.
// A compiled program is reloaded without re-running passes: its optimized
// modules are stored and the executable is rebuilt with lower_compiled.
// From format 3 on, weights the compiled program's kernels keep packed are
// stored packed (a literal's "packed" member says how), so that a load on
// the machine and Kiln version that wrote them ("packed_for") packs nothing:
// the kernels read them in place from the mapping, shared between processes.
// Anywhere else they are restored, packed again, and a warning says so.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kiln/program.hpp"

namespace kiln {

// Newest .kiln format version this build writes and reads. Older versions
// from oldest_format_version on load too; a newer one is refused with an
// error naming its version and the Kiln that wrote it.
inline constexpr std::uint32_t kiln_format_version = 3;
inline constexpr std::uint32_t oldest_format_version = 1;

struct load_options {
    // The header and metadata checksums are always checked. The weights'
    // checksum reads every byte of them (about 0.3 s for BERT-base's 440 MB),
    // which loading a mapped file otherwise never does, so it is asked for:
    // the compile cache asks, as it must never trust a damaged entry.
    bool verify_weights = false;
};

void save(const program& p, const std::string& path);
// Maps the file: the program's literals point into the mapping (shared with
// other processes loading the same file) and keep it alive. Files in format
// version 1 are read into memory instead (their checksum covers every byte).
// Raises error_kind::file_not_found for a missing file and error_kind::parse_error
// for anything wrong with its contents; messages name the file.
program load(const std::string& path, const load_options& options = {});

// The bytes save() would write.
std::string save_buffer(const program& p);
// Errors name the source as "buffer". Every checksum is checked; literals are copied.
program load_buffer(const void* data, std::size_t size);

}  // namespace kiln
