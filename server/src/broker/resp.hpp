// Redis's protocol (RESP2) for the broker (internal to server/; docs/cluster.md): replies parsed by hiredis's
// reader (libhiredis-dev), commands written here (an array of bulk strings, appended to the connection's
// buffer in place), the bytes moved by Asio on the loop. Only hiredis's reader is used, not its async
// context: its adapter model (callbacks that add and remove read and write interest on a descriptor it owns
// and frees inside its callbacks) fights Asio's ownership of the socket and of the coroutines' lifetimes; the
// reader (incremental, any split, nested replies) is the part worth not writing again.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct redisReader;

namespace ferry::server::detail::broker {

struct Reply {
    enum class Type : std::uint8_t { string, array, integer, nil, status, error };
    Type type = Type::nil;
    std::string str;             // string, status, error
    long long integer = 0;       // integer
    std::vector<Reply> elements; // array

    bool is_status(std::string_view s) const { return type == Type::status && str == s; }
    // For a log line: "+OK", "-ERR ...", ":3", "*3", "$5 hello" (bounded).
    std::string describe() const;
};

// Appends one command ("SUBSCRIBE", "ferry:t:chat") in RESP to `out`.
void append_command(std::string &out, std::initializer_list<std::string_view> args);
void append_command(std::string &out, const std::vector<std::string_view> &args);

// Replies out of the bytes a server sends, however they are split.
class ReplyReader {
public:
    // A reply nested deeper than hiredis's 7 levels, an array of more than `max_elements` items, or more
    // than `max_buffered` bytes held for one reply is an error (a peer that is not Redis cannot make the
    // server hold much).
    explicit ReplyReader(std::size_t max_elements = 1u << 20, std::size_t max_buffered = 64u << 20);
    ~ReplyReader();
    ReplyReader(const ReplyReader &) = delete;
    ReplyReader &operator=(const ReplyReader &) = delete;

    bool feed(const char *data, std::size_t n); // false: an error (error() says which)
    enum class Got { reply, more, error };
    Got next(Reply &out);
    // Why the bytes are not RESP: "Protocol error, got \"H\" as reply type byte".
    const std::string &error() const { return error_; }

    // What the reader's callbacks check (resp.cpp).
    struct Limits {
        std::size_t max_elements;
        bool too_many = false;
    };

private:
    redisReader *reader_;
    std::size_t max_buffered_;
    std::string error_;
    Limits limits_;
};

} // namespace ferry::server::detail::broker
