//! How the router asks glibc's allocator to keep its memory.
//!
//! The router's heap is small (about a megabyte at its peak: tool schemas,
//! a reply being built, a regex compiled for a call), but glibc's defaults
//! spread it out: every thread that allocates gets an arena of its own
//! (the runtime's thread and each of its blocking threads), so what one thread
//! frees another cannot reuse, and a freed block of 128 KiB or more raises
//! the mmap threshold so that the next big block comes from the heap and
//! stays resident once freed. On the 3 M-line ingest bench these two
//! defaults held 1.4 MB more resident at the peak than the settings below.
//!
//! One arena makes threads share one free list; the router's threads
//! mostly wait on tmux and the loggers, so the lock they share is rarely
//! contended. A fixed mmap threshold keeps big blocks mapped on their own,
//! given back to the kernel when freed (the logger does the same, see
//! `dtmcp_logger::run_in`).
//!
//! What is built once at start and then dropped (the tool schemas' working
//! copies) is handed back with [`give_back`]; without it, its pages stay
//! resident as free space in the middle of the heap.

/// Sets the allocator's parameters; called first thing, before any
/// thread is started (glibc applies the arena limit when a thread first
/// allocates).
pub fn tune() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets parameters of the allocator, under
    // glibc's own lock; it allocates and frees nothing.
    unsafe {
        nix::libc::mallopt(nix::libc::M_ARENA_MAX, 1);
        nix::libc::mallopt(nix::libc::M_MMAP_THRESHOLD, 128 << 10);
    }
}

/// Returns the heap's free pages to the kernel (glibc's `malloc_trim`,
/// which also releases whole free pages below the heap's top). For after a
/// one-time burst of allocation, not for a hot path: it walks the free
/// lists.
pub fn give_back() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim takes glibc's allocator lock and only releases
    // pages no allocation holds; it touches no memory of ours.
    unsafe {
        nix::libc::malloc_trim(0);
    }
}
