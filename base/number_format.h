// Numbers for people: printf formatting, except that a NaN is always "nan" (glibc prints a
// NaN with its sign bit set, which the x86 arithmetic produces, as "-nan") and infinities
// are "inf" / "-inf", whatever the format.
#pragma once

#include <string>

namespace ampc {

// snprintf(format, v) for finite v (format holds one floating-point conversion, e.g. "%g",
// "%.4f"); "nan", "inf" or "-inf" otherwise.
std::string format_number(double v, const char* format = "%g");

}  // namespace ampc
