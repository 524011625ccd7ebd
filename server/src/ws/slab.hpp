// A free-list allocator for the long-lived small objects of one loop's WebSocket connections (internal to
// server/): the connection objects and their pending read and write waits. Idle connections are the common
// case and their memory is what the 1 KiB goal measures. From the general heap, these objects land among
// the short-lived allocations of a burst (every connection's event, its coroutine frames, its reply), and
// one of them left on each page keeps the allocator from giving that page back: measured, 10 000 idle
// connections after one message each held 4.2 KiB each, 1 KiB of it in use. Here they sit together in
// 64 KiB chunks, and a freed block serves the next object of its size. One loop's thread only.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <new>
#include <vector>

namespace ferry::server::detail::ws {

class Slab {
public:
    static constexpr std::size_t grain = 16, largest = 1024, chunk = 64 * 1024;

    Slab() = default;
    Slab(const Slab &) = delete;
    Slab &operator=(const Slab &) = delete;

    void *allocate(std::size_t n)
    {
        if (n > largest)
            return ::operator new(n);
        const std::size_t c = (n + grain - 1) / grain;
        if (Free *f = free_[c]) {
            free_[c] = f->next;
            return f;
        }
        const std::size_t size = c * grain;
        if (left_ < size) {
            chunks_.push_back(std::make_unique<std::byte[]>(chunk));
            next_ = chunks_.back().get();
            left_ = chunk;
        }
        void *p = next_;
        next_ += size;
        left_ -= size;
        return p;
    }
    void deallocate(void *p, std::size_t n)
    {
        if (n > largest) {
            ::operator delete(p);
            return;
        }
        auto *f = static_cast<Free *>(p);
        const std::size_t c = (n + grain - 1) / grain;
        f->next = free_[c];
        free_[c] = f;
    }
    std::size_t reserved() const { return chunks_.size() * chunk; }

private:
    struct Free {
        Free *next;
    };
    std::vector<std::unique_ptr<std::byte[]>> chunks_;
    std::array<Free *, largest / grain + 1> free_{};
    std::byte *next_ = nullptr;
    std::size_t left_ = 0;
};

template <typename T> struct SlabAllocator {
    using value_type = T;
    Slab *slab;
    explicit SlabAllocator(Slab *s) : slab(s) {}
    template <typename U> SlabAllocator(const SlabAllocator<U> &o) : slab(o.slab) {}
    T *allocate(std::size_t n) { return static_cast<T *>(slab->allocate(n * sizeof(T))); }
    void deallocate(T *p, std::size_t n) { slab->deallocate(p, n * sizeof(T)); }
    template <typename U> bool operator==(const SlabAllocator<U> &o) const { return slab == o.slab; }
};

} // namespace ferry::server::detail::ws
