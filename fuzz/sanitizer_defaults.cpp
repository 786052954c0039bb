// Default sanitizer runtime options of the deltagen binaries built with
// DELTAGEN_SANITIZE / DELTAGEN_FUZZ (linked into the CLI and the test binary
// only; the environment's ASAN_OPTIONS / UBSAN_OPTIONS still override them).
// The runtimes look these functions up when the process starts.

extern "C" {

// Every report stops the program with a stack trace: a test that trips a
// sanitizer fails, even when the report comes from a child process (the CLI).
const char* __asan_default_options() { return "halt_on_error=1:abort_on_error=0:strict_string_checks=1"; }

const char* __ubsan_default_options() { return "halt_on_error=1:print_stacktrace=1"; }

// ONNX Runtime (a prebuilt, uninstrumented library) keeps a few small
// allocations for the life of the process (14 bytes per process, allocated
// inside libonnxruntime.so); they are not ours to fix. Leaks allocated by our
// own code are still reported.
const char* __lsan_default_suppressions() { return "leak:libonnxruntime.so\n"; }
// ... and without the "Suppressions used" table on stderr: CLI tests check
// that an error is exactly one line.
const char* __lsan_default_options() { return "print_suppressions=0"; }

}
