// The body sink of a multipart/form-data request (internal to server/): fields into a form tree (in memory,
// within http.limits.max_form_size and the body budget, like a urlencoded form), file parts streamed to temp
// files in http.uploads.dir as they arrive and described in an uploads tree (docs/protocol.md §3). The temp
// files are deleted by clear() — after the response, or when the connection ends for any reason (the
// destructor).
#pragma once

#include "ferry/base/budget.hpp"
#include "ferry/relay/form.hpp"
#include "multipart.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ferry::server::detail {

struct UploadRules {
    std::string dir;                      // where temp files go
    std::string prefix = "ferry-upload-"; // their names' start (UploadsDir::prefix)
    std::vector<std::string> forbid;      // extensions (".php"), case-insensitive: error 8
    std::vector<std::string> allow;       // when not empty, only these extensions: error 8 for others
    std::uint64_t max_file_size = 0;      // per file, 0 = none: error 1 beyond
    std::uint64_t max_fields_size = 8 * 1024 * 1024; // all non-file fields together: 413 beyond
    relay::FormLimits limits;
    // Field text in memory counts against it (reserve_form_memory: 413 past the connection's share, 503
    // when spent); null: not counted (tests).
    Budget *budget = nullptr;
};

class MultipartBody final : public BodySink, private MultipartHandler {
public:
    explicit MultipartBody(UploadRules rules);
    ~MultipartBody() override;
    MultipartBody(const MultipartBody &) = delete;
    MultipartBody &operator=(const MultipartBody &) = delete;

    // A request with this Content-Type comes (at its head): an invalid boundary fails its first write.
    void start(std::string_view content_type);
    void begin(std::uint64_t expected) override;
    HttpResult<void> write(std::string_view bytes) override;
    // The body is complete: fails when it was not a whole multipart body.
    HttpResult<void> finish();

    const relay::FormTree &fields() const { return fields_; }
    const relay::FormTree &files() const { return files_; }
    // Deletes the temp files and forgets the form.
    void clear();

private:
    HttpResult<void> part_begin(const PartHeaders &headers) override;
    HttpResult<void> part_data(std::string_view bytes) override;
    HttpResult<void> part_end() override;
    bool forbidden(std::string_view filename) const;
    void drop_file(int error);

    UploadRules rules_;
    std::optional<MultipartParser> parser_;
    bool valid_ = false; // the Content-Type had a valid boundary
    relay::FormTree fields_, files_;
    std::vector<std::string> temp_paths_;
    // The part being read.
    std::string name_;
    bool is_file_ = false, discard_ = false;
    std::string value_;
    std::uint64_t fields_size_ = 0;
    std::uint64_t fields_done_ = 0; // bytes of the fields already in fields_
    Reservation reserved_;          // fields_done_ + value_'s capacity
    relay::UploadedFile file_;
    int fd_ = -1;
};

} // namespace ferry::server::detail
