//! How `serve` asks glibc's `malloc` to grow: in large steps, from one
//! heap, never handing memory back.
//!
//! `serve` keeps every byte a client writes ([`super::bytes`]): each
//! write's payload is one allocation that lives until the sectors are
//! written again and the stale version leaves the window. With glibc's
//! defaults that costs system calls on the request path (`perf record -g`
//! of the server under `nandlab bench serve`, `docs/design-notes/serve.md`):
//! - a connection thread allocates from a per-thread arena, whose heap
//!   grows by `mprotect` of the few pages needed at a time (glibc's
//!   `grow_heap` takes no `M_TOP_PAD`), so 4 KiB writes spent about a
//!   sixth of the server's time in `mprotect` and VMA splits;
//! - payloads of 128 KiB and more are above the default mmap threshold:
//!   each is a fresh `mmap` (and `munmap` when it is dropped), its pages
//!   faulted in again every time.
//!
//! So, before any thread starts: one arena (`M_ARENA_MAX` 1: the
//! connections execute one at a time under the drive's lock anyway), grown
//! by `brk` 64 MiB at a time (`M_TOP_PAD`), payloads below the largest the
//! protocol allows (32 MiB, also glibc's ceiling) kept in the heap
//! (`M_MMAP_THRESHOLD`), and freed memory
//! kept for the next payloads rather than trimmed (`M_TRIM_THRESHOLD`).
//! The cost is address space held after a peak, which `serve` would
//! fill again anyway. These are the knobs of `mallopt(3)`; on a C library
//! other than glibc this does nothing.
//!
//! **When.** After the drive is built, before the server's threads start.
//! Set earlier, the drive's large zeroed tables (FTL map, NAND page
//! slots, oracle) came from the heap instead of fresh `mmap`s, and
//! `calloc` on heap memory writes its zeros: every page of every table
//! became resident at once. On femu-bbssd the idle server's peak RSS was
//! 62 MiB that way and is 8 MiB now (`stress` on the same drive: 9-40
//! MiB, as the tables fill).

use crate::host::nbd::MAX_PAYLOAD_BYTES;

/// Heap growth step, bytes.
pub const TOP_PAD_BYTES: i32 = 64 << 20;

/// Apply the settings above (process-wide; call before threads start).
pub fn tune_for_serve() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // glibc's largest (32 MiB on 64-bit): all payloads but a maximal one.
        let mmap_threshold_bytes = MAX_PAYLOAD_BYTES as i32;
        // SAFETY: mallopt only changes malloc's parameters; it is called
        // with documented options and in-range values.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 1);
            libc::mallopt(libc::M_TOP_PAD, TOP_PAD_BYTES);
            libc::mallopt(libc::M_MMAP_THRESHOLD, mmap_threshold_bytes);
            libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = MAX_PAYLOAD_BYTES;
}
