// Graphviz pictures of a graph: op nodes filled by the element type they compute in
// (fp32 / fp16 / bf16 / integer / bool), edges labelled with shapes.
#pragma once

#include <string>

#include "ir/graph.h"

namespace ampc::report {

std::string to_dot(const ir::Model& model);

// Renders DOT text to an SVG file with Graphviz's `dot`; a missing `dot` is a clear error
// and no file is left behind on failure.
void write_svg(const std::string& dot_text, const std::string& path);

// s as a Graphviz quoted string (quotes and backslashes escaped, newlines as \n).
std::string dot_quote(const std::string& s);

}  // namespace ampc::report
