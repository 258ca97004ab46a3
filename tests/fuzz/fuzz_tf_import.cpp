// libFuzzer target for the TensorFlow importer: any byte string must either parse
// into a verified program or raise kiln::error. A crash, a hang, a sanitizer
// report or any other exception is a bug.
#include <cstddef>
#include <cstdint>

#include "kiln/kiln.hpp"
#include "kiln/tf.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        kiln::program p = kiln::parse_tf_buffer(data, size);
        kiln::verify_program(p);
    } catch (const kiln::error&) {
        // Rejected with a clear error: the expected outcome for most inputs.
    }
    return 0;
}
