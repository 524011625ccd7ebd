#include "multipart_body.hpp"

#include "form_body.hpp"

#include "ferry/server/http_grammar.hpp"

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

namespace ferry::server::detail {
namespace {

// The client's file name without any directory part or control byte (never used as a path).
std::string base_name(std::string_view name)
{
    auto slash = name.find_last_of("/\\");
    if (slash != std::string_view::npos)
        name = name.substr(slash + 1);
    std::string out;
    for (unsigned char c : name)
        if (c >= 0x20 && c != 0x7f)
            out += static_cast<char>(c);
    return out;
}

std::string extension(std::string_view name)
{
    auto dot = name.rfind('.');
    std::string ext(dot == std::string_view::npos ? std::string_view() : name.substr(dot));
    for (char &c : ext)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return ext;
}

bool in(const std::vector<std::string> &exts, const std::string &ext)
{
    for (const auto &e : exts)
        if (iequals(e, ext))
            return true;
    return false;
}

} // namespace

MultipartBody::MultipartBody(UploadRules rules)
    : rules_(std::move(rules)), fields_(rules_.limits), files_(rules_.limits)
{
}

MultipartBody::~MultipartBody()
{
    clear();
}

void MultipartBody::start(std::string_view content_type)
{
    clear();
    auto boundary = MultipartParser::boundary_of(content_type);
    valid_ = boundary.has_value();
    if (!valid_)
        return;
    MultipartParser::Limits l;
    l.max_parts = rules_.limits.max_fields;
    if (parser_)
        parser_->reset(*boundary);
    else
        parser_.emplace(*boundary, l, static_cast<MultipartHandler &>(*this));
}

void MultipartBody::begin(std::uint64_t) {}

HttpResult<void> MultipartBody::write(std::string_view bytes)
{
    if (!valid_)
        return HttpError{400, "multipart/form-data without a valid boundary parameter"};
    return parser_->feed(bytes);
}

HttpResult<void> MultipartBody::finish()
{
    if (!valid_)
        return HttpError{400, "multipart/form-data without a valid boundary parameter"};
    return parser_->finish();
}

void MultipartBody::clear()
{
    if (fd_ >= 0)
        ::close(fd_);
    fd_ = -1;
    for (const auto &p : temp_paths_)
        ::unlink(p.c_str());
    temp_paths_.clear();
    fields_.clear();
    files_.clear();
    value_.clear();
    fields_size_ = 0;
    fields_done_ = 0;
    if (value_.capacity() > 4096)
        std::string().swap(value_);
    reserved_.reset();
}

bool MultipartBody::forbidden(std::string_view filename) const
{
    std::string ext = extension(filename);
    if (in(rules_.forbid, ext))
        return true;
    return !rules_.allow.empty() && !in(rules_.allow, ext);
}

void MultipartBody::drop_file(int error)
{
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
        ::unlink(file_.tmp_name.c_str());
    }
    file_.error = error;
    file_.size = 0;
    file_.tmp_name.clear();
    discard_ = true;
}

HttpResult<void> MultipartBody::part_begin(const PartHeaders &h)
{
    name_ = h.name;
    is_file_ = h.filename.has_value();
    discard_ = false;
    value_.clear();
    if (!is_file_)
        return {};
    file_ = relay::UploadedFile{};
    file_.name = base_name(*h.filename);
    file_.mime = h.content_type;
    if (h.filename->empty()) { // an empty file input
        drop_file(4);
        return {};
    }
    if (forbidden(file_.name)) {
        drop_file(8);
        return {};
    }
    std::string path = rules_.dir + "/" + rules_.prefix + "XXXXXX";
    fd_ = ::mkostemp(path.data(), O_CLOEXEC);
    if (fd_ < 0) {
        drop_file(6); // UPLOAD_ERR_NO_TMP_DIR
        return {};
    }
    temp_paths_.push_back(path);
    file_.tmp_name = std::move(path);
    return {};
}

HttpResult<void> MultipartBody::part_data(std::string_view bytes)
{
    if (discard_)
        return {};
    if (!is_file_) {
        fields_size_ += bytes.size();
        if (fields_size_ > rules_.max_fields_size)
            return HttpError{413, "form fields larger than http.limits.max_form_size (" +
                                      std::to_string(rules_.max_fields_size) + " bytes)"};
        const std::uint64_t need = value_.size() + bytes.size();
        if (need > value_.capacity()) {
            std::uint64_t cap = next_capacity(value_.capacity(), need, rules_.max_fields_size - fields_done_);
            if (rules_.budget) {
                if (auto r = reserve_form_memory(reserved_, *rules_.budget, fields_done_ + cap); !r)
                    return r;
            }
            value_.reserve(static_cast<std::size_t>(cap));
        }
        value_.append(bytes.data(), bytes.size());
        return {};
    }
    if (rules_.max_file_size > 0 && file_.size + bytes.size() > rules_.max_file_size) {
        drop_file(1); // UPLOAD_ERR_INI_SIZE
        return {};
    }
    while (!bytes.empty()) {
        ssize_t n = ::write(fd_, bytes.data(), bytes.size());
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            drop_file(7); // UPLOAD_ERR_CANT_WRITE
            return {};
        }
        file_.size += static_cast<std::uint64_t>(n);
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return {};
}

HttpResult<void> MultipartBody::part_end()
{
    if (!is_file_) {
        fields_done_ += value_.size();
        if (auto r = fields_.add(name_, value_); !r)
            return HttpError{400, r.error().message};
        return {};
    }
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
    }
    if (auto r = files_.add_file(name_, std::move(file_)); !r)
        return HttpError{400, r.error().message};
    return {};
}

} // namespace ferry::server::detail
