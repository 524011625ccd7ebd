#include "encoder.hpp"

#include <brotli/encode.h>
#include <libdeflate.h>
#include <zlib.h>

#include <algorithm>

namespace ferry::server::detail::compress {

std::string_view coding_name(Coding c)
{
    switch (c) {
    case Coding::gzip:
        return "gzip";
    case Coding::br:
        return "br";
    case Coding::identity:
        break;
    }
    return "";
}

struct Encoder::State {
    z_stream z{};
    bool z_ready = false;
    BrotliEncoderState *br = nullptr;

    ~State()
    {
        if (z_ready)
            deflateEnd(&z);
        if (br)
            BrotliEncoderDestroyInstance(br);
    }
};

namespace {

// Brotli's window: 2^18 bytes (256 KiB) rather than the 4 MiB default keeps a stream's encoder small; text
// responses gain little from a longer one.
constexpr int brotli_window = 18;

BrotliEncoderState *new_brotli(int quality, std::size_t size_hint)
{
    BrotliEncoderState *s = BrotliEncoderCreateInstance(nullptr, nullptr, nullptr);
    if (!s)
        return nullptr;
    BrotliEncoderSetParameter(s, BROTLI_PARAM_QUALITY, static_cast<std::uint32_t>(quality));
    BrotliEncoderSetParameter(s, BROTLI_PARAM_LGWIN, brotli_window);
    BrotliEncoderSetParameter(s, BROTLI_PARAM_MODE, BROTLI_MODE_TEXT);
    if (size_hint > 0)
        BrotliEncoderSetParameter(s, BROTLI_PARAM_SIZE_HINT,
                                  static_cast<std::uint32_t>(std::min<std::size_t>(size_hint, 1u << 30)));
    return s;
}

bool deflate_into(z_stream &z, std::string_view in, int flush, std::string &out)
{
    z.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(in.data()));
    z.avail_in = static_cast<uInt>(in.size());
    for (;;) {
        const std::size_t before = out.size();
        const std::size_t room = std::max<std::size_t>(deflateBound(&z, z.avail_in) + 64, 4096);
        out.resize(before + room);
        z.next_out = reinterpret_cast<Bytef *>(out.data() + before);
        z.avail_out = static_cast<uInt>(room);
        const int rc = deflate(&z, flush);
        out.resize(before + room - z.avail_out);
        if (rc == Z_STREAM_END)
            return true;
        if (rc == Z_BUF_ERROR) // no progress was possible although there was room: nothing left to do
            return flush != Z_FINISH && z.avail_in == 0;
        if (rc != Z_OK)
            return false;
        // Done when all input is taken and (for a flush) the output did not fill the room given; a finish
        // goes on to Z_STREAM_END.
        if (flush != Z_FINISH && z.avail_in == 0 && (flush == Z_NO_FLUSH || z.avail_out > 0))
            return true;
    }
}

bool brotli_into(BrotliEncoderState *s, std::string_view in, BrotliEncoderOperation op, std::string &out)
{
    std::size_t avail_in = in.size();
    const auto *next_in = reinterpret_cast<const std::uint8_t *>(in.data());
    for (;;) {
        std::size_t avail_out = 0;
        if (!BrotliEncoderCompressStream(s, op, &avail_in, &next_in, &avail_out, nullptr, nullptr))
            return false;
        std::size_t n = 0;
        const std::uint8_t *produced = BrotliEncoderTakeOutput(s, &n);
        out.append(reinterpret_cast<const char *>(produced), n);
        if (avail_in > 0 || BrotliEncoderHasMoreOutput(s))
            continue;
        if (op == BROTLI_OPERATION_FINISH && !BrotliEncoderIsFinished(s))
            continue;
        return true;
    }
}

} // namespace

Encoder::Encoder(Coding coding, int level, std::size_t size_hint)
    : coding_(coding), level_(level), state_(std::make_unique<State>())
{
    reset(size_hint);
}

Encoder::~Encoder() = default;

void Encoder::reset(std::size_t size_hint)
{
    if (coding_ == Coding::gzip) {
        if (state_->z_ready) {
            deflateReset(&state_->z);
        } else {
            // windowBits 15 + 16: the gzip wrapper; memLevel 8: zlib's default (256 KiB of state in all).
            state_->z_ready =
                deflateInit2(&state_->z, level_, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK;
        }
    } else if (coding_ == Coding::br) {
        if (state_->br)
            BrotliEncoderDestroyInstance(state_->br);
        state_->br = new_brotli(level_, size_hint);
    }
}

bool Encoder::write(std::string_view in, Flush flush, std::string &out)
{
    if (coding_ == Coding::gzip) {
        if (!state_->z_ready)
            return false;
        const int f = flush == Flush::none ? Z_NO_FLUSH : flush == Flush::sync ? Z_SYNC_FLUSH : Z_FINISH;
        return deflate_into(state_->z, in, f, out);
    }
    if (coding_ == Coding::br) {
        if (!state_->br)
            return false;
        const auto op = flush == Flush::none   ? BROTLI_OPERATION_PROCESS
                        : flush == Flush::sync ? BROTLI_OPERATION_FLUSH
                                               : BROTLI_OPERATION_FINISH;
        return brotli_into(state_->br, in, op, out);
    }
    out.append(in);
    return true;
}

namespace {

// libdeflate's whole-buffer gzip: 3× zlib's speed at level 1 and smaller output (54 µs against 183 µs for
// 20 KiB of JSON here: bench/compression.sh), the reason it is used for whole bodies; it has no streaming,
// so streams and sliced bodies go through zlib.
bool deflate_whole(int level, std::string_view in, std::string &out)
{
    struct Deleter {
        void operator()(libdeflate_compressor *c) const { libdeflate_free_compressor(c); }
    };
    thread_local std::unique_ptr<libdeflate_compressor, Deleter> compressor; // the loop's, one body at a time
    thread_local int compressor_level = -1;
    if (!compressor || compressor_level != level) {
        compressor.reset(libdeflate_alloc_compressor(level));
        compressor_level = level;
        if (!compressor)
            return false;
    }
    const std::size_t bound = libdeflate_gzip_compress_bound(compressor.get(), in.size());
    out.resize(bound);
    const std::size_t n = libdeflate_gzip_compress(compressor.get(), in.data(), in.size(), out.data(), bound);
    out.resize(n);
    return n > 0;
}

} // namespace

bool compress_whole(Coding coding, int level, std::string_view in, std::string &out)
{
    out.clear();
    if (coding == Coding::gzip)
        return deflate_whole(level, in, out);
    Encoder e(coding, level, in.size());
    out.reserve(in.size() / 3 + 64);
    return e.write(in, Encoder::Flush::finish, out);
}

} // namespace ferry::server::detail::compress
