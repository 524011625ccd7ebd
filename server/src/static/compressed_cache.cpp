#include "compressed_cache.hpp"

namespace ferry::server::detail {

CompressedCache::CompressedCache(std::size_t capacity, compress::Counters *counters)
    : capacity_(capacity), counters_(counters)
{
}

CompressedCache::~CompressedCache()
{
    if (counters_)
        counters_->static_cached(-static_cast<std::int64_t>(bytes_));
}

const std::string &CompressedCache::key_of(std::string_view path, compress::Coding coding)
{
    key_.assign(compress::coding_name(coding));
    key_ += ':';
    key_ += path;
    return key_;
}

std::shared_ptr<const CompressedFile> CompressedCache::find(std::string_view path, compress::Coding coding,
                                                            std::string_view file_etag)
{
    const auto it = index_.find(key_of(path, coding));
    if (it == index_.end())
        return nullptr;
    if (it->second->file_etag != file_etag) { // the file changed since
        drop(it->second);
        return nullptr;
    }
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->file;
}

std::shared_ptr<const CompressedFile> CompressedCache::put(std::string_view path, compress::Coding coding,
                                                           std::string_view file_etag, std::string bytes)
{
    auto file = std::make_shared<CompressedFile>();
    file->bytes = std::move(bytes);
    file->etag = file_etag.starts_with("W/") ? std::string(file_etag) : "W/" + std::string(file_etag);
    const std::string &key = key_of(path, coding);
    if (const auto it = index_.find(key); it != index_.end())
        drop(it->second);
    const std::size_t size = file->bytes.size();
    if (size > capacity_ / 4 + 1024) // incompressible text may come out a little larger than it went in
        return file;
    while (!lru_.empty() && bytes_ + size > capacity_)
        drop(std::prev(lru_.end()));
    lru_.push_front(Entry{key_, std::string(file_etag), file});
    index_.emplace(key_, lru_.begin());
    bytes_ += size;
    if (counters_)
        counters_->static_cached(static_cast<std::int64_t>(size));
    return file;
}

void CompressedCache::drop(std::list<Entry>::iterator it)
{
    const std::size_t size = it->file->bytes.size();
    bytes_ -= size;
    if (counters_)
        counters_->static_cached(-static_cast<std::int64_t>(size));
    index_.erase(it->key);
    lru_.erase(it);
}

bool CompressedCache::start(std::string_view path, compress::Coding coding)
{
    return busy_.insert(key_of(path, coding)).second;
}

void CompressedCache::done(std::string_view path, compress::Coding coding)
{
    busy_.erase(key_of(path, coding));
}

} // namespace ferry::server::detail
