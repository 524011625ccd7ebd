#include "memory.hpp"

#include <malloc.h>

namespace ferry::server::detail {

void configure_allocator()
{
    ::mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    ::mallopt(M_TRIM_THRESHOLD, 1024 * 1024);
}

void return_free_memory()
{
    struct mallinfo2 mi = ::mallinfo2();
    if (mi.fordblks > 8 * 1024 * 1024)
        ::malloc_trim(64 * 1024);
}

} // namespace ferry::server::detail
