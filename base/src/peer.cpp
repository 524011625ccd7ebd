#include "ferry/base/peer.hpp"

#include <cerrno>
#include <sys/socket.h>

namespace ferry {

bool peer_reset(int fd)
{
    // A reset leaves ECONNRESET (or another error) pending on the socket; a FIN does not.
    int err = 0;
    socklen_t len = sizeof err;
    return ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err != 0;
}

bool peer_left(int fd)
{
    if (peer_reset(fd))
        return true;
    char c;
    ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

} // namespace ferry
