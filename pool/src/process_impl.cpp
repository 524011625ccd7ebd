// Boost.Process v2 compiled once (BOOST_PROCESS_V2_SEPARATE_COMPILATION); this also brings the
// process_environment implementation that does not link header-only (docs/architecture.md, "Workers", trap
// 2).
#include "process_shim.hpp"
#include <boost/process/v2/src.hpp>
