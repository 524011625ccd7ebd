// What a failed system call reported through an exception says to a user: the error's own text ("Address
// already in use"), not the "bind: ... [system:98 at /usr/include/boost/asio/...]" that Boost's what()
// builds.
#pragma once

#include <boost/system/system_error.hpp>

#include <exception>
#include <string>

namespace ferry::server::detail {

inline std::string error_text(const std::exception &e)
{
    if (const auto *se = dynamic_cast<const boost::system::system_error *>(&e)) {
        return se->code().message();
    }
    return e.what();
}

} // namespace ferry::server::detail
