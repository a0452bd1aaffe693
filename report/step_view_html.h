// `ampc inspect ... --html F.html`: the StepView as one self-contained page. The page's
// script and style (report/viewer/page.js, page.css) are compiled into ampc and
// written into the file with the step's JSON (step_view_json); nothing is fetched when the
// page is viewed. The page lays the graph out itself (see docs/viewer.md for why).
#pragma once

#include <string>

#include "report/step_view.h"

namespace ampc::report {

struct StepHtmlOptions {
  int collapse_depth = 1;  // name scopes at this depth open collapsed; 0: all expanded
};

std::string step_view_html(const StepView& view, const StepHtmlOptions& options = {});

}  // namespace ampc::report
