// Which sanitizers this translation unit is built with: SHARDJIT_ASAN and SHARDJIT_TSAN are
// defined to 1 under AddressSanitizer and ThreadSanitizer (GCC and Clang spellings alike).
#ifndef SHARDJIT_RUNTIME_SANITIZERS_H_
#define SHARDJIT_RUNTIME_SANITIZERS_H_

#if defined(__SANITIZE_ADDRESS__)
#define SHARDJIT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SHARDJIT_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define SHARDJIT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SHARDJIT_TSAN 1
#endif
#endif

#endif  // SHARDJIT_RUNTIME_SANITIZERS_H_
