// The project's error convention (docs/design-notes.md):
// - An expected failure (bad input, a config error, a worker that misbehaves, a full disk) is a value:
//   Result<T> holds a T or an Error that says what went wrong in words fit for a log line.
// - An outcome with several kinds the caller must tell apart (a request answered, timed out, dropped...)
//   is an enum in the value the caller gets, never an empty string or a bool beside an out-parameter.
// - Exceptions are for bugs (a broken invariant) and allocation failure; whoever catches one logs it as such.
#pragma once

#include <boost/system/result.hpp>

#include <string>

namespace ferry {

struct Error {
    std::string message;
};

// Result<T>::value() on an error is a bug: it throws std::logic_error carrying the message.
[[noreturn]] void throw_exception_from_error(const Error &e, const boost::source_location &where);

template <typename T = void> using Result = boost::system::result<T, Error>;

// `return fail("...")` from a function returning Result<T>.
inline Error fail(std::string message)
{
    return Error{std::move(message)};
}

} // namespace ferry
