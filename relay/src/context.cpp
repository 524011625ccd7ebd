// HTTP request/response contexts (docs/protocol.md §3): the codec-independent entry points. The JSON codec
// is in context_json.cpp, msgpack in context_msgpack.cpp, the shared decoding rules in context_decode.hpp.
#include "ferry/relay/context.hpp"

#include "context_codec.hpp"
#include "ferry/relay/frame.hpp"

namespace ferry::relay {
namespace {

std::size_t estimate(const RequestContext &c)
{
    std::size_t n =
        160 + c.remote_addr.size() + c.protocol.size() + c.method.size() + c.uri.size() + c.raw_query.size();
    for (const auto &h : c.headers) {
        n += h.name.size() + 8;
        for (const auto &v : h.values)
            n += v.size() + 4;
    }
    for (const auto &[k, v] : c.cookies)
        n += k.size() + v.size() + 8;
    return n;
}

} // namespace

std::uint8_t codec_flag(Codec c)
{
    return c == Codec::msgpack ? flag::codec_msgpack : flag::codec_json;
}

void encode_request(const RequestContext &ctx, Codec codec, std::string &out)
{
    out.reserve(out.size() + estimate(ctx));
    if (codec == Codec::msgpack)
        detail::encode_msgpack(ctx, out);
    else
        detail::encode_json(ctx, out);
}

Result<void> decode_response(std::string_view in, Codec codec, ResponseContext &out)
{
    out.status = 200;
    out.headers.clear();
    if (in.empty())
        return {};
    try {
        return codec == Codec::msgpack ? detail::decode_msgpack(in, out) : detail::decode_json(in, out);
    } catch (const std::exception &e) { // allocation failure and the like
        return fail(std::string("response context: ") + e.what());
    }
}

} // namespace ferry::relay
