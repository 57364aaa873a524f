/*
 * cbroken: a DELIBERATELY BROKEN build of cpage.c, to prove that nandlab's
 * checks catch a C FTL's bugs as they catch a Rust one's (like `buggy`).
 * Never use it for anything else.
 *
 * - Its garbage collection forgets the last valid page of every victim: the
 *   mapping keeps pointing into the erased victim, so a later read returns
 *   whatever the block holds next. `nandlab stress` reports it.
 * - Option crash_at_request=N: host request N (a read or a write)
 *   dereferences a NULL pointer (a segfault in C code), for `--isolate`.
 */
#define CPAGE_BROKEN 1
#include "cpage.c"
