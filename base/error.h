// The one error type every layer throws for problems the user can act on (bad model, bad
// option, unsupported op). The command line prints its message on one line and exits 1.
#pragma once

#include <stdexcept>
#include <string>

namespace ampc {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace ampc
