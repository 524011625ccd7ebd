// Boost.Asio compiled once, here, for every Ferry target (BOOST_ASIO_SEPARATE_COMPILATION).
#include <boost/asio/impl/src.hpp>
