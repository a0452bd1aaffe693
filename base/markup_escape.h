// Text placed in XML, SVG or HTML (element content and double-quoted attribute values).
#pragma once

#include <string>

namespace ampc {

// `s` with & < > " written as entities.
std::string markup_escape(const std::string& s);

}  // namespace ampc
