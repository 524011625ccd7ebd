// Content types by file extension, from the system's table (/etc/mime.types, Debian's media-types
// package), read once per process before the loops start and read-only after (internal to server/).
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>

namespace ferry::server::detail {

class MimeTypes {
public:
    // Reads `path`; a missing or unreadable file leaves the table empty (loaded() is false).
    explicit MimeTypes(const std::string &path = "/etc/mime.types");
    bool loaded() const { return !types_.empty(); }
    std::size_t size() const { return types_.size(); }
    // The Content-Type for a file name: by its last extension, case-insensitive; text types (and
    // JavaScript and JSON) with "; charset=utf-8"; "application/octet-stream" when unknown.
    std::string_view for_file(std::string_view name) const;

private:
    std::unordered_map<std::string, std::string> types_; // "css" -> "text/css; charset=utf-8"
};

} // namespace ferry::server::detail
