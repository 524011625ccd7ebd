// Whether the peer of a connected socket is still there, asked without reading anything: the server asks it
// of a client before and while PHP works for it, and the pool asks it through the socket's descriptor (a
// request waiting for a worker, a request whose client may have left: pool's Client). Safe from any thread
// while the descriptor stays open.
#pragma once

namespace ferry {

// The peer reset the connection (an error is pending on the socket). A FIN, a half-close, is not a reset:
// such a client still reads its answer.
bool peer_reset(int fd);

// peer_reset(), or the peer closed its side (a FIN with nothing unread before it): nobody will read an
// answer (nginx's 499). One recv(MSG_PEEK) that takes nothing.
bool peer_left(int fd);

} // namespace ferry
