// Boost.Process v2 in Boost 1.81 needs these before <boost/process/v2.hpp> with BOOST_PROCESS_USE_STD_FS
// (docs/architecture.md, "Workers", trap 1); default_launcher.hpp also uses asio::detail::throw_error without
// including it. Include this instead of Boost.Process directly.
#pragma once
// clang-format off
#include <boost/optional.hpp>
#include <boost/type_traits.hpp>
#include <boost/asio/detail/throw_error.hpp>
#include <boost/process/v2.hpp>
// clang-format on
