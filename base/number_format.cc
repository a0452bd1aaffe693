#include "base/number_format.h"

#include <cmath>
#include <cstdio>

namespace ampc {

std::string format_number(double v, const char* format) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace ampc
