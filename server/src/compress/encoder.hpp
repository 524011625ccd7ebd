// gzip and brotli encoders (internal to server/): zlib's deflate with the gzip wrapper and libbrotlienc's
// streaming encoder behind one interface that appends to a string, and libdeflate for whole gzip bodies (all
// three Debian's). The libraries are the codecs; this is only their loop over an output buffer.
#pragma once

#include "ferry/base/io.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace ferry::server::detail::compress {

enum class Coding : std::uint8_t { identity, gzip, br };

// "gzip", "br" ("" for identity): the Content-Encoding value.
std::string_view coding_name(Coding c);

// Whole bodies up to this are compressed at once on the event loop (at most ~1 ms at the default levels);
// larger ones and streams go in slices of this size with the loop served between them.
constexpr std::size_t slice_size = 64 * 1024;

// Lets what is queued on the loop run first, then goes on: a long computation done in pieces (compression in
// slices) takes the loop one piece at a time.
inline awaitable<void> yield_to_loop()
{
    const auto executor = co_await asio::this_coro::executor;
    co_await asio::post(executor, use_awaitable);
}

// The next slice (at most slice_size bytes) of `*rest`, taken off it; the loop is served first unless
// `*first` (then cleared). (Pointers: GCC 12 and coroutine reference parameters.)
inline awaitable<std::string_view> next_slice(std::string_view *rest, bool *first)
{
    if (!*first) {
        co_await yield_to_loop();
    }
    *first = false;
    const std::string_view slice = rest->substr(0, slice_size);
    rest->remove_prefix(slice.size());
    co_return slice;
}

class Encoder {
public:
    enum class Flush {
        none,   // more input follows: output may be held back
        sync,   // everything so far is decodable by the client now (a streamed response's flush)
        finish, // the end of the body
    };

    // `level`: zlib's 1-9 for gzip, brotli's quality 0-11. `size_hint`: the whole input's length when known
    // (brotli sizes its tables by it), 0 if not.
    Encoder(Coding coding, int level, std::size_t size_hint = 0);
    ~Encoder();
    Encoder(const Encoder &) = delete;
    Encoder &operator=(const Encoder &) = delete;

    // Compresses `in`, appending what comes out to `out`. False when the library fails (out of memory).
    bool write(std::string_view in, Flush flush, std::string &out);
    // Ready for a new body (gzip keeps its allocations; brotli starts a new instance).
    void reset(std::size_t size_hint = 0);
    Coding coding() const { return coding_; }
    int level() const { return level_; }

private:
    struct State;
    Coding coding_;
    int level_;
    std::unique_ptr<State> state_;
};

// `in` compressed whole into `out` (replaced): gzip by libdeflate with the compressor this thread keeps for
// the next body, brotli by an encoder sized for the input. False on failure.
bool compress_whole(Coding coding, int level, std::string_view in, std::string &out);

} // namespace ferry::server::detail::compress
