// Writing output files so that a failed command never leaves a partial file behind.
#pragma once

#include <string>
#include <string_view>

namespace ampc {

// Writes to a temporary file beside `path`, then renames it over `path`.
void write_file_atomically(const std::string& path, std::string_view bytes);

// A temporary path beside `path` that the caller fills and then renames or removes.
std::string temp_path_beside(const std::string& path);

std::string read_file(const std::string& path);

}  // namespace ampc
