// Scratch files for fuzz targets whose entry point reads a path: one folder per process
// (removed at exit), a file rewritten for every input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ampc::fuzz {

// The process's scratch folder, created on first use.
const std::string& scratch_dir();

// Writes the bytes to scratch_dir()/name and returns the file's path.
std::string write_scratch(const std::string& name, const uint8_t* data, size_t size);

}  // namespace ampc::fuzz
