// MultipartParser: a body parsed whole and again in small pieces reports the same parts and the same error;
// the parts then go into a FormTree (fields with add, files with add_file), encoded in both codecs. The
// input's first line is the Content-Type whose boundary is used (boundary_of), "XyZ" when it has none.
#include "form_check.hpp"

#include "forms/multipart.hpp"

#include <string>
#include <vector>

namespace {

using ferry::server::HttpResult;
using ferry::server::detail::MultipartParser;
using ferry::server::detail::PartHeaders;

struct Part {
    PartHeaders headers;
    std::string data;
};

struct Recorder final : ferry::server::detail::MultipartHandler {
    std::vector<Part> parts;
    bool open = false;
    HttpResult<void> part_begin(const PartHeaders &h) override
    {
        FUZZ_CHECK(!open);
        open = true;
        parts.push_back({h, {}});
        return {};
    }
    HttpResult<void> part_data(std::string_view b) override
    {
        FUZZ_CHECK(open);
        parts.back().data.append(b);
        return {};
    }
    HttpResult<void> part_end() override
    {
        FUZZ_CHECK(open);
        open = false;
        return {};
    }
};

struct Outcome {
    std::vector<Part> parts;
    int error = 0;
    std::string message;
};

Outcome parse(std::string_view boundary, std::string_view body, std::size_t step,
              MultipartParser::Limits limits)
{
    Recorder rec;
    MultipartParser p(boundary, limits, rec);
    Outcome o;
    HttpResult<void> r;
    for (std::size_t pos = 0; pos < body.size() && r;) {
        std::size_t n = step == 0 ? body.size() - pos : std::min(step, body.size() - pos);
        r = p.feed(body.substr(pos, n));
        pos += n;
    }
    if (r)
        r = p.finish();
    if (!r) {
        o.error = r.error().status;
        o.message = r.error().message;
        FUZZ_CHECK(o.error >= 400 && o.error <= 599 && !r.error().message.empty());
    } else {
        FUZZ_CHECK(!rec.open);
    }
    FUZZ_CHECK(rec.parts.size() <= limits.max_parts);
    o.parts = std::move(rec.parts);
    return o;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    fuzz::Input in(data, size);
    std::size_t step = fuzz::piece(in.byte());
    MultipartParser::Limits limits;
    if (in.byte() & 1) {
        limits.max_part_header = 64;
        limits.max_parts = 4;
    }
    std::string_view rest = in.rest();
    auto nl = rest.find('\n');
    std::string_view type = nl == std::string_view::npos ? std::string_view{} : rest.substr(0, nl);
    std::string_view body = nl == std::string_view::npos ? rest : rest.substr(nl + 1);
    auto boundary = MultipartParser::boundary_of(type);
    if (boundary) {
        FUZZ_CHECK(!boundary->empty() && boundary->size() <= 70);
        FUZZ_CHECK(MultipartParser::is_multipart(type));
    }
    std::string b = boundary ? *boundary : std::string("XyZ");

    Outcome whole = parse(b, body, 0, limits);
    Outcome parts = parse(b, body, step == 0 ? 1 : step, limits);
    if (whole.error != parts.error)
        std::fprintf(stderr, "whole: %d %s; in pieces of %zu: %d %s\n", whole.error, whole.message.c_str(),
                     step == 0 ? 1 : step, parts.error, parts.message.c_str());
    FUZZ_CHECK(whole.error == parts.error);
    // After an error, what was reported before it may differ by a held-back tail: compare complete bodies.
    FUZZ_CHECK(whole.error != 0 || whole.parts.size() == parts.parts.size());
    for (std::size_t i = 0; whole.error == 0 && i < whole.parts.size(); ++i) {
        const auto &x = whole.parts[i], &y = parts.parts[i];
        FUZZ_CHECK(x.headers.name == y.headers.name && x.headers.filename == y.headers.filename);
        FUZZ_CHECK(x.headers.content_type == y.headers.content_type && x.data == y.data);
    }

    ferry::relay::FormTree form(ferry::relay::FormLimits{.max_fields = 100, .max_depth = 8});
    for (const auto &p : whole.parts) {
        if (p.headers.filename) {
            ferry::relay::UploadedFile f;
            f.name = *p.headers.filename;
            f.mime = p.headers.content_type;
            f.size = p.data.size();
            f.tmp_name = "/tmp/ferry-upload-x";
            if (!form.add_file(p.headers.name, std::move(f)))
                break;
        } else if (!form.add(p.headers.name, p.data)) {
            break;
        }
    }
    fuzz::check_form_encodings(form);
    return 0;
}
