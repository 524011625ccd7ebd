#include "form_body.hpp"

namespace ferry::server::detail {

void FormBody::begin(std::uint64_t expected)
{
    clear();
    expected_ = expected;
}

HttpResult<void> FormBody::write(std::string_view bytes)
{
    if (expected_ > max_size_ || text_.size() + bytes.size() > max_size_)
        return HttpError{413, "form body larger than http.limits.max_form_size (" +
                                  std::to_string(max_size_) + " bytes)"};
    if (!reserved_.grow(budget_, bytes.size()))
        return HttpError{503,
                         "no memory left for request bodies (http.limits.max_body_memory) to parse a form"};
    text_.append(bytes.data(), bytes.size());
    return {};
}

void FormBody::clear()
{
    expected_ = 0;
    text_.clear();
    if (text_.capacity() > 4096)
        std::string().swap(text_);
    reserved_.reset();
}

} // namespace ferry::server::detail
