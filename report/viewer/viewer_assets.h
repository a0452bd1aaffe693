// The step view page's script, style and body markup (page.js, page.css, page.html in this
// folder), compiled in by CMake (viewer_assets.cc.in) so `ampc` writes them with no file of
// its own to find at run time.
#pragma once

namespace ampc::report::viewer {

extern const char* const kPageJs;
extern const char* const kPageCss;
extern const char* const kPageBody;

}  // namespace ampc::report::viewer
