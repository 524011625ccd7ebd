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

std::string CompressedCache::key_of(std::string_view path, compress::Coding coding)
{
    std::string key(compress::coding_name(coding));
    key += ':';
    key += path;
    return key;
}

std::shared_ptr<const std::string> CompressedCache::find(std::string_view path, compress::Coding coding,
                                                         std::string_view etag)
{
    const auto it = index_.find(key_of(path, coding));
    if (it == index_.end())
        return nullptr;
    if (it->second->etag != etag) { // the file changed since
        drop(it->second);
        return nullptr;
    }
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->bytes;
}

void CompressedCache::put(std::string_view path, compress::Coding coding, std::string etag,
                          std::shared_ptr<const std::string> bytes)
{
    std::string key = key_of(path, coding);
    if (const auto it = index_.find(key); it != index_.end())
        drop(it->second);
    const std::size_t size = bytes->size();
    if (size > capacity_ / 4)
        return;
    while (!lru_.empty() && bytes_ + size > capacity_)
        drop(std::prev(lru_.end()));
    lru_.push_front(Entry{key, std::move(etag), std::move(bytes)});
    index_.emplace(std::move(key), lru_.begin());
    bytes_ += size;
    if (counters_)
        counters_->static_cached(static_cast<std::int64_t>(size));
}

void CompressedCache::drop(std::list<Entry>::iterator it)
{
    const std::size_t size = it->bytes->size();
    bytes_ -= size;
    if (counters_)
        counters_->static_cached(-static_cast<std::int64_t>(size));
    index_.erase(it->key);
    lru_.erase(it);
}

bool CompressedCache::start(std::string_view path, compress::Coding coding)
{
    return busy_.emplace(key_of(path, coding), true).second;
}

void CompressedCache::done(std::string_view path, compress::Coding coding)
{
    busy_.erase(key_of(path, coding));
}

} // namespace ferry::server::detail
