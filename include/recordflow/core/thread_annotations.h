// Clang thread-safety annotations (checked with -Wthread-safety under clang, see the CMake
// option RF_THREAD_SAFETY_ANALYSIS; no-ops elsewhere). Use them with recordflow::Mutex
// (core/mutex.h), whose type carries the capability the analysis tracks.
#pragma once

#if defined(__clang__)
#define RF_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define RF_THREAD_ANNOTATION(x)
#endif

// A type that is a lock (a "capability" named `name` in the analysis' messages).
#define RF_CAPABILITY(name) RF_THREAD_ANNOTATION(capability(name))
// An RAII type that holds a capability for its lifetime.
#define RF_SCOPED_CAPABILITY RF_THREAD_ANNOTATION(scoped_lockable)
// The member may only be read or written with `mu` held.
#define RF_GUARDED_BY(mu) RF_THREAD_ANNOTATION(guarded_by(mu))
// The pointee may only be read or written with `mu` held.
#define RF_PT_GUARDED_BY(mu) RF_THREAD_ANNOTATION(pt_guarded_by(mu))
// The function must be called with the capabilities held (and keeps them held).
#define RF_REQUIRES(...) RF_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
// The function must be called without the capabilities held (it takes them itself).
#define RF_EXCLUDES(...) RF_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// The function acquires / releases the capabilities (the object itself when none are named).
#define RF_ACQUIRE(...) RF_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RF_RELEASE(...) RF_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RF_TRY_ACQUIRE(...) RF_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// Tells the analysis the capability is held here (checked by the caller's logic, not by it).
#define RF_ASSERT_HELD(x) RF_THREAD_ANNOTATION(assert_capability(x))
// Opts a function out of the analysis; say why next to each use.
#define RF_NO_THREAD_SAFETY_ANALYSIS RF_THREAD_ANNOTATION(no_thread_safety_analysis)
