#include "form_body.hpp"

#include <algorithm>

namespace ferry::server::detail {

HttpResult<void> reserve_form_memory(Reservation &reserved, Budget &budget, std::uint64_t bytes)
{
    if (bytes <= reserved.bytes())
        return {};
    switch (reserved.grow_request(budget, bytes - reserved.bytes())) {
    case Budget::Take::ok:
        return {};
    case Budget::Take::over_share:
        return HttpError{413, "form larger than one connection's share of http.limits.max_body_memory (" +
                                  std::to_string(budget.share()) + " bytes)"};
    case Budget::Take::spent:
        break;
    }
    return HttpError{503, "no memory left for request bodies (http.limits.max_body_memory) to parse a form"};
}

std::uint64_t next_capacity(std::uint64_t capacity, std::uint64_t need, std::uint64_t max)
{
    if (need <= capacity)
        return capacity;
    return std::max(need, std::min(2 * capacity, max));
}

void FormBody::begin(std::uint64_t expected)
{
    clear();
    expected_ = expected;
}

HttpResult<void> FormBody::write(std::string_view bytes)
{
    const std::uint64_t need = text_.size() + bytes.size();
    if (expected_ > max_size_ || need > max_size_)
        return HttpError{413, "form body larger than http.limits.max_form_size (" +
                                  std::to_string(max_size_) + " bytes)"};
    if (std::max(need, expected_) > text_.capacity()) {
        // Content-Length known: all of it at once (no copy as it grows); chunked: doubling.
        std::uint64_t cap = expected_ >= need ? expected_ : next_capacity(text_.capacity(), need, max_size_);
        if (auto r = reserve_form_memory(reserved_, budget_, cap); !r)
            return r;
        text_.reserve(static_cast<std::size_t>(cap));
    }
    text_.append(bytes.data(), bytes.size());
    return {};
}

void FormBody::drop_text()
{
    text_.clear();
    if (text_.capacity() > 4096)
        std::string().swap(text_);
}

void FormBody::clear()
{
    expected_ = 0;
    drop_text();
    reserved_.reset();
}

} // namespace ferry::server::detail
