#include "chunked_decoder.hpp"

#include "ferry/server/http_grammar.hpp"

namespace ferry::server {
namespace {

bool is_ws(unsigned char c)
{
    return c == ' ' || c == '\t';
}

// qdtext = HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text
bool is_qdtext(unsigned char c)
{
    return c == '\t' || c == ' ' || c == 0x21 || (c >= 0x23 && c <= 0x5B) || (c >= 0x5D && c <= 0x7E) ||
           c >= 0x80;
}

bool is_field_byte(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

} // namespace

void ChunkedDecoder::reset()
{
    state_ = State::size;
    chunk_ = left_ = total_ = 0;
    digits_ = 0;
    any_digit_ = false;
    line_ = trailers_ = 0;
    status_ = 0;
    message_.clear();
}

bool ChunkedDecoder::fail(int status, std::string message)
{
    status_ = status;
    message_ = std::move(message);
    return false;
}

bool ChunkedDecoder::end_size_line()
{
    if (!any_digit_)
        return fail(400, "chunk without a size");
    if (chunk_ > limits_.max_body || total_ + chunk_ > limits_.max_body)
        return fail(413, "chunk of " + std::to_string(chunk_) +
                             " bytes would make the request body larger than max_request_size (" +
                             std::to_string(limits_.max_body) + " bytes)");
    return true;
}

// One byte of a chunk-size line (size, extensions, up to its CR).
bool ChunkedDecoder::size_line_char(unsigned char c)
{
    if (++line_ > limits_.max_size_line)
        return fail(400, "chunk size line longer than " + std::to_string(limits_.max_size_line) + " bytes");
    if (c == '\r') {
        switch (state_) {
        case State::size:
        case State::ext_name:
        case State::ext_token:
        case State::ext_quoted_end:
            if (!end_size_line())
                return false;
            state_ = State::size_lf;
            return true;
        case State::size_bws:
        case State::ext_post_name:
        case State::ext_post_value:
            // RFC 9112 §7.1: chunk-size = 1*HEXDIG, chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS value ] ):
            // whitespace only before a ";" or "=" that follows, never at the end ("5 \r\n" is no size).
            return fail(400, "whitespace at the end of a chunk size line");
        default:
            return fail(400, "incomplete chunk extension");
        }
    }
    switch (state_) {
    case State::size:
        if (int v = hex_value(static_cast<char>(c)); v >= 0) {
            any_digit_ = true;
            if (digits_ > 0 || v != 0)
                ++digits_;
            if (digits_ > 16)
                return fail(400, "chunk size does not fit in 64 bits");
            chunk_ = chunk_ * 16 + static_cast<unsigned>(v);
            return true;
        }
        if (!any_digit_)
            return fail(400, "invalid chunk size");
        if (is_ws(c)) {
            state_ = State::size_bws;
            return true;
        }
        if (c == ';') {
            state_ = State::ext_pre_name;
            return true;
        }
        return fail(400, "invalid character in chunk size");
    case State::size_bws:
    case State::ext_post_name:
    case State::ext_post_value:
    case State::ext_quoted_end:
        if (is_ws(c)) {
            if (state_ == State::ext_quoted_end)
                state_ = State::ext_post_value;
            return true;
        }
        if (c == ';') {
            state_ = State::ext_pre_name;
            return true;
        }
        if (c == '=' && state_ == State::ext_post_name) {
            state_ = State::ext_pre_value;
            return true;
        }
        return fail(400, "invalid chunk extension");
    case State::ext_pre_name:
        if (is_ws(c))
            return true;
        if (is_tchar(c)) {
            state_ = State::ext_name;
            return true;
        }
        return fail(400, "invalid chunk extension name");
    case State::ext_name:
        if (is_tchar(c))
            return true;
        if (is_ws(c)) {
            state_ = State::ext_post_name;
            return true;
        }
        if (c == ';') {
            state_ = State::ext_pre_name;
            return true;
        }
        if (c == '=') {
            state_ = State::ext_pre_value;
            return true;
        }
        return fail(400, "invalid chunk extension name");
    case State::ext_pre_value:
        if (is_ws(c))
            return true;
        if (c == '"') {
            state_ = State::ext_quoted;
            return true;
        }
        if (is_tchar(c)) {
            state_ = State::ext_token;
            return true;
        }
        return fail(400, "invalid chunk extension value");
    case State::ext_token:
        if (is_tchar(c))
            return true;
        if (is_ws(c)) {
            state_ = State::ext_post_value;
            return true;
        }
        if (c == ';') {
            state_ = State::ext_pre_name;
            return true;
        }
        return fail(400, "invalid chunk extension value");
    case State::ext_quoted:
        if (c == '"') {
            state_ = State::ext_quoted_end;
            return true;
        }
        if (c == '\\') {
            state_ = State::ext_escape;
            return true;
        }
        if (is_qdtext(c))
            return true;
        return fail(400, "invalid character in a quoted chunk extension");
    case State::ext_escape:
        if (c == '\t' || (c >= 0x20 && c != 0x7f)) {
            state_ = State::ext_quoted;
            return true;
        }
        return fail(400, "invalid quoted-pair in a chunk extension");
    default:
        return fail(400, "internal: chunk size line in the wrong state");
    }
}

ChunkedDecoder::Step ChunkedDecoder::step(std::string_view in)
{
    Step st;
    const auto *p = reinterpret_cast<const unsigned char *>(in.data());
    std::size_t i = 0;
    while (i < in.size() && status_ == 0 && state_ != State::done) {
        unsigned char c = p[i];
        switch (state_) {
        case State::size_lf:
        case State::data_lf:
        case State::trailer_lf:
        case State::final_lf:
            if (c != '\n') {
                fail(400, "bare CR in chunked framing (lines must end with CRLF)");
                break;
            }
            ++i;
            if (state_ == State::size_lf) {
                if (chunk_ == 0) {
                    state_ = State::trailer_start;
                } else {
                    left_ = chunk_;
                    state_ = State::data;
                }
            } else if (state_ == State::data_lf) {
                state_ = State::size;
                chunk_ = 0;
                digits_ = 0;
                any_digit_ = false;
                line_ = 0;
            } else if (state_ == State::trailer_lf) {
                state_ = State::trailer_start;
            } else {
                state_ = State::done;
            }
            break;
        case State::data: {
            std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left_, in.size() - i));
            if (i > 0) {
                st.used = i; // return the framing first, then the data on its own
                return st;
            }
            st.used = n;
            st.data = in.substr(0, n);
            left_ -= n;
            total_ += n;
            if (left_ == 0)
                state_ = State::data_cr;
            return st;
        }
        case State::data_cr:
            if (c != '\r') {
                fail(400, "chunk data not followed by CRLF");
                break;
            }
            ++i;
            state_ = State::data_lf;
            break;
        case State::trailer_start:
        case State::trailer_name:
        case State::trailer_value:
            if (++trailers_ > limits_.max_trailers) {
                fail(431, "trailers larger than " + std::to_string(limits_.max_trailers) + " bytes");
                break;
            }
            ++i;
            if (c == '\r') {
                if (state_ == State::trailer_start) {
                    state_ = State::final_lf;
                } else if (state_ == State::trailer_value) {
                    state_ = State::trailer_lf;
                } else {
                    fail(400, "trailer line without a colon");
                }
            } else if (c == '\n') {
                fail(400, "bare LF in chunked trailers (lines must end with CRLF)");
            } else if (state_ == State::trailer_start) {
                if (is_ws(c))
                    fail(400, "obsolete line folding in a trailer");
                else if (!is_tchar(c))
                    fail(400, "invalid trailer name");
                else
                    state_ = State::trailer_name;
            } else if (state_ == State::trailer_name) {
                if (c == ':')
                    state_ = State::trailer_value;
                else if (!is_tchar(c))
                    fail(400, "invalid trailer name");
            } else if (!is_field_byte(c)) {
                fail(400, "control byte in a trailer value");
            }
            break;
        case State::done:
            break;
        default: // the size line
            if (!size_line_char(c))
                break;
            ++i;
            break;
        }
    }
    st.used = i;
    return st;
}

} // namespace ferry::server
