#include "report/step_view_html.h"

#include "base/markup_escape.h"
#include "report/viewer/viewer_assets.h"

namespace ampc::report {
namespace {

// Text safe inside <script> and <title>: "</" cannot end the element early.
std::string script_safe(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<' && i + 1 < s.size() && s[i + 1] == '/') {
      out += "<\\/";
      ++i;
      continue;
    }
    out += s[i];
  }
  return out;
}

}  // namespace

std::string step_view_html(const StepView& view, const StepHtmlOptions& options) {
  nlohmann::json data = step_view_json(view);
  data["collapse_depth"] = options.collapse_depth;
  std::string html;
  html += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>";
  html += markup_escape(view.title + " - ampc step view");
  html += "</title>\n<style>\n";
  html += viewer::kPageCss;
  html += "</style>\n</head>\n<body>\n";
  html += viewer::kPageBody;
  html += "<script type=\"application/json\" id=\"step-data\">";
  // Invalid UTF-8 in a name must not make the page unreadable: replaced, not thrown.
  html += script_safe(data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  html += "</script>\n<script>\n";
  html += viewer::kPageJs;
  html += "</script>\n</body>\n</html>\n";
  return html;
}

}  // namespace ampc::report
