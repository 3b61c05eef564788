#include "common/heap.h"

#include <sys/mman.h>

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace wsync {

// Under AddressSanitizer every block stays on its heap, where overflows are caught.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kUsePages = true;
#else
constexpr bool kUsePages = true;
#endif

void* pages_allocate(size_t bytes) {
  if (!kUsePages || bytes < kHeapReturnBytes) return ::operator new(bytes);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return p;
}

void pages_free(void* p, size_t bytes) noexcept {
  if (p == nullptr) return;
  if (!kUsePages || bytes < kHeapReturnBytes) {
    ::operator delete(p);
    return;
  }
  munmap(p, bytes);
}

void heap_return_free() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

}  // namespace wsync
