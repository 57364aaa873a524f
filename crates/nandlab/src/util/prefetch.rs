//! Memory-access helpers for the simulator's large, randomly accessed
//! tables (page slots, maps, the oracle): software prefetch, and tables
//! backed by transparent huge pages.
//!
//! A run touches hundreds of MiB at random; with 4 KiB pages nearly every
//! access is also a TLB miss. Asking Linux for 2 MiB pages on the big
//! tables (`madvise(MADV_HUGEPAGE)`, honoured when THP is in `madvise` or
//! `always` mode) cuts those misses (measured in
//! `docs/design-notes/util.md`). Neither helper changes any result.
//!
//! Tables whose initial state is all zero bytes ([`zeroed_vec`]) come from
//! `calloc`, i.e. fresh anonymous pages the kernel maps only when first
//! written: a 512 GiB drive costs nothing until the workload touches it.
//! The NAND, the page FTL's
//! map and the oracle encode their initial states as zero for this reason.

/// Hint that `slice[index]` will be accessed soon (no-op if out of bounds).
#[inline(always)]
pub fn prefetch<T>(slice: &[T], index: usize) {
    if let Some(item) = slice.get(index) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: PREFETCHT0 only hints the cache; it never faults and reads
        // no data, and the pointer comes from a live reference.
        unsafe {
            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(item as *const T as *const i8);
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = item;
    }
}

/// Tables smaller than this are not worth a huge page.
const HUGE_PAGE_BYTES: usize = 2 << 20;

/// A vector of `len` copies of `value`, backed by huge pages where the OS
/// allows (the pages are advised before they are first touched).
pub fn large_vec<T: Clone>(len: usize, value: T) -> Vec<T> {
    let mut v = Vec::with_capacity(len);
    advise_huge_pages(v.as_ptr() as *const u8, len * std::mem::size_of::<T>());
    v.resize(len, value);
    v
}

/// A table of `len` all-zero values, resident only as it is written. With
/// `huge_pages`, touched regions are backed by 2 MiB pages: faster for
/// tables accessed at random (the map, the oracle), but each first touch
/// makes 2 MiB resident, so tables written in a few sequential streams
/// (page slots) are better without.
pub fn zeroed_vec<T: bytemuck::Zeroable + Clone>(len: usize, huge_pages: bool) -> Vec<T> {
    let v: Vec<T> = bytemuck::zeroed_vec(len);
    if huge_pages {
        advise_huge_pages(v.as_ptr() as *const u8, len * std::mem::size_of::<T>());
    }
    v
}

/// [`zeroed_vec`] whose allocation may fail (a table sized by the user's
/// device): `None` instead of a panic or an abort.
pub fn try_zeroed_vec<T: bytemuck::Zeroable + Clone>(len: usize, huge_pages: bool) -> Option<Vec<T>> {
    len.checked_mul(std::mem::size_of::<T>()).filter(|&b| b <= isize::MAX as usize)?;
    let v: Vec<T> = bytemuck::allocation::try_zeroed_vec(len).ok()?;
    if huge_pages {
        advise_huge_pages(v.as_ptr() as *const u8, len * std::mem::size_of::<T>());
    }
    Some(v)
}

#[cfg(target_os = "linux")]
fn advise_huge_pages(ptr: *const u8, bytes: usize) {
    if bytes < HUGE_PAGE_BYTES {
        return;
    }
    const PAGE: usize = 4096;
    let start = (ptr as usize).div_ceil(PAGE) * PAGE;
    let end = (ptr as usize + bytes) / PAGE * PAGE;
    if end > start {
        // SAFETY: the range lies inside an allocation this process owns;
        // MADV_HUGEPAGE changes only how it is paged, never its contents.
        // Failure (THP disabled) is harmless and ignored.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_ptr: *const u8, _bytes: usize) {}

#[cfg(test)]
mod tests {
    #[test]
    fn large_vec_holds_its_values() {
        let v = super::large_vec(3 << 20, 7u8);
        assert_eq!(v.len(), 3 << 20);
        assert!(v.iter().all(|&x| x == 7));
        super::prefetch(&v, 10);
        super::prefetch(&v, usize::MAX);
    }
}
