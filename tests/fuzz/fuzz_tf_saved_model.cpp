// libFuzzer target for SavedModel directories (saved_model.pb, the variables'
// index table and their data shard, read by kiln::parse_tf): any input must
// either parse into a verified program or raise kiln::error. A crash, a hang,
// a sanitizer report or any other exception is a bug.
//
// One fuzz input is a whole directory, packed as
//   u32 LE  bytes of saved_model.pb
//   u32 LE  bytes of variables/variables.index
//   saved_model.pb, variables.index, then the rest: variables.data-00000-of-00001
// (tests/fuzz/pack_saved_model.py packs a real directory as a seed). Lengths
// past the end are cut to what is there, so mutations keep reaching the
// parser; an empty part is a missing file.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "kiln/kiln.hpp"
#include "kiln/tf.hpp"

namespace {

namespace fs = std::filesystem;

std::uint32_t read_u32(const std::uint8_t* p) {
    return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
           static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}

// One directory per process, rewritten for every input and removed at exit.
struct scratch_directory {
    fs::path path;
    scratch_directory() {
        std::string pattern = (fs::temp_directory_path() / "kiln_fuzz_saved_model_XXXXXX").string();
        if (mkdtemp(pattern.data()) == nullptr) std::abort();
        path = pattern;
        fs::create_directories(path / "variables");
    }
    ~scratch_directory() {
        std::error_code ignored;
        fs::remove_all(path, ignored);
    }
};

const fs::path& scratch_dir() {
    static const scratch_directory dir;
    return dir.path;
}

// Writes `size` bytes at `data` to `path`, or removes the file for an empty part.
void put_file(const fs::path& path, const std::uint8_t* data, std::size_t size) {
    std::error_code ignored;
    fs::remove(path, ignored);
    if (size == 0) return;
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 8) return 0;
    const std::size_t body = size - 8;
    const std::size_t pb_size = std::min<std::size_t>(read_u32(data), body);
    const std::size_t index_size = std::min<std::size_t>(read_u32(data + 4), body - pb_size);
    const std::uint8_t* pb = data + 8;
    const std::uint8_t* index = pb + pb_size;
    const std::uint8_t* shard = index + index_size;
    const fs::path& dir = scratch_dir();
    put_file(dir / "saved_model.pb", pb, pb_size);
    put_file(dir / "variables" / "variables.index", index, index_size);
    put_file(dir / "variables" / "variables.data-00000-of-00001", shard, body - pb_size - index_size);
    try {
        kiln::program p = kiln::parse_tf(dir.string());
        kiln::verify_program(p);
    } catch (const kiln::error&) {
        // Rejected with a clear error: the expected outcome for most inputs.
    }
    return 0;
}
