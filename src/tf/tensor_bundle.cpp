// Reading tensors out of a tensor bundle. The index's empty key holds the
// header (shard count, endianness); every other key a tensor's entry.
#include "tf/tensor_bundle.hpp"

#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "kiln/errors.hpp"
#include "tf/protobuf_log_capture.hpp"  // why protobuf refused the bytes
#include "tf/sstable_reader.hpp"

namespace kiln::tf_import {

namespace {

std::string read_file(const std::string& path, const std::string& what) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
        fail(error_kind::file_not_found, what + " is missing: no file " + path);
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) fail(error_kind::file_not_found, "cannot read " + path);
    return bytes;
}

// CRC-32C (Castagnoli, reflected polynomial 0x82f63b78), one table lookup a byte.
constexpr std::array<std::uint32_t, 256> crc32c_table() {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1) ? 0x82f63b78U : 0U);
        t[i] = c;
    }
    return t;
}

// The bundle stores a numeric tensor's CRC-32C masked as LevelDB masks
// checksums: rotated right by 15 bits plus a constant.
std::uint32_t masked_crc32c(const std::string& bytes) {
    static constexpr auto table = crc32c_table();
    std::uint32_t crc = 0xffffffffU;
    for (char ch : bytes) crc = table[(crc ^ static_cast<unsigned char>(ch)) & 0xff] ^ (crc >> 8);
    crc ^= 0xffffffffU;
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8U;
}

}  // namespace

tensor_bundle::tensor_bundle(std::string prefix) : prefix_(std::move(prefix)) {
    const std::string index_path = prefix_ + ".index";
    auto table = read_sstable(read_file(index_path, "the variables' index"), index_path);
    auto header = table.find("");
    if (header == table.end())
        fail(error_kind::parse_error, index_path + ": the tensor bundle index has no header entry");
    protobuf_log_capture log;
    tf::BundleHeaderProto h;
    if (!h.ParseFromString(header->second))
        fail(error_kind::parse_error, index_path + ": the tensor bundle header is malformed (" + log.reason() + ")");
    if (h.endianness() != tf::BundleHeaderProto::LITTLE)
        fail(error_kind::not_implemented, index_path + ": the tensor bundle is big-endian");
    if (h.num_shards() < 1 || h.num_shards() > 99999)
        fail(error_kind::parse_error, index_path + ": bad shard count " + std::to_string(h.num_shards()));
    num_shards_ = h.num_shards();
    table.erase(header);
    for (auto& [key, value] : table) {
        tf::BundleEntryProto e;
        if (!e.ParseFromString(value))
            fail(error_kind::parse_error, index_path + ": the entry of '" + key + "' is malformed (" + log.reason() + ")");
        entries_.emplace(key, std::move(e));
    }
}

const tf::BundleEntryProto& tensor_bundle::entry(const std::string& key) const {
    auto it = entries_.find(key);
    if (it == entries_.end())
        fail(error_kind::invalid_argument, prefix_ + ".index: no tensor '" + key + "' in the variables");
    return it->second;
}

std::string tensor_bundle::shard_path(int shard) const {
    char suffix[40];
    std::snprintf(suffix, sizeof suffix, ".data-%05d-of-%05d", shard, num_shards_);
    return prefix_ + suffix;
}

std::string tensor_bundle::read_bytes(const std::string& key, const tf::BundleEntryProto& e) const {
    if (e.slices_size() > 0)
        fail(error_kind::not_implemented,
             prefix_ + ": tensor '" + key + "' is stored in slices (partitioned variable)");
    if (e.shard_id() < 0 || e.shard_id() >= num_shards_)
        fail(error_kind::parse_error, prefix_ + ": tensor '" + key + "' names shard " + std::to_string(e.shard_id()) +
                                          " of " + std::to_string(num_shards_));
    const std::string path = shard_path(e.shard_id());
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
        fail(error_kind::file_not_found, "the variables' data file is missing: no file " + path);
    auto file_size = std::filesystem::file_size(path, ec);
    if (ec || e.offset() < 0 || e.size() < 0 || static_cast<std::uintmax_t>(e.offset()) > file_size ||
        static_cast<std::uintmax_t>(e.size()) > file_size - static_cast<std::uintmax_t>(e.offset()))
        fail(error_kind::parse_error, path + ": tensor '" + key + "' (" + std::to_string(e.size()) +
                                          " bytes at offset " + std::to_string(e.offset()) +
                                          ") lies past the end of the file (truncated?)");
    std::string bytes(static_cast<std::size_t>(e.size()), '\0');
    std::ifstream in(path, std::ios::binary);
    in.seekg(e.offset());
    if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size())))
        fail(error_kind::file_not_found, "cannot read tensor '" + key + "' from " + path);
    return bytes;
}

tf::TensorProto tensor_bundle::tensor(const std::string& key) const {
    const auto& e = entry(key);
    if (e.dtype() == tf::DT_STRING || e.dtype() == tf::DT_RESOURCE || e.dtype() == tf::DT_VARIANT)
        fail(error_kind::not_implemented, prefix_ + ": tensor '" + key + "' is not numeric");
    tf::TensorProto t;
    t.set_dtype(e.dtype());
    *t.mutable_tensor_shape() = e.shape();
    std::string bytes = read_bytes(key, e);
    if (masked_crc32c(bytes) != e.crc32c())
        fail(error_kind::parse_error, shard_path(e.shard_id()) + ": the data of tensor '" + key +
                                          "' does not match its checksum (the file is corrupt)");
    t.set_tensor_content(std::move(bytes));
    return t;
}

// A string tensor's data: the strings' lengths as varints, a 4-byte
// checksum of them, then the strings' bytes.
std::string tensor_bundle::scalar_string(const std::string& key) const {
    const auto& e = entry(key);
    if (e.dtype() != tf::DT_STRING || e.shape().dim_size() != 0)
        fail(error_kind::parse_error, prefix_ + ": tensor '" + key + "' is not a scalar string");
    std::string bytes = read_bytes(key, e);
    std::uint64_t length = 0;
    std::size_t pos = 0;
    for (int shift = 0;; shift += 7) {
        if (pos >= bytes.size() || shift >= 64)
            fail(error_kind::parse_error, prefix_ + ": string tensor '" + key + "' is malformed");
        auto byte = static_cast<unsigned char>(bytes[pos++]);
        length |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
        if ((byte & 0x80) == 0) break;
    }
    pos += 4;
    if (pos > bytes.size() || length != bytes.size() - pos)
        fail(error_kind::parse_error, prefix_ + ": string tensor '" + key + "' has a wrong length");
    return bytes.substr(pos);
}

}  // namespace kiln::tf_import
