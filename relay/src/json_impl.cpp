// Boost.JSON compiled once, here, for every Ferry target (BOOST_JSON_NO_LIB; see the top CMakeLists).
#include <boost/json/src.hpp>
