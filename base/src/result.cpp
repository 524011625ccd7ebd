#include "ferry/base/result.hpp"

#include <stdexcept>

namespace ferry {

void throw_exception_from_error(const Error &e, const boost::source_location &where)
{
    throw std::logic_error(std::string("value() of a failed Result (") + where.file_name() + ":" +
                           std::to_string(where.line()) + "): " + e.message);
}

} // namespace ferry
