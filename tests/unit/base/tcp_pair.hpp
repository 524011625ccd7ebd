// A connected TCP pair on 127.0.0.1 for tests that need a real client socket (base's peer_test, the pool's
// allocator test): `client` and `server` descriptors, closed by the destructor; reset() makes the server's
// side reset the connection (SO_LINGER 0), close() sends a FIN.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace ferry::test {

struct TcpPair {
    int client = -1, server = -1;

    TcpPair()
    {
        int listener = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 ||
            ::listen(listener, 1) != 0 ||
            ::getsockname(listener, reinterpret_cast<sockaddr *>(&a), &len) != 0)
            return;
        client = ::socket(AF_INET, SOCK_STREAM, 0);
        if (::connect(client, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0)
            server = ::accept(listener, nullptr, nullptr);
        ::close(listener);
    }
    ~TcpPair()
    {
        if (client >= 0)
            ::close(client);
        if (server >= 0)
            ::close(server);
    }
    TcpPair(const TcpPair &) = delete;
    TcpPair &operator=(const TcpPair &) = delete;

    bool ok() const { return client >= 0 && server >= 0; }

    // The server's side resets the connection; the client's socket has ECONNRESET pending once it arrives.
    void reset()
    {
        linger l{1, 0};
        ::setsockopt(server, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        ::close(server);
        server = -1;
        settle();
    }
    // The server's side closes (a FIN).
    void close()
    {
        ::close(server);
        server = -1;
        settle();
    }

private:
    // Loopback delivers at once; a moment for the kernel to process it.
    static void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }
};

} // namespace ferry::test
