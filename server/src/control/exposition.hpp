// Prometheus text exposition pieces shared by the /metrics families (metrics.cpp, limit_metrics.cpp).
#pragma once

#include <string>

namespace ferry::server::detail {

// `# HELP` and `# TYPE` lines of a family.
void family(std::string &out, const char *name, const char *type, const char *help);
// `name{labels} value`; labels is "" or `k="v",...` (values here never need escaping: fixed words, numbers).
void sample(std::string &out, const std::string &name, const std::string &labels, double v);
// A number as the exposition format writes it (%.17g).
void number(std::string &out, double v);

} // namespace ferry::server::detail
