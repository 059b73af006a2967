/* Compiler helpers shared by every layer. */
#ifndef FTW_UTIL_COMPILER_H
#define FTW_UTIL_COMPILER_H

#define ftw_likely(x)   __builtin_expect(!!(x), 1)
#define ftw_unlikely(x) __builtin_expect(!!(x), 0)
#define FTW_NORETURN    __attribute__((noreturn))
#define FTW_PRINTF(f, a) __attribute__((format(printf, f, a)))
/* The library builds with -fvisibility=hidden; exported calls say so. */
#define FTW_EXPORT      __attribute__((visibility("default")))
#define FTW_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Thread-local state: initial-exec, so an access is one %fs-relative load
 * (the library is loaded at start-up, by LD_PRELOAD or as a dependency). */
#define FTW_TLS __thread __attribute__((tls_model("initial-exec")))

#endif
