#include "control/exposition.hpp"

#include <cstdio>

namespace ferry::server::detail {

void number(std::string &out, double v)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    out += buf;
}

void family(std::string &out, const char *name, const char *type, const char *help)
{
    out += "# HELP ";
    out += name;
    out += ' ';
    out += help;
    out += "\n# TYPE ";
    out += name;
    out += ' ';
    out += type;
    out += '\n';
}

void sample(std::string &out, const std::string &name, const std::string &labels, double v)
{
    out += name;
    if (!labels.empty()) {
        out += '{';
        out += labels;
        out += '}';
    }
    out += ' ';
    number(out, v);
    out += '\n';
}

} // namespace ferry::server::detail
