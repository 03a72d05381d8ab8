// Clang thread-safety annotations (checked with -Wthread-safety under clang; no-ops elsewhere).
#pragma once

#if defined(__clang__)
#define RF_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define RF_THREAD_ANNOTATION(x)
#endif

// The member may only be read or written with `mu` held.
#define RF_GUARDED_BY(mu) RF_THREAD_ANNOTATION(guarded_by(mu))
