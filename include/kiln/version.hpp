#pragma once
namespace kiln {
inline constexpr const char* version = "0.1.0";
}  // namespace kiln
