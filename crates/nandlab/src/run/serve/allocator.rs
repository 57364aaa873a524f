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
//! **Prefaulting.** Even so, every fresh page a payload lands on was
//! faulted in on first touch: `perf record -g` of the server under fio's
//! 4 KiB random writes (2026-11-27) put a third of its time under
//! `exc_page_fault`, about one fault per request. So after each write's
//! payload is read, [`prefault_heap_past`] keeps the next
//! [`PREFAULT_AHEAD_BYTES`] of the heap resident with one
//! `madvise(MADV_POPULATE_WRITE)` (Linux 5.14) per 4 MiB: the kernel still
//! allocates, charges and zeroes each page, but without a trap per page.
//! At most that window is resident beyond what is stored. Huge pages for
//! the window (`MADV_HUGEPAGE`) were tried and cost more CPU per request
//! (this machine compacts memory for them on demand).
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
            // Where the brk heap starts: payloads from it are prefaulted
            // (`NANDLAB_SERVE_NO_PREFAULT` turns it off, to measure both).
            if std::env::var_os("NANDLAB_SERVE_NO_PREFAULT").is_none() {
                HEAP_START.store(libc::sbrk(0) as usize, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = MAX_PAYLOAD_BYTES;
}

/// Bytes of the heap kept resident ahead of the newest payload.
pub const PREFAULT_AHEAD_BYTES: usize = 8 << 20;

/// The program break when [`tune_for_serve`] ran (0: it did not, and
/// nothing is prefaulted).
static HEAP_START: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// End of the heap range made resident so far (an address; 0: none).
static PREFAULTED_END: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Make the heap resident up to [`PREFAULT_AHEAD_BYTES`] past `end` (the
/// end of a payload just allocated), in one `madvise(MADV_POPULATE_WRITE)`
/// per half window, so the fresh pages new payloads land on are not each
/// faulted in on first touch (see the module docs). Memory below the
/// prefaulted end (payloads freed and reused, `mmap`ed ones) costs nothing.
pub fn prefault_heap_past(end: usize) {
    use std::sync::atomic::Ordering::Relaxed;
    let done = PREFAULTED_END.load(Relaxed);
    if done == usize::MAX || end + PREFAULT_AHEAD_BYTES / 2 <= done {
        return;
    }
    let heap_start = HEAP_START.load(Relaxed);
    if heap_start == 0 {
        return; // not tuned for serve (or the prefault is turned off)
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: sbrk(0) only reads the current program break.
        let brk = unsafe { libc::sbrk(0) } as usize;
        // SAFETY: the brk heap is mapped from its start to the break.
        let populated = unsafe { populate_ahead(done, heap_start, brk, end) };
        PREFAULTED_END.fetch_max(populated.unwrap_or(usize::MAX), Relaxed);
    }
}

/// Populate the pages of `[max(done, end), end + PREFAULT_AHEAD_BYTES)`
/// (page-aligned, clipped to `mapped_end`) if `end` lies in `(mapped_start,
/// mapped_end]`. The new end made resident (`done` when nothing was to
/// do), or `None` if the kernel refused (before Linux 5.14).
///
/// # Safety
/// `[mapped_start, mapped_end)` must be mapped, writable anonymous memory.
#[cfg(target_os = "linux")]
unsafe fn populate_ahead(done: usize, mapped_start: usize, mapped_end: usize, end: usize) -> Option<usize> {
    const PAGE_BYTES: usize = 4096;
    if end <= mapped_start || end > mapped_end {
        return Some(done); // not in that mapping
    }
    let from = done.max(end & !(PAGE_BYTES - 1)).max(mapped_start & !(PAGE_BYTES - 1));
    let to = mapped_end.min((end + PREFAULT_AHEAD_BYTES + PAGE_BYTES - 1) & !(PAGE_BYTES - 1));
    if to <= from {
        return Some(done);
    }
    // SAFETY: [from, to) lies inside the mapping (the caller's promise);
    // populating writes no data (anonymous pages read as zeros, resident
    // or not).
    let populated = unsafe { libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_POPULATE_WRITE) };
    (populated == 0).then_some(to)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// Resident pages of `[at, at + len)` (`mincore`).
    fn resident_pages(at: usize, len: usize) -> usize {
        let mut vec = vec![0u8; len / 4096];
        // SAFETY: the range is mapped by the test; `vec` has a byte per page.
        assert_eq!(unsafe { libc::mincore(at as *mut libc::c_void, len, vec.as_mut_ptr()) }, 0);
        vec.iter().filter(|&&b| b & 1 == 1).count()
    }

    /// Past a payload's end, the next `PREFAULT_AHEAD_BYTES` of the mapping
    /// become resident at once and nothing beyond; a payload outside the
    /// mapping populates nothing. Without the `madvise` the pages stay
    /// absent until touched and the first assertion fails.
    #[test]
    fn the_window_past_a_payload_becomes_resident_and_nothing_beyond() {
        let len = 3 * PREFAULT_AHEAD_BYTES;
        // SAFETY: a fresh private anonymous mapping, unmapped below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        let start = base as usize;
        assert_eq!(resident_pages(start, len), 0, "a fresh mapping is not resident");
        let end = start + 4096 + 100; // a payload ending inside the second page
                                      // SAFETY: [start, start + len) is mapped above.
        let done = unsafe { populate_ahead(0, start, start + len, end) };
        if done.is_none() {
            eprintln!("skipped: this kernel has no MADV_POPULATE_WRITE (Linux 5.14)");
            return;
        }
        let window_pages = PREFAULT_AHEAD_BYTES / 4096 + 1;
        assert_eq!(done, Some(start + 4096 + window_pages * 4096));
        assert_eq!(resident_pages(start, len), window_pages, "the window, from the payload's last page");
        assert_eq!(resident_pages(start + 4096, window_pages * 4096), window_pages);
        // Again from a lower end: nothing below the populated end is redone.
        // SAFETY: as above.
        assert_eq!(unsafe { populate_ahead(done.unwrap(), start, start + len, end) }, done);
        // A payload outside the mapping: nothing.
        // SAFETY: as above.
        assert_eq!(unsafe { populate_ahead(0, start, start + len, start + len + 4096) }, Some(0));
        assert_eq!(resident_pages(start, len), window_pages);
        // SAFETY: the mapping made above, no longer used.
        unsafe { libc::munmap(base, len) };
    }
}
