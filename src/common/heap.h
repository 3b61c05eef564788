// Keeping large, short-lived buffers out of the heap. glibc keeps what a thread's arena once held
// (a burst of large replies leaves the process that much bigger for as long as it runs, and
// malloc_trim does not shrink another thread's arena): a buffer that may grow large takes its
// pages straight from the system with PagesAllocator and gives them back when freed.
#pragma once

#include <cstddef>
#include <new>
#include <string>

namespace wsync {

// Blocks at least this large come from mmap and go back with munmap.
constexpr size_t kHeapReturnBytes = 256u << 10;

void* pages_allocate(size_t bytes);            // throws std::bad_alloc
void pages_free(void* p, size_t bytes) noexcept;

template <class T>
struct PagesAllocator {
  using value_type = T;
  PagesAllocator() = default;
  template <class U>
  PagesAllocator(const PagesAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    if (n > size_t(-1) / sizeof(T)) throw std::bad_alloc();
    return static_cast<T*>(pages_allocate(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept { pages_free(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const PagesAllocator<U>&) const noexcept { return true; }
  template <class U>
  bool operator!=(const PagesAllocator<U>&) const noexcept { return false; }
};

// Bytes that may be large and are freed soon (an engine's reply).
using PagesString = std::basic_string<char, std::char_traits<char>, PagesAllocator<char>>;

// Return the free memory of the heap to the system (malloc_trim; a no-op off glibc). Costs a
// walk of the heap: call it after freeing a burst, not per free.
void heap_return_free();

}  // namespace wsync
