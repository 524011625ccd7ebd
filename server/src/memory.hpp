// Giving freed heap memory back to the system (internal to server/).
#pragma once

namespace ferry::server::detail {

// Large buffers (a big header, body or response) come from mmap and go back to the system when freed; set
// once at startup. glibc would otherwise raise its mmap threshold after the first such free and keep later
// ones in the heap.
void configure_allocator();

// Cheap when there is little to do: if the heap holds more than a few MiB of free memory (a burst of large
// requests is over), returns its free pages to the system. Called about once a second.
void return_free_memory();

} // namespace ferry::server::detail
